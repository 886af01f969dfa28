"""Fallbacks: an agent's model is a list, asked in order with the same request until one answers.

:func:`complete_in_order` asks the settings' model, then each of its ``fallbacks`` (each with its own
endpoint, key, retries and parameters), passing the request on only when the one before failed — after its
own retries — for one of :data:`FALLBACK_REASONS` that the list's ``fallback_on`` keeps (all by default):

- ``server_error``: a 5xx (and 408/409/425) answer; ``rate_limited``: 429 past the model's retries;
- ``timeout``; ``connection``: the endpoint could not be reached; ``malformed``: an answer that is not a chat
  completion;
- ``not_found``: the model is not there (HTTP 404, an event stream for a model id the endpoint does not serve);
- ``context_window``: the conversation does not fit this model's window (the next may have a larger one).

Any other failure (a rejected request, a missing key) ends the list there. Each model goes through its
circuit breaker (:mod:`teamrun.llm.breaker`, shared by the whole process): an open breaker skips the model
without a request. The reply names the model that answered (:attr:`ModelReply.answered_by`) and, when it was not
the first, why (:attr:`ModelReply.fallback`: ``"openai/b after openai/a failed: server error (HTTP 500)"``).
When no model answers, :class:`AllModelsFailed` names each one and why — one error, no traceback.

The reply also keeps the models before it that failed or were skipped for their health
(:attr:`ModelReply.unwell`, with the time and the cool-down left): it is journaled, and a resumed run — in a
process whose breakers know nothing of the earlier attempt — holds them open for the rest of that cool-down
(:func:`hold_open_from_journal`), so its calls start where the journal says the run was answered.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, replace
from typing import Literal, get_args

from teamrun.errors import ModelError
from teamrun.llm.adapter import ProviderError
from teamrun.llm.breaker import BreakerRegistry
from teamrun.llm.types import ModelReply, ModelSettings, Unwell

__all__ = [
    "FALLBACK_REASONS",
    "JOURNALED_FAILURE",
    "AllModelsFailed",
    "FallbackReason",
    "complete_in_order",
    "fallback_reason",
    "hold_open_from_journal",
]

FallbackReason = Literal[
    "server_error", "rate_limited", "timeout", "connection", "malformed", "not_found", "context_window"
]
FALLBACK_REASONS: tuple[FallbackReason, ...] = get_args(FallbackReason)
"""Every failure that may pass a request on to the next model (the default ``fallback_on``)."""

_HEALTH: frozenset[str] = frozenset(FALLBACK_REASONS) - {"context_window"}
"""The failures a circuit breaker counts: the model's endpoint is unwell (a context too long is the request's)."""

_SAID: dict[str, str] = {
    "server_error": "server error",
    "rate_limited": "rate limited",
    "timeout": "timed out",
    "connection": "could not connect",
    "malformed": "malformed answer",
    "not_found": "model not found",
    "context_window": "context too long for it",
}

JOURNALED_FAILURE = "circuit open: it failed in this run's journaled attempt"
"""Why a resumed run skips a model its journal saw fail (the skip adds the cool-down left)."""

Ask = Callable[[ModelSettings], Awaitable[ModelReply]]
"""Asks one model of the list (settings without fallbacks) the request."""


@dataclass(frozen=True)
class Failed:
    """One model of the list that did not answer."""

    settings: ModelSettings
    why: str
    """Short: ``"server error (HTTP 500)"``, ``"skipped: circuit open ..."``."""
    error: ModelError | None = None
    """What it raised (``None``: skipped by its breaker)."""
    open_s: float = 0.0
    """Seconds of its breaker's cool-down left after this (0.0: it did not fail for its health)."""

    @property
    def said(self) -> str:
        """The model, its endpoint and why: a provider's error says all three itself."""
        if isinstance(self.error, ProviderError):
            return str(self.error)
        where = f" at {self.settings.api_base}" if self.settings.api_base else ""
        return f"{self.settings.model}{where}: {self.error if self.error is not None else self.why}"


class AllModelsFailed(ModelError):
    """No model of an agent's list answered; the message names each one and why."""

    def __init__(self, failed: list[Failed]) -> None:
        self.failed = failed
        lines = [f"{i}. {f.said}" for i, f in enumerate(failed, 1)]
        super().__init__(f"no model of the list answered ({len(failed)} tried):\n  " + "\n  ".join(lines))


