"""One rate limit per process: requests and tokens per minute of each model at each endpoint, for every run.

:class:`RateLimits` (one per process: :func:`process_rate_limits`; ``serve``, ``batch`` and ``chat`` run many runs
in one process) holds a :class:`RateLimiter` per model and endpoint. Before each request — each retry too — a
run takes a slot (:meth:`RateLimiter.acquire`): it waits, instead of sending a request the provider would
answer 429, until

- requests start one every ``60 / requests_per_minute`` seconds, after a burst of at most :data:`RPM_BURST`
  at once (a generic cell rate algorithm: a slot is reserved when it is given, so runs asking at once are spread
  over the minute in arrival order), and any minute holds at most ``requests_per_minute`` of them — counted
  over ``60 s +`` :data:`WINDOW_MARGIN_S`, so a request that reached the provider a little after its slot has
  left the provider's window too before its slot is given again;
- the last minute's tokens leave room for the request's input under ``tokens_per_minute`` (a request's input —
  estimated, four characters a token — counts from its slot on, its output once it is answered);
- a 429's ``Retry-After`` that any run got from this model and endpoint has passed (:meth:`RateLimiter.hold`):
  every run obeys it, not only the one that got it.

The limit of a model is the team file's ``rate_limit`` (an agent's, ``defaults``' or a ``fallbacks`` entry's; the
last declared for a model and endpoint holds, a call that declares none leaves it as it is);
``--rpm``/``--tpm`` (:attr:`RateLimits.override`) replace it for every model of the process. Each wait is told
to ``on_wait`` (the run's ``llm_wait`` event: model, seconds, reason) and counted per model
(:meth:`RateLimits.waits`). The clock and the sleep are injectable: tests step a clock instead of sleeping.
"""

from __future__ import annotations

import asyncio
import bisect
import json
import math
import os
import threading
import time
from collections import deque
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from teamrun.events import EventBus
from teamrun.llm.types import Message, RateLimit, ToolSchema, current_scope
from teamrun.logs import get_logger

__all__ = [
    "RATE_LIMIT_ENV",
    "RPM_BURST",
    "WINDOW_MARGIN_S",
    "WINDOW_S",
    "RateLimiter",
    "RateLimits",
    "WaitReason",
    "WaitTotals",
    "as_environment",
    "estimated_tokens",
    "override_from",
    "process_rate_limits",
    "report_wait",
]

log = get_logger(__name__)

WINDOW_S = 60.0
"""The window the limits count in (one minute, sliding)."""

RPM_BURST = 3
"""How many requests of a requests-per-minute limit may start at once (fewer when the limit is lower); after
them, one every ``60 / rpm`` seconds."""

WINDOW_MARGIN_S = 5.0
"""How much longer than a minute a requests limit counts a request: the provider stamps it when it arrives, after
its slot, and frees it from its window that much later. The first requests of a burst reach the provider late
(the process is busy starting the runs) while later ones do not: a second of margin was overrun by 100 served runs
started at once. Five seconds cost a steady stream about 8% of the limit (N requests every 65 s)."""

_MOST = 2**63
"""More tokens than any entry has: ``(t, _MOST)`` sorts after every entry stamped ``t``."""

WaitReason = Literal["requests_per_minute", "tokens_per_minute", "retry_after"]
"""Why a request waited: the requests or tokens of the last minute, or a 429's ``Retry-After``."""

Clock = Callable[[], float]
Sleep = Callable[[float], Awaitable[Any]]
OnWait = Callable[[float, WaitReason], None]


