"""The one path of a model call: limits, span, call scope, journal replay and write, ledger charge, events.

Every model call the engine makes goes through :func:`call_model`: an agent's
turns (:mod:`teamrun.engine.turn.agent_loop`), the ``accept:`` judge
(:mod:`teamrun.engine.turn.acceptance`) and the thread summary
(:mod:`teamrun.engine.durability.threads`, through :class:`teamrun.engine.team.Team`).
In order:

1. the token and cost limits up the frame's ledger chain are checked — a call
   past them is refused with :class:`CallRefused` (an agent's last turn, which
   the limits allow, skips this);
2. an ``llm`` span opens (``llm_start``) and the call scope is set (agent path,
   turn, span, run id), which the scripted model, cassettes and retry events read;
3. a journaled call is answered from the journal when an earlier attempt of the
   run finished it (same invocation, number and request hash), else the model is
   asked and its reply is written to the journal — one call site; a lone surrogate
   in the reply (its text, a tool call's name or raw arguments) is first turned into
   its escape (``\ud800``), which reads back as the same JSON string — so
   :mod:`teamrun.bounds` still refuses the call — but which UTF-8, the journal, the
   events and the provider the conversation goes back to can carry;
4. the reply's tokens and cost are charged to the frame's ledger (a step for
   the agent's own turns) and to the model that answered it (the run's usage per model), and the span ends
   (``llm_end``; for a model with ``fallbacks``, with the ``model`` of the list that answered and, when it was
   not the first, the ``fallback`` note: ``"openai/b after openai/a failed: server error (HTTP 500)"``; and
   ``waited_s`` when the call waited for its model's rate limit — a wait, not the model's time).

Which model answered is part of the journaled reply: a replayed call (a resume, ``--replay``) is answered from
the journal whichever model of the list answered it, and is counted under that model; a call not in the journal
goes through the circuit breakers, which a resumed run first tells what the journal saw fail
(:func:`teamrun.engine.durability.resume.hold_open_failed_models`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from teamrun.bounds import printable
from teamrun.engine.durability.journal import EntryKey, JournalEntry
from teamrun.engine.limits.ledger import LimitReached
from teamrun.engine.runtime import AgentFrame, RunContext
from teamrun.errors import ModelError
from teamrun.llm.cassette import reply_to_dict
from teamrun.llm.types import CallScope, Message, ModelReply, ModelSettings, ToolCall, ToolSchema, current_scope

__all__ = ["CallRefused", "ModelCall", "call_model", "carried"]


class CallRefused(ModelError):
    """A model call refused before it was made: a token or cost limit is used up."""

    def __init__(self, reached: LimitReached) -> None:
        self.reached = reached
        super().__init__(f"{reached} reached; the model was not asked")


@dataclass(frozen=True)
class ModelCall:
    """Where a model call comes from, and how it counts."""

    turn: int
    """The call's number in the call scope (an agent's turn, a judge's attempt)."""
    agent_path: tuple[str, ...] | None = None
    """The call scope's agent path (default: the frame's)."""
    journal: tuple[str, int] | None = None
    """``(invocation, index)`` it is journaled under (``None``: not journaled)."""
    step: bool = True
    """Whether it is one of the agent's own steps (a judge's or summariser's call is not)."""
    check_limits: bool = True
    """False for an agent's last turn, which may go past a used-up token or cost limit."""
    parent_span_id: str | None = None
    """The span the call hangs under (default: the frame's)."""


