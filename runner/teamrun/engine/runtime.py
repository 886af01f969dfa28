"""State shared by one run (:class:`RunContext`) and by one agent invocation (:class:`AgentFrame`)."""

from __future__ import annotations

import asyncio
import datetime as _dt
from collections.abc import Coroutine, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from teamrun.config.models import Agent, CacheMode, FallbackModel, Limits, ModelFields, TeamConfig
from teamrun.config.models import RateLimit as RateLimitField
from teamrun.defaults import (
    DEFAULT_MAX_STEPS,
    DEFAULT_MAX_TOKENS,
    DEFAULT_NUM_RETRIES,
    DEFAULT_REQUEST_TIMEOUT_S,
    api_base_for,
    model_for,
)
from teamrun.engine.durability.journal import RunJournal
from teamrun.engine.durability.pending import RunActivity
from teamrun.engine.limits.ledger import BudgetLedger
from teamrun.engine.references import ResultStore
from teamrun.engine.result import AcceptanceRecord, DelegationResult, ModelSpend, RunResult
from teamrun.engine.tool_sources import StartedSources
from teamrun.engine.workspace.state import WorkspaceState
from teamrun.events import EventBus, EventKind
from teamrun.llm.offline import is_offline_model
from teamrun.llm.types import ChatModel, ModelReply, ModelSettings, RateLimit
from teamrun.logs import get_logger
from teamrun.tools.approval import Approver
from teamrun.tools.base import Tool, ToolSource
from teamrun.tools.people import PersonDesk, UnattendedDesk

if TYPE_CHECKING:
    from teamrun.engine.durability.threads import ThreadSession
    from teamrun.engine.memory.session import MemorySession
    from teamrun.engine.workspace.board import Board

_log = get_logger(__name__)
T = TypeVar("T")

WAITING_FOR_A_PERSON = "waiting for a person"
"""The ``error`` of a tool, model call or delegation span that ended ``waiting``: the run suspended for a person."""

_MODEL_FIELDS = tuple(ModelFields.model_fields)


def rate_limit_of(declared: RateLimitField | None) -> RateLimit | None:
    """A team file's ``rate_limit:`` as the model layer's :class:`~teamrun.llm.types.RateLimit`."""
    if declared is None:
        return None
    return RateLimit(declared.requests_per_minute, declared.tokens_per_minute)


async def run_all(coroutines: Iterable[Coroutine[Any, Any, T]]) -> list[T]:
    """Run coroutines concurrently (a TaskGroup: one failing cancels the rest), results in order.

    Only errors that must stop everything escape (each coroutine handles the rest itself);
    the first is raised as it is, not wrapped in an ``ExceptionGroup``, so callers and the
    CLI see a plain :class:`~teamrun.errors.UserError` or :class:`~teamrun.errors.RunError`.
    """
    try:
        async with asyncio.TaskGroup() as group:
            tasks = [group.create_task(coroutine) for coroutine in coroutines]
    except BaseExceptionGroup as failed:
        raise failed.exceptions[0] from None
    return [task.result() for task in tasks]


def max_steps_for(config: TeamConfig, budget: Limits | None) -> int | None:
    """An agent's step limit: its own ``budget.max_steps``, else the run's ``limits.max_steps``.

    ``None`` when the file sets neither: the agent's ledger then applies ``DEFAULT_MAX_STEPS``.
    """
    if budget is not None and budget.max_steps is not None:
        return budget.max_steps
    return config.limits.max_steps if config.limits else None


def limits_in_force(config: TeamConfig) -> dict[str, Any]:
    """What limits a run of ``config``: the file's limits and budgets, and teamrun's defaults where it sets none."""
    budgets = {
        name: agent.budget.model_dump(exclude_none=True)
        for name, agent in config.agents.items()
        if agent.budget is not None and agent.budget.model_dump(exclude_none=True)
    }
    return {
        "limits": config.limits.model_dump(exclude_none=True) if config.limits else {},
        "budgets": budgets,
        "defaults": {
            "max_steps": DEFAULT_MAX_STEPS,
            "max_tokens": DEFAULT_MAX_TOKENS,
            "request_timeout_s": DEFAULT_REQUEST_TIMEOUT_S,
            "num_retries": DEFAULT_NUM_RETRIES,
        },
        "default_max_steps_for": [
            name for name, agent in config.agents.items() if max_steps_for(config, agent.budget) is None
        ],
    }


