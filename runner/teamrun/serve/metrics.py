"""Prometheus metrics of a server (``GET /metrics``): runs, tokens, cost and latency by team and agent; the
waits for each model's rate limit (``llm_wait``) by model and reason; cached input tokens by team and agent.

Each app has its own registry (no process-wide state), fed from the same
typed events and run results every other consumer sees.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

from teamrun.events import AgentEnd, AgentStart, Event, LlmWait, RunEnd

if TYPE_CHECKING:
    from teamrun.engine.result import RunResult

__all__ = ["CONTENT_TYPE", "ServerMetrics"]

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

_LATENCY_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600)


class ServerMetrics:
    """The server's counters; :meth:`render` is the Prometheus text exposition."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.runs = Counter(
            "teamrun_runs", "Runs finished, by team and status.", ["team", "status"], registry=self.registry
        )
        self.active = Gauge("teamrun_runs_active", "Runs in progress, by team.", ["team"], registry=self.registry)
        self.rejected = Counter(
            "teamrun_requests_rejected", "Run requests refused, by reason.", ["reason"], registry=self.registry
        )
        self.tokens = Counter(
            "teamrun_tokens",
            "Tokens used, by team, agent and direction (input/output; cached: the input read from a prompt cache).",
            ["team", "agent", "direction"],
            registry=self.registry,
        )
        self.cost = Counter(
            "teamrun_cost_usd", "Spend in US dollars, by team and agent.", ["team", "agent"], registry=self.registry
        )
        self.run_latency = Histogram(
            "teamrun_run_duration_seconds",
            "Wall time of runs, by team.",
            ["team"],
            buckets=_LATENCY_BUCKETS,
            registry=self.registry,
        )
        self.agent_latency = Histogram(
            "teamrun_agent_duration_seconds",
            "Wall time of agent invocations, by team and agent.",
            ["team", "agent"],
            buckets=_LATENCY_BUCKETS,
            registry=self.registry,
        )
        self.waits = Counter(
            "teamrun_model_waits",
            "Model requests that waited for their model's rate limit, by team, model and reason "
            "(requests_per_minute, tokens_per_minute, retry_after).",
            ["team", "model", "reason"],
            registry=self.registry,
        )
        self.wait_seconds = Counter(
            "teamrun_model_wait_seconds",
            "Seconds model requests waited for their model's rate limit, by team, model and reason.",
            ["team", "model", "reason"],
            registry=self.registry,
        )
        self._agent_started: dict[str, dict[str, float]] = {}
        """Start times of the agent invocations in progress: by run id, then span id."""
        self._waiting: dict[str, dict[str, LlmWait]] = {}
        """The rate-limit waits in progress: by run id, then the model call's span id."""
        self._children: dict[tuple[Any, ...], Any] = {}
        """Labelled metrics already looked up, by metric and label values: ``labels()`` takes a lock and
        checks its values on every call, and a run's start and end touch several."""

    def _child(self, metric: Any, *values: str) -> Any:
        key = (id(metric), *values)
        child = self._children.get(key)
        if child is None:
            child = self._children[key] = metric.labels(*values)
        return child

    def _waited(self, team: str, waiting: dict[str, LlmWait], event: Event) -> None:
        """The wait of ``event``'s model call (all of the run's, at its end) ended: the seconds it lasted, at most
        the ones it was due to last (a call cancelled during its wait waited less; attack a45b 9)."""
        for span_id in list(waiting) if isinstance(event, RunEnd) else [event.span_id]:
            wait = waiting.pop(span_id)
            lasted = min(wait.seconds, max(event.time - wait.time, 0.0))
            self._child(self.wait_seconds, team, wait.model, wait.reason).inc(lasted)

    def run_started(self, team: str) -> None:
        self._child(self.active, team).inc()

    def on_event(self, team: str, event: Event) -> None:
        """Agent latency from each invocation's start and end events; the rate limits' waits."""
        waiting = self._waiting.get(event.run_id)
        if waiting and (event.span_id in waiting or isinstance(event, RunEnd)):
            self._waited(team, waiting, event)
        if isinstance(event, LlmWait):
            self._child(self.waits, team, event.model, event.reason).inc()
            self._waiting.setdefault(event.run_id, {})[event.span_id] = event  # its seconds: once it has ended
        elif isinstance(event, RunEnd):
            self._waiting.pop(event.run_id, None)
        elif isinstance(event, AgentStart):
            self._agent_started.setdefault(event.run_id, {})[event.span_id] = event.time
        elif isinstance(event, AgentEnd):
            started = self._agent_started.get(event.run_id, {}).pop(event.span_id, None)
            if started is not None:
                self._child(self.agent_latency, team, event.agent).observe(max(0.0, event.time - started))

    def run_finished(self, team: str, result: RunResult | None) -> None:
        self._child(self.active, team).dec()
        if result is not None:
            self._agent_started.pop(result.run_id, None)  # O(1): a scan of every run in flight grew with them
            self._waiting.pop(result.run_id, None)
        if result is None:
            self._child(self.runs, team, "failed").inc()
            return
        self._child(self.runs, team, result.status).inc()
        self._child(self.run_latency, team).observe(result.duration_s)
        for agent, spend in result.agents.items():
            self._child(self.tokens, team, agent, "input").inc(spend.usage.input_tokens)
            self._child(self.tokens, team, agent, "output").inc(spend.usage.output_tokens)
            if spend.usage.cached_tokens:
                self._child(self.tokens, team, agent, "cached").inc(spend.usage.cached_tokens)
            self._child(self.cost, team, agent).inc(spend.cost)

    def render(self) -> bytes:
        rendered: Any = generate_latest(self.registry)
        return bytes(rendered)