async def call_model(
    ctx: RunContext,
    frame: AgentFrame,
    messages: Sequence[Message],
    call: ModelCall,
    *,
    settings: ModelSettings,
    tools: Sequence[ToolSchema] = (),
    response_format: Mapping[str, Any] | None = None,
) -> ModelReply:
    """Make one model call for ``frame`` (see the module's docstring); raises :class:`ModelError`."""
    if call.check_limits:
        reached = frame.ledger.check_spent()
        if reached is not None:
            raise CallRefused(reached)
    with frame.span(
        ctx, "llm", parent_span_id=call.parent_span_id, model=settings.model, messages=len(messages)
    ) as span:
        journal, fingerprint, reply = ctx.journal if call.journal else None, "", None
        if journal is not None and call.journal is not None:
            fingerprint = journal.request_hash(messages, settings, tools, response_format)
            reply = journal.replay.model(*call.journal, fingerprint)
        calling = CallScope(call.agent_path or frame.path, call.turn, span.id, ctx.bus.run_id)
        scope = current_scope.set(calling)
        try:
            if reply is None:
                if journal is not None and call.journal is not None:  # a replica's: what it carries is in the store
                    await journal.settle()
                where = f" at {settings.api_base}" if settings.api_base else ""
                ctx.calls_in_flight[span.id] = f"{frame.name}'s call to {settings.model}{where}"
                try:
                    reply = carried(
                        await ctx.model.complete(
                            messages, settings=settings, tools=list(tools), response_format=response_format
                        )
                    )
                finally:
                    ctx.calls_in_flight.pop(span.id, None)
                if journal is not None and call.journal is not None:  # durable before the engine acts on it
                    await journal.write_now(
                        JournalEntry(EntryKey(*call.journal, "model"), fingerprint, reply_to_dict(reply))
                    )
        except BaseException:
            if calling.waited_s:  # cut off (cancelled) or failed after its rate-limit waits: its end says them too
                span.end.update(waited_s=round(calling.waited_s, 3))
            raise
        finally:
            current_scope.reset(scope)
        frame.ledger.charge_model(reply.usage, reply.cost_usd, step=call.step)
        ctx.record_model_call(reply.answered_by or settings.model, reply)
        if not reply.usage_known:  # malformed figures from the provider: unknown, never a pretended 0
            frame.ledger.usage_known = False
            span.end.update(usage_known=False)
            _warn_unlimited(ctx, frame, reply.answered_by or settings.model)
        if reply.waited_s:  # for the model's rate limit: a wait, not the model's time
            span.end.update(waited_s=round(reply.waited_s, 3))
        span.end.update(
            usage=reply.usage.as_dict(),
            cost=reply.cost_usd,
            tool_calls=[c.name for c in reply.tool_calls],
            finish_reason=reply.finish_reason,
            **_answered(reply),
        )
    return reply


def _warn_unlimited(ctx: RunContext, frame: AgentFrame, model: str) -> None:
    """Once a run and model: the token and cost limits that ``model``'s unknown usage escapes (a warning on the
    result and the console, like the unknown price's note)."""
    limits = frame.ledger.spend_limits()
    said = f"usage unknown for model {model}:"
    if not limits or any(warning.startswith(said) for warning in ctx.result.warnings):
        return
    named = ", ".join(dict.fromkeys(limits))
    ctx.warn(frame, f"{said} {named} cannot limit it (its calls count no tokens or cost)")


def _answered(reply: ModelReply) -> dict[str, str]:
    """``llm_end``'s ``model`` (which of the list answered) and ``fallback`` (why not the first), for a model
    with fallbacks; nothing for one without (its ``llm_start`` names it)."""
    if not reply.answered_by:
        return {}
    return {"model": reply.answered_by, **({"fallback": reply.fallback} if reply.fallback else {})}


def carried(reply: ModelReply) -> ModelReply:
    """``reply`` with every lone surrogate of its text and tool calls (id, name, arguments) as its escape
    (``\\ud800``); the same object when it has none (almost always)."""
    text = printable(reply.text) if reply.text is not None else None
    calls = tuple(ToolCall(printable(c.id), printable(c.name), printable(c.arguments)) for c in reply.tool_calls)
    if text == reply.text and calls == reply.tool_calls:
        return reply
    return replace(reply, text=text, tool_calls=calls)