@dataclass
class RunContext:
    """Everything one run shares: the team, the model, tools, events and the growing result."""

    config: TeamConfig
    base_dir: Path
    bus: EventBus
    model: ChatModel
    tools: Mapping[str, Tool | ToolSource]
    approver: Approver
    result: RunResult
    vars: Mapping[str, Any] = field(default_factory=dict)
    model_override: str | None = None
    api_base: str | None = None
    """The endpoint of every agent whose model is not ``offline`` and that sets no ``api_base`` (``--api-base``,
    ``$TEAMRUN_API_BASE``); ``None``: each provider's own."""
    today: str = field(default_factory=lambda: _dt.date.today().isoformat())
    refs: ResultStore = field(default_factory=ResultStore)
    sources: StartedSources = field(default_factory=StartedSources)
    """The tool sources this run started; closed when the run ends."""
    journal: RunJournal | None = None
    """Where finished model calls and tool results are written, and replayed from on resume (``None``: off)."""
    thread: ThreadSession | None = None
    """The thread this run is a turn of: earlier turns, workers' memory (:mod:`teamrun.engine.durability.threads`)."""
    desk: PersonDesk = field(default_factory=UnattendedDesk)
    """Who answers the agents' questions (``person:`` tools); see :mod:`teamrun.tools.people`."""
    activity: RunActivity = field(default_factory=RunActivity)
    """What of the run works and what waits for a person (:mod:`teamrun.engine.durability.pending`)."""
    workspace: WorkspaceState | None = None
    """The shared workspace (``workspace:`` in the team file); changed only through
    :func:`teamrun.engine.workspace.changes.apply_change`."""
    boards: dict[str, Board] = field(default_factory=dict)
    """The workspace's boards (``kind: board``), changed only through
    :func:`teamrun.engine.workspace.changes.apply_change` (agents' board calls, the peer driver)."""
    cards: dict[tuple[str, str | None], Any] = field(default_factory=dict)
    """The remote (``a2a:``) agents' cards this run has read (:data:`teamrun.engine.remote.cards.CardCache`):
    read once per run, not again per delegation."""
    memory: MemorySession | None = None
    """The run's long-term memory (``memory:`` in the team file and a resource given to the run; ``None``: none)."""
    calls_in_flight: dict[str, str] = field(default_factory=dict)
    """The model calls sent and not yet answered, by span id: who waits on which model where (said when the run's
    timeout stops it, so a hung endpoint is named)."""

    def agent(self, name: str) -> Agent:
        return self.config.agents[name]

    def settings_for(self, name: str) -> ModelSettings:
        """The agent's model settings: its own fields over ``defaults`` over the built-in default."""
        agent = self.agent(name)
        defaults = self.config.defaults or ModelFields()
        merged = {
            f: getattr(agent, f) if getattr(agent, f) is not None else getattr(defaults, f) for f in _MODEL_FIELDS
        }
        model = model_for(agent, defaults, override=self.model_override)
        fallback = None if is_offline_model(model.strip()) else self.api_base
        return ModelSettings(
            model=model,
            api_base=api_base_for(agent, defaults, fallback=fallback),  # `${API_BASE:-}` left empty: unset
            api_key_env=merged["api_key_env"],
            temperature=merged["temperature"],
            max_tokens=merged["max_tokens"],
            timeout_s=merged["request_timeout_s"],
            num_retries=DEFAULT_NUM_RETRIES if merged["num_retries"] is None else merged["num_retries"],
            stream=bool(merged["stream"]),
            extra=dict(merged["model_params"] or {}),
            fallbacks=() if self.model_override else self._fallbacks(merged["fallbacks"] or (), merged["cache"]),
            fallback_on=frozenset(merged["fallback_on"]) if merged["fallback_on"] else None,
            cache=merged["cache"] or "auto",
            rate_limit=rate_limit_of(merged["rate_limit"]),
        )

    def _fallbacks(self, entries: Iterable[FallbackModel], cache: CacheMode | None) -> tuple[ModelSettings, ...]:
        """A ``fallbacks`` list as settings: each entry's own fields over teamrun's defaults (not the agent's),
        its endpoint its own, else the run's (``--api-base``) for a model that is not ``offline``."""
        chosen = []
        for one in entries:
            run_base = None if is_offline_model(one.model.strip()) else self.api_base
            chosen.append(
                ModelSettings(
                    model=one.model,
                    api_base=one.api_base or run_base,
                    api_key_env=one.api_key_env,
                    temperature=one.temperature,
                    max_tokens=one.max_tokens,
                    timeout_s=one.request_timeout_s,
                    num_retries=DEFAULT_NUM_RETRIES if one.num_retries is None else one.num_retries,
                    stream=bool(one.stream),
                    extra=dict(one.model_params or {}),
                    cache=cache or "auto",
                    rate_limit=rate_limit_of(one.rate_limit),
                )
            )
        return tuple(chosen)

    def judge_settings(self, settings: ModelSettings) -> ModelSettings:
        """A judge's settings (``accept:``, ``until:``) with the run's endpoint where the judge names none:
        ``defaults.api_base``, else ``--api-base`` / ``$TEAMRUN_API_BASE`` (not for ``offline``), and
        ``defaults.api_key_env`` — as an agent that sets none is called, so a judge never leaves for the
        provider's own endpoint while the agents it grades go to a local one."""
        defaults = self.config.defaults or ModelFields()
        fallback = None if is_offline_model(settings.model.strip()) else self.api_base
        return replace(
            settings,
            api_base=settings.api_base or api_base_for(None, defaults, fallback=fallback),
            api_key_env=settings.api_key_env or defaults.api_key_env,
        )

    def template_context(self, name: str, context: Mapping[str, Any] | None = None) -> dict[str, Any]:
        return {
            "vars": dict(self.vars),
            "today": self.today,
            "agent": name,
            "team": self.config.name,
            "context": dict(context or {}),
        }

    # -- the run result while the run goes (single event loop: no lock needed) -------------
    # Team.run writes the rest: its status, answer and spending, when the run ends.

    def record_delegation(self, result: DelegationResult) -> None:
        self.result.delegations.append(result)

    def record_model_call(self, model: str, reply: ModelReply) -> None:
        """A model call answered by ``model`` (of the agent's list: the first, or a fallback)."""
        spend = self.result.models.setdefault(model, ModelSpend())
        spend.usage = spend.usage + reply.usage
        spend.cost += reply.cost_usd
        spend.calls += 1
        spend.fallback_calls += reply.fallback is not None
        spend.usage_known = spend.usage_known and reply.usage_known

    def record_handoff(self, frame: AgentFrame, target: str) -> None:
        self.result.handoffs.append({"from": frame.name, "to": target, "agent_path": list(frame.path)})

    def record_task(self, task: Any) -> None:
        """A tracked delegation task (a :class:`~teamrun.engine.delegation.tasks.TaskRecord`)."""
        self.result.tasks.append(task)

    def record_acceptance(self, record: AcceptanceRecord) -> None:
        self.result.acceptance.append(record)

    def record_hook_error(self, entry: dict[str, Any]) -> None:
        self.result.hook_errors.append(entry)

    def record_answer(self, frame: AgentFrame) -> None:
        """``frame``'s agent gave the run's answer (the supervisor, or the agent it handed the user to)."""
        self.result.answered_by = frame.name

    def warn(self, frame: AgentFrame, message: str) -> None:
        self.result.warnings.append(message)
        _log.warning("run_warning", agent=frame.name, message=message)
        frame.emit(self, "warning", message=message)