class RateLimiter:
    """The requests and tokens of one model at one endpoint in a sliding minute, and its ``Retry-After`` hold.

    Thread-safe and bound to no event loop (no lock is held across a wait). ``rpm``/``tpm`` ``None``: no limit of
    that kind (the hold still applies)."""

    def __init__(
        self,
        *,
        rpm: int | None = None,
        tpm: int | None = None,
        clock: Clock = time.monotonic,
        sleep: Sleep = asyncio.sleep,
    ) -> None:
        self.rpm = rpm
        self.tpm = tpm
        self.clock = clock
        self.sleep = sleep
        self._starts: deque[float] = deque()
        """When each request of the window starts (a reserved slot may be in the future)."""
        self._tokens: list[tuple[float, int]] = []
        """Tokens by when they were sent (a request's input when its slot is taken, its output when answered)."""
        self._held_until = 0.0
        self._due = float("-inf")
        """The requests limit's theoretical arrival time: when the next request is due at the limit's pace."""
        self._lock = threading.Lock()
        self.waited_s = 0.0
        """Time spent waiting for a slot, in all."""

    def limit(self, rate: RateLimit | None) -> None:
        """Use ``rate`` from now on (``None``: no requests or tokens limit)."""
        with self._lock:
            self.rpm, self.tpm = (rate.requests_per_minute, rate.tokens_per_minute) if rate else (None, None)

    async def acquire(
        self,
        on_wait: OnWait | None = None,
        *,
        tokens: Callable[[], int] | None = None,
        on_waited: OnWait | None = None,
    ) -> float:
        """Wait for a slot and take it; the seconds waited (each wait told to ``on_wait`` before, with how long it
        is due to last, and to ``on_waited`` after, with how long it lasted: less when the caller was cancelled
        during it — what elapsed is counted, in :attr:`waited_s` too). ``tokens``: the
        request's input tokens (asked only under a tokens limit), counted from its slot on — the provider counts
        them as the request arrives; the answer's are counted by :meth:`spent`."""
        with self._lock:
            now = self.clock()
            start, reason = self._reserve(now, tokens() if tokens is not None and self.tpm is not None else 0)
        waited = 0.0
        try:
            while start > now:
                if on_wait is not None and reason is not None:
                    on_wait(start - now, reason)
                planned, began, finished = start - now, self.clock(), False
                try:
                    await self.sleep(planned)
                    finished = True
                finally:  # a wait cut short (the run cancelled) counts what elapsed, not what it was due to last
                    elapsed = planned if finished else min(max(self.clock() - began, 0.0), planned)
                    waited += elapsed
                    if on_waited is not None and reason is not None:
                        on_waited(elapsed, reason)
                with self._lock:  # a 429 another run got while this one waited holds it too
                    now, start, reason = self.clock(), self._held_until, "retry_after"
        finally:
            with self._lock:
                self.waited_s += waited
        return waited

    def _reserve(self, now: float, tokens: int) -> tuple[float, WaitReason | None]:
        """The earliest start allowed from ``now`` for a request of ``tokens`` input tokens and why it is later;
        the slot is taken."""
        while self._starts and self._starts[0] <= now - WINDOW_S - WINDOW_MARGIN_S:
            self._starts.popleft()
        gone = bisect.bisect_right(self._tokens, (now - WINDOW_S, _MOST))
        del self._tokens[:gone]
        start, reason = now, None
        candidates: list[tuple[float, WaitReason]] = [(self._held_until, "retry_after")]
        if self.tpm is not None:
            used = sum(n for _, n in self._tokens)
            for stamp, n in self._tokens:  # the window frees tokens as old calls leave it; a request larger than
                if used + max(tokens, 1) <= self.tpm:  # the limit goes into an empty window
                    break
                used -= n
                candidates.append((stamp + WINDOW_S, "tokens_per_minute"))
        if self.rpm is not None:
            interval = WINDOW_S / self.rpm
            candidates.append((self._due - (min(self.rpm, RPM_BURST) - 1) * interval, "requests_per_minute"))
            if len(self._starts) >= self.rpm:
                candidates.append((self._starts[-self.rpm] + WINDOW_S + WINDOW_MARGIN_S, "requests_per_minute"))
        if self._starts:  # slots in arrival order
            candidates.append((self._starts[-1], "requests_per_minute"))
        for when, why in candidates:
            if when > start:
                start, reason = when, why
        if self.rpm is not None:
            self._starts.append(start)
            self._due = max(self._due, start) + WINDOW_S / self.rpm
        if self.tpm is not None and tokens > 0:
            bisect.insort(self._tokens, (start, tokens))
        return start, reason

    def spent(self, tokens: int) -> None:
        """A call of this model was answered: ``tokens`` more count for a minute (its output, when its input was
        counted at :meth:`acquire`; else input and output)."""
        if tokens > 0 and self.tpm is not None:
            with self._lock:
                bisect.insort(self._tokens, (self.clock(), tokens))

    def hold(self, seconds: float) -> None:
        """The provider answered 429 with ``Retry-After: seconds``: no request starts before then, from any run.
        ``seconds`` that is not a finite number ≥ 0 holds nothing (a wait must end)."""
        if not math.isfinite(seconds) or seconds <= 0:
            return
        with self._lock:
            self._held_until = max(self._held_until, self.clock() + seconds)


@dataclass
class WaitTotals:
    """The waits of one model: how many and how long, by reason."""

    count: int = 0
    seconds: float = 0.0


