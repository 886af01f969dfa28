"""One rate limit per process (issue 45.3): every run of a process waits for a slot of its model's requests per
minute instead of being answered 429; a 429's Retry-After holds every run of that model; waits are events.

The provider is a fake ``litellm.acompletion`` in the test's event loop that answers 429 above 60 requests in any
minute of a virtual clock; time passes only when every run waits (:class:`VirtualTime`): no sleeps, no wall
clock."""

from __future__ import annotations

import asyncio
import heapq
import io
import itertools
import subprocess
import sys
import textwrap
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

import teamrun
from teamrun.cli.progress import PlainProgress
from teamrun.events import Event, LlmEnd, LlmWait, RunEnd
from teamrun.llm.adapter import import_litellm
from teamrun.llm.ratelimit import RateLimiter, RateLimits
from teamrun.llm.router import ModelRouter
from teamrun.llm.types import RateLimit
from teamrun.serve.metrics import ServerMetrics


class VirtualTime:
    """A clock and a sleep: a sleeper wakes when the clock reaches its time, and the clock moves on only when
    nothing else in the loop can run (:meth:`drive`)."""

    def __init__(self) -> None:
        self.now = 0.0
        self._sleepers: list[tuple[float, int, asyncio.Future[None]]] = []
        self._order = itertools.count()

    def __call__(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        if seconds <= 0:
            await asyncio.sleep(0)
            return
        woken: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        heapq.heappush(self._sleepers, (self.now + seconds, next(self._order), woken))
        await woken

    async def drive(self, work: Awaitable[Any]) -> Any:
        """Run ``work``, moving the clock to the next sleeper's time whenever the loop has nothing ready."""
        loop = asyncio.get_running_loop()
        task = asyncio.ensure_future(work)
        while not task.done():
            await asyncio.sleep(0)
            if loop._ready or not self._sleepers:  # type: ignore[attr-defined]  # others can still run
                continue
            when, _, woken = heapq.heappop(self._sleepers)
            self.now = max(self.now, when)
            woken.set_result(None)
        return task.result()


class Provider:
    """A fake provider behind ``litellm.acompletion``: answers 429 (Retry-After 1) above ``rpm`` requests in the
    last minute of the virtual clock; a lead asks its writer once, then answers."""

    def __init__(self, time: VirtualTime, rpm: int = 60) -> None:
        self.time, self.rpm = time, rpm
        self.stamps: list[float] = []
        self.refused = 0
        self.refuse_next: float | None = None
        """Retry-After of a 429 to answer the next request with (then ``None``)."""

    async def acompletion(self, **kwargs: Any) -> Any:
        litellm = import_litellm()
        now = self.time.now
        recent = [t for t in self.stamps if t > now - 60]
        self.stamps.append(now)
        if len(recent) >= self.rpm or self.refuse_next is not None:
            after, self.refuse_next = self.refuse_next or 1.0, None
            self.refused += 1
            request = httpx.Request("POST", "http://provider.test/v1/chat/completions")
            response = httpx.Response(429, headers={"retry-after": str(after)}, request=request)
            raise litellm.RateLimitError("slow down", llm_provider="openai", model=kwargs["model"], response=response)
        await asyncio.sleep(0)
        messages, tools = kwargs["messages"], kwargs.get("tools") or []
        if tools and messages[-1]["role"] != "tool":
            call = {"id": "c1", "type": "function", "function": {"name": "ask_writer", "arguments": '{"task": "x"}'}}
            message: dict[str, Any] = {"role": "assistant", "content": None, "tool_calls": [call]}
        else:
            message = {"role": "assistant", "content": "done" if tools else "a line"}
        return litellm.ModelResponse(
            model="fake",
            choices=[{"index": 0, "message": message, "finish_reason": "stop"}],
            usage={"prompt_tokens": 10, "completion_tokens": 2, "total_tokens": 12},
        )


@pytest.fixture
def time() -> VirtualTime:
    return VirtualTime()


@pytest.fixture
def provider(monkeypatch: pytest.MonkeyPatch, time: VirtualTime) -> Provider:
    fake = Provider(time)
    monkeypatch.setattr(import_litellm(), "acompletion", fake.acompletion)
    return fake


def team_file(tmp_path: Path, limit: str = "rate_limit: {requests_per_minute: 60}") -> Path:
    path = tmp_path / "limited.yaml"
    path.write_text(
        textwrap.dedent(f"""\
            version: 1
            name: limited
            supervisor: lead
            defaults:
              model: openai/fake
              api_base: http://provider.test/v1
              api_key_env: FAKE_KEY
              num_retries: 0
              {limit}
            agents:
              lead:
                instructions: Lead.
                delegates_to: [writer]
              writer:
                instructions: Write.
            """),
        encoding="utf-8",
    )
    return path


def runs(
    path: Path, time: VirtualTime, limits: RateLimits, count: int, events: list[Event]
) -> Callable[[], Awaitable[list[teamrun.RunResult]]]:
    """``count`` concurrent runs of the team in one process: one model router, one set of limits."""
    team = teamrun.load_team(path, chat_model=ModelRouter(rate_limits=limits, sleep=time.sleep))

    async def all_of_them() -> list[teamrun.RunResult]:
        return await asyncio.gather(*(team.run(f"task {i}", subscribers=[events.append]) for i in range(count)))

    return all_of_them


def test_100_concurrent_runs_at_60_requests_a_minute_get_no_429_and_all_end_done(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, time: VirtualTime, provider: Provider
) -> None:
    monkeypatch.setenv("FAKE_KEY", "k")
    limits = RateLimits(clock=time, sleep=time.sleep)
    events: list[Event] = []

    results = asyncio.run(time.drive(runs(team_file(tmp_path), time, limits, 100, events)()))

    assert provider.refused == 0
    assert [r.status for r in results] == ["done"] * 100
    assert len(provider.stamps) == 300  # 3 calls a run
    assert max(sum(1 for t in provider.stamps if s - 60 < t <= s) for s in provider.stamps) <= 60
    assert time.now >= 4 * 60  # 300 requests at 60 a minute
    waits = [e for e in events if isinstance(e, LlmWait)]
    assert (
        waits and {w.reason for w in waits} == {"requests_per_minute"} and {w.model for w in waits} == {"openai/fake"}
    )
    waited = [e.waited_s for e in events if isinstance(e, LlmEnd) and e.waited_s]
    assert waited and sum(waited) == pytest.approx(sum(w.seconds for w in waits), rel=1e-3)
    totals = limits.waits()[("openai/fake", "requests_per_minute")]
    assert totals.count == len(waits)
    metrics = ServerMetrics()  # what serve's /metrics shows, from the same events
    for event in events:
        metrics.on_event("limited", event)
    shown = metrics.render().decode()
    labels = '{model="openai/fake",reason="requests_per_minute",team="limited"}'
    assert f"teamrun_model_waits_total{labels} {float(len(waits))}" in shown
    assert f"teamrun_model_wait_seconds_total{labels}" in shown


def test_without_a_limit_the_same_runs_are_answered_429(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, time: VirtualTime, provider: Provider
) -> None:
    """The fake does refuse what goes over its rate: the test above is not vacuous."""
    monkeypatch.setenv("FAKE_KEY", "k")
    limits = RateLimits(clock=time, sleep=time.sleep)

    results = asyncio.run(time.drive(runs(team_file(tmp_path, limit=""), time, limits, 100, [])()))

    assert provider.refused > 0
    assert any(r.status == "failed" for r in results)


def test_a_429_retry_after_holds_every_run_of_that_model(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, time: VirtualTime, provider: Provider
) -> None:
    monkeypatch.setenv("FAKE_KEY", "k")
    path = team_file(tmp_path, limit="num_retries: 1")
    path.write_text(path.read_text().replace("  num_retries: 0\n", ""), encoding="utf-8")
    limits = RateLimits(clock=time, sleep=time.sleep)
    provider.refuse_next = 30.0
    events: list[Event] = []

    results = asyncio.run(time.drive(runs(path, time, limits, 5, events)()))

    assert [r.status for r in results] == ["done"] * 5
    assert provider.refused == 1
    first, *after = provider.stamps
    assert first == 0.0 and all(t >= 30.0 for t in after)  # not only the run that got the 429 waited
    held = [e for e in events if isinstance(e, LlmWait) and e.reason == "retry_after"]
    assert len({e.run_id for e in held}) == 4  # the four other runs, each told why
    console = io.StringIO()
    PlainProgress(console)(held[0])
    assert console.getvalue().endswith(
        f"] lead: waiting {held[0].seconds:.1f}s for openai/fake (the provider's Retry-After)\n"
    )


def test_a_limiter_spreads_concurrent_requests_over_the_minute_in_arrival_order() -> None:
    time = VirtualTime()
    limiter = RateLimiter(rpm=2, clock=time, sleep=time.sleep)
    starts: list[tuple[int, float]] = []

    async def one(i: int) -> None:
        await limiter.acquire()
        starts.append((i, time.now))

    async def all_of_them() -> None:
        await asyncio.gather(*(one(i) for i in range(5)))

    asyncio.run(time.drive(all_of_them()))

    assert starts == [(0, 0.0), (1, 0.0), (2, 65.0), (3, 65.0), (4, 130.0)]  # a minute and its 5 s margin


def test_a_call_that_declares_no_limit_is_held_by_the_limit_another_declared_for_its_model() -> None:
    time = VirtualTime()
    limits = RateLimits(clock=time, sleep=time.sleep)
    declared = RateLimit(requests_per_minute=1)
    starts: list[float] = []

    async def calls() -> None:
        for rate in (declared, None, None):  # the writer declares one, the lead (same model) none
            await limits.acquire("openai/fake", "http://provider.test/v1/", rate)
            starts.append(time.now)

    asyncio.run(time.drive(calls()))

    assert starts == [0.0, 65.0, 130.0]


def test_rpm_reaches_the_worker_processes_serve_spawns_each_with_its_share(monkeypatch: pytest.MonkeyPatch) -> None:
    from teamrun.cli.options import limit_rates, share_rate_limits
    from teamrun.llm import ratelimit

    monkeypatch.setattr(ratelimit, "_process_rate_limits", RateLimits())
    monkeypatch.setenv(ratelimit.RATE_LIMIT_ENV, "")  # undone after the test, whatever limit_rates sets

    limit_rates(100, 9000)
    share_rate_limits(4)

    assert ratelimit.process_rate_limits().override == RateLimit(25, 2250)
    child = subprocess.run(
        [sys.executable, "-c", "from teamrun.llm.ratelimit import process_rate_limits as p; print(p().override)"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert child.stdout.strip() == "RateLimit(requests_per_minute=25, tokens_per_minute=2250)"
    assert ratelimit.override_from({ratelimit.RATE_LIMIT_ENV: ",x"}) is None


def test_a_tokens_limit_counts_each_request_s_input_when_its_slot_is_taken() -> None:
    """Requests sent at once are not all let through on an empty window: the input of those already given a slot
    counts before any answer (400 + 400 fit in 1,000 tokens a minute; the third waits for the first to leave)."""
    time = VirtualTime()
    limiter = RateLimiter(tpm=1000, clock=time, sleep=time.sleep)
    starts: list[float] = []

    async def one() -> None:
        await limiter.acquire(tokens=lambda: 400)
        starts.append(time.now)

    async def all_of_them() -> None:
        await asyncio.gather(one(), one(), one())

    asyncio.run(time.drive(all_of_them()))

    assert starts == [0.0, 0.0, 60.0]


def test_a_wait_cut_short_by_a_cancellation_counts_what_elapsed_not_what_was_due() -> None:
    """Attack a45b 9: a run cancelled 2 s into a 13 s wait added 13 s to the wait totals."""
    now = [0.0]
    limits = RateLimits(clock=lambda: now[0])
    limits.hold("openai/fake", None, 13.0)

    async def cancelled_after_two_seconds() -> None:
        asleep = asyncio.Event()

        async def sleep(seconds: float) -> None:
            asleep.set()
            await asyncio.Event().wait()  # until cancelled

        limits.sleep = sleep
        limits._limiter("openai/fake", None).sleep = sleep
        waiting = asyncio.create_task(limits.acquire("openai/fake", None, None))
        await asleep.wait()
        now[0] = 2.0
        waiting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiting

    asyncio.run(cancelled_after_two_seconds())

    totals = limits.waits()[("openai/fake", "retry_after")]
    assert (totals.count, totals.seconds) == (1, 2.0)
    assert limits._limiter("openai/fake", None).waited_s == 2.0


def test_metrics_count_the_seconds_a_wait_lasted_not_the_ones_it_was_due_to_last() -> None:
    """Attack a45b 9: /metrics' teamrun_model_wait_seconds counts a wait once it ended, at most its due length:
    a call cancelled 2 s into a 13 s wait waited 2 s."""
    where = {"span_id": "s2", "parent_span_id": None, "agent_path": ("lead",)}
    metrics = ServerMetrics()
    for run_id, cut_at in (("cut", 102.0), ("whole", 120.0)):
        metrics.on_event(
            "solo", LlmWait(run_id=run_id, time=100.0, model="m", seconds=13.0, reason="retry_after", **where)
        )
        metrics.on_event("solo", LlmEnd(run_id=run_id, time=cut_at, status="error", **where))
    metrics.on_event(
        "solo", LlmWait(run_id="ended", time=100.0, model="m", seconds=13.0, reason="retry_after", **where)
    )
    metrics.on_event("solo", RunEnd(run_id="ended", time=101.0, status="cancelled", **{**where, "span_id": "run"}))

    shown = metrics.render().decode()
    labels = '{model="m",reason="retry_after",team="solo"}'
    assert f"teamrun_model_waits_total{labels} 3.0" in shown
    assert f"teamrun_model_wait_seconds_total{labels} 16.0" in shown  # 2 + 13 + 1


def test_a_call_cancelled_during_its_wait_ends_saying_what_it_waited(tmp_path: Path) -> None:
    """Attack a45b 9: a run cancelled 2 s into a 13 s Retry-After hold: its llm_end says waited_s 2 (it said none)."""
    now = [0.0]
    limits = RateLimits(clock=lambda: now[0])
    limits.hold("offline", None, 13.0)
    team_path = tmp_path / "solo.yaml"
    team_path.write_text(
        "version: 1\nname: solo\nsupervisor: lead\nagents:\n  lead: {model: offline, instructions: Answer.}\n",
        encoding="utf-8",
    )
    events: list[Event] = []

    async def cancelled_two_seconds_into_the_wait() -> teamrun.RunResult:
        cancel, asleep = asyncio.Event(), asyncio.Event()

        async def sleep(seconds: float) -> None:
            asleep.set()
            await asyncio.Event().wait()  # until cancelled

        limits._limiter("offline", None).sleep = sleep
        team = teamrun.load_team(team_path, chat_model=ModelRouter(rate_limits=limits, sleep=sleep))
        running = asyncio.create_task(team.run("hi", subscribers=[events.append], cancel=cancel))
        await asleep.wait()
        now[0] = 2.0
        cancel.set()
        return await running

    result = asyncio.run(cancelled_two_seconds_into_the_wait())

    assert result.status == "cancelled"
    [wait] = [e for e in events if isinstance(e, LlmWait)]
    [end] = [e for e in events if isinstance(e, LlmEnd)]
    assert (wait.seconds, end.status, end.waited_s) == (13.0, "error", 2.0)