def fallback_reason(exc: BaseException) -> FallbackReason | None:
    """The :data:`FALLBACK_REASONS` entry ``exc`` is (a :class:`~teamrun.llm.adapter.ProviderError`'s kind and
    status), or ``None`` when it is no reason to ask another model."""
    kind, status = getattr(exc, "kind", None), getattr(exc, "status_code", None)
    if kind == "undecodable" or (kind == "rejected" and status == 404):
        return "not_found"
    return kind if kind in FALLBACK_REASONS else None


def _why(exc: ModelError, reason: FallbackReason | None) -> str:
    status = getattr(exc, "status_code", None)
    said = _SAID[reason] if reason is not None else "failed"
    return f"{said} (HTTP {status})" if isinstance(status, int) else said


async def complete_in_order(ask: Ask, settings: ModelSettings, breakers: BreakerRegistry) -> ModelReply:
    """Ask the settings' model, then each fallback, until one answers (see the module's docstring)."""
    allowed = settings.fallback_on if settings.fallback_on is not None else frozenset(FALLBACK_REASONS)
    failed: list[Failed] = []
    for candidate in (replace(settings, fallbacks=(), fallback_on=None), *settings.fallbacks):
        breaker = breakers.of(candidate.model, candidate.api_base)
        blocked = breaker.admit()
        if blocked is not None:
            failed.append(Failed(candidate, f"skipped: {blocked}", open_s=breaker.left()))
            continue
        try:
            reply = await ask(candidate)
        except ModelError as exc:
            reason = fallback_reason(exc)
            if reason in _HEALTH:
                breaker.failed()
            else:  # the request's own problem (too long, rejected) or ours (no key): says nothing of its health
                breaker.released()
            open_s = breaker.cool_down_s if reason in _HEALTH else 0.0
            failed.append(Failed(candidate, _why(exc, reason), exc, open_s))
            if reason in allowed:
                continue
            break
        except BaseException:
            breaker.released()
            raise
        breaker.succeeded()
        now = time.time()
        unwell = tuple(Unwell(f.settings.model, f.settings.api_base, now, f.open_s) for f in failed if f.open_s > 0)
        return replace(reply, answered_by=candidate.model, fallback=_note(candidate, failed), unwell=unwell)
    if len(failed) == 1 and failed[0].error is not None:
        raise failed[0].error
    raise AllModelsFailed(failed)


def _note(answered: ModelSettings, failed: list[Failed]) -> str | None:
    """``"B after A failed: why"``; ``None`` when the first model answered."""
    if not failed:
        return None
    before = "; ".join(
        f"{f.settings.model} {f.why}" if f.error is None else f"{f.settings.model} failed: {f.why}" for f in failed
    )
    return f"{answered.model} after {before}"


def hold_open_from_journal(
    replies: Iterable[ModelReply], breakers: BreakerRegistry, *, now: float | None = None
) -> list[tuple[Unwell, float]]:
    """Hold open, in ``breakers``, each model that a resumed run's journal (its model ``replies``, in the order they
    were written) last saw fail or be skipped for its health, for the rest of the cool-down counted from that call
    (:meth:`~teamrun.llm.breaker.CircuitBreaker.hold_open`: not if this process saw it answer since). A model the
    journal saw answer after that (the list's first again, after a probe) is not held. The models held open, each
    with the seconds left (``now``: the time, seconds since the epoch; default: now)."""
    latest: dict[tuple[str, str], Unwell] = {}
    for reply in replies:
        for key in [key for key in latest if key[0] == reply.answered_by]:  # it answered since: well again
            del latest[key]
        for unwell in reply.unwell:
            latest[(unwell.model, (unwell.api_base or "").strip().rstrip("/"))] = unwell
    now = time.time() if now is None else now
    held: list[tuple[Unwell, float]] = []
    for unwell in latest.values():
        age_s = max(0.0, now - unwell.at)
        breaker = breakers.of(unwell.model, unwell.api_base)
        if breaker.hold_open(age_s, unwell.open_s, JOURNALED_FAILURE):
            held.append((unwell, breaker.left()))
    return held