SpanKind = Literal["llm", "tool"]
_SPAN_EVENTS: dict[SpanKind, tuple[EventKind, EventKind]] = {
    "llm": ("llm_start", "llm_end"),
    "tool": ("tool_start", "tool_end"),
}


@dataclass
class Span:
    """One open span: its id, and the data its end event will carry."""

    id: str
    end: dict[str, Any] = field(default_factory=lambda: {"status": "ok"})


@dataclass
class AgentFrame:
    """One invocation of one agent: where it sits in the tree and what it may still spend."""

    name: str
    path: tuple[str, ...]
    span_id: str
    parent_span_id: str | None
    ledger: BudgetLedger
    feedback: list[str] = field(default_factory=list)
    """Notes from hooks (written only by :class:`~teamrun.engine.delegation.hooks.HookRunner`), added to this
    agent's next model call (taken only by the agent loop, :meth:`take_feedback`)."""
    context: dict[str, Any] = field(default_factory=dict)
    """Request-context values from ``on_start`` hooks, readable in templates as ``context``."""
    allowed_tools: frozenset[str] | None = None
    """The tool entries this invocation may use when its task narrowed them (``None``: all it declares)."""
    key: str = ""
    """The invocation's stable name in the run (what the journal keys on): the supervisor's name, then per
    delegation ``/<worker>@<turn>.<position>`` (the delegating call's number and its place in the reply),
    per handoff ``><agent>``. It does not depend on the order concurrent workers run in."""

    def handed_to(self, ctx: RunContext, target: str) -> AgentFrame:
        """The frame of the agent that takes over after a handoff (same place in the tree)."""
        parent = self.ledger.parent or self.ledger
        budget = ctx.agent(target).budget
        return AgentFrame(
            target,
            (*self.path[:-1], target),
            ctx.bus.new_span_id(),
            self.parent_span_id,
            parent.child(
                budget,
                label=f"agents.{target}.budget",
                depth=self.depth,
                max_steps=max_steps_for(ctx.config, budget),
                agent=target,
            ),
            key=f"{self.key}>{target}",
        )

    def take_feedback(self) -> list[str]:
        """The hooks' notes not yet given to the agent (they are given once)."""
        notes, self.feedback = self.feedback, []
        return notes

    @property
    def depth(self) -> int:
        return len(self.path) - 1

    @contextmanager
    def span(
        self, ctx: RunContext, kind: SpanKind, *, parent_span_id: str | None = None, **start: Any
    ) -> Iterator[Span]:
        """A span of this frame (``llm``, ``tool``): its start event now, its end event once when the block ends,
        with what the block put in :attr:`Span.end` (an exception ends it ``status: error`` with its message, a
        cancellation ``status: error, error: cancelled``; what the end event needs besides, such as a tool's
        name, the block puts in :attr:`Span.end` first); cancelled because the run suspended for a person, it ends
        ``status: waiting, error: waiting for a person``)."""
        span = Span(ctx.bus.new_span_id())
        start_kind, end_kind = _SPAN_EVENTS[kind]
        self.emit(ctx, start_kind, span_id=span.id, parent_span_id=parent_span_id, **start)
        try:
            yield span
        except asyncio.CancelledError:
            if ctx.activity.stuck.is_set():
                span.end.update(status="waiting", error=WAITING_FOR_A_PERSON)
            else:
                span.end.update(status="error", error="cancelled")
            raise
        except Exception as exc:
            span.end.update(status="error", error=str(exc))
            raise
        finally:
            self.emit(ctx, end_kind, span_id=span.id, parent_span_id=parent_span_id, **span.end)

    @contextmanager
    def agent_span(self, ctx: RunContext, *, model: str, task: str) -> Iterator[Span]:
        """This invocation's own span: ``agent_start`` now, ``agent_end`` once when the block ends.

        The end carries what the block put in :attr:`Span.end` (``status``, ``stopped_by``; ``ok`` if it set
        none) over what this invocation spent (``usage``, ``cost``, from its own ledger). A block that raises
        ends it ``error``; a cancelled one ``cancelled``, or ``waiting`` when the run was suspended for a person.
        """
        span = Span(self.span_id, end={"status": "ok", "stopped_by": None})
        self.emit(ctx, "agent_start", model=model, task=task)
        try:
            yield span
        except asyncio.CancelledError:
            span.end["status"] = "waiting" if ctx.activity.stuck.is_set() else "cancelled"
            raise
        except BaseException:
            span.end["status"] = "error"
            raise
        finally:
            own = self.ledger.own
            unknown = {} if self.ledger.usage_known else {"usage_known": False, "cost": None}  # a model's, never 0
            self.emit(ctx, "agent_end", **{"usage": own.usage.as_dict(), "cost": own.cost, **unknown, **span.end})

    def emit(
        self,
        ctx: RunContext,
        kind: EventKind,
        *,
        span_id: str | None = None,
        parent_span_id: str | None = None,
        **data: Any,
    ) -> None:
        ctx.bus.emit(
            kind,
            span_id=span_id or self.span_id,
            parent_span_id=(parent_span_id or self.span_id) if span_id else self.parent_span_id,
            agent_path=self.path,
            **data,
        )
