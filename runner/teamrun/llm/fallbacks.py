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
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from typing import Literal, get_args

from teamrun.errors import ModelError
from teamrun.llm.adapter import ProviderError
from teamrun.llm.breaker import BreakerRegistry
from teamrun.llm.types import ModelReply, ModelSettings

__all__ = ["FALLBACK_REASONS", "AllModelsFailed", "FallbackReason", "complete_in_order", "fallback_reason"]

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
            failed.append(Failed(candidate, f"skipped: {blocked}"))
            continue
        try:
            reply = await ask(candidate)
        except ModelError as exc:
            reason = fallback_reason(exc)
            if reason in _HEALTH:
                breaker.failed()
            else:  # the request's own problem (too long, rejected) or ours (no key): says nothing of its health
                breaker.released()
            failed.append(Failed(candidate, _why(exc, reason), exc))
            if reason in allowed:
                continue
            break
        except BaseException:
            breaker.released()
            raise
        breaker.succeeded()
        return replace(reply, answered_by=candidate.model, fallback=_note(candidate, failed))
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