class RateLimits:
    """The rate limiters of one process, by model and endpoint."""

    def __init__(
        self, *, clock: Clock = time.monotonic, sleep: Sleep = asyncio.sleep, override: RateLimit | None = None
    ) -> None:
        self.clock = clock
        self.sleep = sleep
        self.override = override
        """``--rpm``/``--tpm``: the limit of every model of the process, over the team file's."""
        self._limiters: dict[tuple[str, str], RateLimiter] = {}
        self._waits: dict[tuple[str, WaitReason], WaitTotals] = {}
        self._lock = threading.Lock()

    def of(self, model: str, api_base: str | None, declared: RateLimit | None = None) -> RateLimiter:
        """The limiter of ``model`` at ``api_base`` (``None``: the provider's own endpoint), made on first use,
        limited by :attr:`override`, else by ``declared``: the last limit declared for it holds (an agent that
        declares none for a model another agent limits does not lift the limit)."""
        limiter = self._limiter(model, api_base)
        chosen = self.override or declared
        if chosen is not None:
            limiter.limit(chosen)
        return limiter

    def spent(self, model: str, api_base: str | None, tokens: int) -> None:
        """A call of ``model`` at ``api_base`` was answered with ``tokens`` (input and output)."""
        self._limiter(model, api_base).spent(tokens)

    def hold(self, model: str, api_base: str | None, seconds: float) -> None:
        """A 429 from ``model`` at ``api_base`` said ``Retry-After: seconds``: every run waits that long."""
        self._limiter(model, api_base).hold(seconds)

    def _limiter(self, model: str, api_base: str | None) -> RateLimiter:
        key = (model.strip(), (api_base or "").strip().rstrip("/"))
        with self._lock:
            limiter = self._limiters.get(key)
            if limiter is None:
                limiter = self._limiters[key] = RateLimiter(clock=self.clock, sleep=self.sleep)
            return limiter

    async def acquire(
        self,
        model: str,
        api_base: str | None,
        declared: RateLimit | None,
        *,
        tokens: Callable[[], int] | None = None,
    ) -> float:
        """Wait for a slot of ``model`` at ``api_base`` (``tokens``: the request's input tokens, asked under a
        tokens limit only); each wait reported (:func:`report_wait`) and counted."""

        def waiting(seconds: float, reason: WaitReason) -> None:
            with self._lock:
                self._waits.setdefault((model, reason), WaitTotals()).count += 1
            report_wait(model, seconds, reason)

        def waited(seconds: float, reason: WaitReason) -> None:  # what elapsed, also of a wait cut short
            with self._lock:
                self._waits.setdefault((model, reason), WaitTotals()).seconds += seconds
            if (scope := current_scope.get()) is not None:
                scope.waits.append(seconds)

        return await self.of(model, api_base, declared).acquire(waiting, tokens=tokens, on_waited=waited)

    def waits(self) -> dict[tuple[str, WaitReason], WaitTotals]:
        """The waits so far, by model and reason."""
        with self._lock:
            return {key: WaitTotals(t.count, t.seconds) for key, t in self._waits.items()}


def estimated_tokens(messages: Sequence[Message], tools: Sequence[ToolSchema] = ()) -> int:
    """A request's input tokens, roughly (four characters of its JSON a token): what a tokens limit counts
    before the provider says."""
    return len(json.dumps([list(tools), list(messages)], ensure_ascii=False, default=str)) // 4 + 1


def report_wait(model: str, seconds: float, reason: WaitReason) -> None:
    """An ``llm_wait`` event of the run whose model call waits (its ``llm`` span), and a log line."""
    log.debug("llm_wait", model=model, seconds=round(seconds, 3), reason=reason)
    scope = current_scope.get()
    bus = EventBus.of_run(scope.run_id) if scope is not None else None
    if scope is None or bus is None:
        return
    bus.emit(
        "llm_wait",
        span_id=scope.span_id,
        parent_span_id=None,
        agent_path=scope.agent_path,
        model=model,
        seconds=round(seconds, 3),
        reason=reason,
    )


RATE_LIMIT_ENV = "TEAMRUN_RATE_LIMIT"
"""``"RPM,TPM"`` (either may be empty): the :attr:`RateLimits.override` a process starts with — how ``--rpm`` and
``--tpm`` reach the worker processes ``teamrun serve --workers N`` spawns (each with its share)."""


def override_from(environ: Mapping[str, str]) -> RateLimit | None:
    """The limit :data:`RATE_LIMIT_ENV` gives in ``environ`` (``None``: none, or no positive count)."""
    rpm, _, tpm = environ.get(RATE_LIMIT_ENV, "").partition(",")
    counts = [int(v) if v.strip().isdigit() and int(v) > 0 else None for v in (rpm, tpm)]
    return RateLimit(*counts) if any(counts) else None


def as_environment(limit: RateLimit) -> str:
    """``limit`` as :data:`RATE_LIMIT_ENV`'s value."""
    return ",".join("" if v is None else str(v) for v in (limit.requests_per_minute, limit.tokens_per_minute))


_process_rate_limits = RateLimits(override=override_from(os.environ))


def process_rate_limits() -> RateLimits:
    """The rate limits every run of this process shares."""
    return _process_rate_limits
