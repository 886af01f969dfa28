"""Circuit breakers: a model at an endpoint that keeps failing is skipped for a cool-down, then probed once.

One :class:`CircuitBreaker` per model and endpoint, kept in a :class:`BreakerRegistry` that every run of a
process shares (:func:`process_breakers`: ``serve``, ``batch`` and ``chat`` run many runs in one process).
Only models with a fallback list go through a breaker (:mod:`teamrun.llm.fallbacks`): a model alone has
nothing to be skipped for, and is always asked.

The rule, per model and endpoint:

- **closed** (the start): every call goes out. A call that fails for a reason of the model's health — a server
  error, a rate limit past its retries, a timeout, a connection error, a malformed answer, a model that is not
  found — counts; a success resets the count. :data:`DEFAULT_FAILURES_TO_OPEN` such failures in a row open it.
- **open**: no request goes to it for :data:`DEFAULT_COOL_DOWN_S` seconds; the list's next model is asked.
- **half-open** (the cool-down is over): one call goes out as a probe while the others still skip it; the
  probe's success closes the breaker, its failure opens it for another cool-down.

A resumed run learns from its journal: a model that failed (or was skipped) in a journaled call is held open
(:meth:`CircuitBreaker.hold_open`) for the rest of the cool-down counted from that call, unless this process saw it
answer since (:func:`teamrun.llm.fallbacks.hold_open_from_journal`).

The clock is injectable (``clock=``): tests step it instead of sleeping.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

__all__ = [
    "DEFAULT_COOL_DOWN_S",
    "DEFAULT_FAILURES_TO_OPEN",
    "BreakerRegistry",
    "CircuitBreaker",
    "process_breakers",
]

DEFAULT_FAILURES_TO_OPEN = 3
"""Failed calls in a row (each after its own retries) that open a model's breaker."""

DEFAULT_COOL_DOWN_S = 30.0
"""Seconds an open breaker skips its model before one probe call may go out."""

Clock = Callable[[], float]


@dataclass
class CircuitBreaker:
    """One model at one endpoint: closed, open (until a time) or half-open (one probe out). Thread-safe."""

    failures_to_open: int = DEFAULT_FAILURES_TO_OPEN
    cool_down_s: float = DEFAULT_COOL_DOWN_S
    clock: Clock = time.monotonic
    failures: int = 0
    """Failed calls in a row."""
    opened_at: float | None = None
    """When it last opened (``None``: closed)."""
    probing: bool = False
    """A probe call is out (half-open)."""
    answered_at: float | None = None
    """When a call it admitted was last answered (``None``: never in this process)."""
    why_open: str | None = None
    """Why it is open when it was not its own failed calls (:meth:`hold_open`)."""
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def admit(self) -> str | None:
        """``None``: the call may go out (the probe, when half-open); else why it is skipped."""
        with self._lock:
            if self.opened_at is None:
                return None
            left = self.opened_at + self.cool_down_s - self.clock()
            if left > 0:
                why = self.why_open or f"circuit open after {self.failures} failed calls"
                return f"{why} ({left:.0f}s of its cool-down left)"
            if self.probing:
                return "circuit half-open (a probe call is out)"
            self.probing = True
            return None

    def left(self) -> float:
        """Seconds of its cool-down left (0.0 when closed, or half-open)."""
        with self._lock:
            if self.opened_at is None:
                return 0.0
            return max(0.0, self.opened_at + self.cool_down_s - self.clock())

    def hold_open(self, age_s: float, open_s: float, why: str) -> bool:
        """A failure known from elsewhere (a resumed run's journal), ``age_s`` seconds ago and with ``open_s``
        seconds of cool-down left then, holds it open for what is left of that now, ``why`` saying so in its
        skips. Nothing changes when nothing is left, a probe is out, this process saw the model answer since the
        failure, or it is already open at least as long. Whether it was held open."""
        with self._lock:
            now = self.clock()
            if not math.isfinite(open_s):
                return False
            # never longer than this breaker's own cool-down: a journal is data, not a setting
            left = min(open_s, self.cool_down_s) - max(0.0, age_s)
            if left <= 0 or self.probing:
                return False
            if self.answered_at is not None and self.answered_at >= now - max(0.0, age_s):
                return False
            if self.opened_at is not None and self.opened_at + self.cool_down_s >= now + left:
                return False
            self.opened_at, self.why_open = now + left - self.cool_down_s, why
            return True

    def succeeded(self) -> None:
        """The call it admitted was answered: closed again."""
        with self._lock:
            self.failures, self.opened_at, self.probing, self.why_open = 0, None, False, None
            self.answered_at = self.clock()

    def failed(self) -> None:
        """The call it admitted failed for a reason of the model's health: counted; opened when it is the
        :attr:`failures_to_open`-th in a row or the half-open probe."""
        with self._lock:
            self.failures += 1
            if self.probing or self.failures >= self.failures_to_open:
                self.opened_at, self.why_open = self.clock(), None
            self.probing = False

    def released(self) -> None:
        """The call it admitted ended otherwise (cancelled, a request the model rejected): nothing learnt, a
        probe may go out again."""
        with self._lock:
            self.probing = False


class BreakerRegistry:
    """The breakers of one process, by model and endpoint."""

    def __init__(
        self,
        *,
        failures_to_open: int = DEFAULT_FAILURES_TO_OPEN,
        cool_down_s: float = DEFAULT_COOL_DOWN_S,
        clock: Clock = time.monotonic,
    ) -> None:
        self.failures_to_open = failures_to_open
        self.cool_down_s = cool_down_s
        self.clock = clock
        self._breakers: dict[tuple[str, str], CircuitBreaker] = {}
        self._lock = threading.Lock()

    def of(self, model: str, api_base: str | None) -> CircuitBreaker:
        """The breaker of ``model`` at ``api_base`` (``None``: the provider's own endpoint), made on first use."""
        key = (model.strip(), (api_base or "").strip().rstrip("/"))
        with self._lock:
            breaker = self._breakers.get(key)
            if breaker is None:
                breaker = CircuitBreaker(self.failures_to_open, self.cool_down_s, self.clock)
                self._breakers[key] = breaker
            return breaker


_process_breakers = BreakerRegistry()


def process_breakers() -> BreakerRegistry:
    """The registry every run of this process shares."""
    return _process_breakers
