"""Running a turn's planned actions: delegations (through the delegator), tool calls, transfers,
background-task controls, workspace calls (:mod:`teamrun.engine.workspace.writes`), unknown names, and calls
whose arguments are out of bounds (refused: a JSON refusal and a ``tool`` span ending ``error``, nothing run).
Each returns a :class:`CallResult` with its signals.

A tool call is refused once ``max_tool_calls`` is used up; otherwise it runs in
a ``tool`` span, or is answered from the journal when an earlier attempt of the
run finished it (a tool that is not idempotent gets its start written, and
waited for, before it runs). A transfer (handoff) is refused past ``max_handoffs``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from teamrun.conventions import is_board_tool
from teamrun.engine.delegation.delegator import Delegator
from teamrun.engine.delegation.tools import parse_request
from teamrun.engine.durability.journal import EntryKey, JournalEntry, RunJournal, tool_hash, tool_idempotent
from teamrun.engine.runtime import AgentFrame, RunContext
from teamrun.engine.turn.turn_plan import (
    Action,
    BadArguments,
    CallResult,
    Control,
    Delegate,
    ExtraTransfer,
    HandedOff,
    RunTool,
    Transfer,
    Unknown,
    WorkspaceCall,
)
from teamrun.engine.workspace.board_calls import refused_op_event, run_board_call
from teamrun.engine.workspace.writes import refused_write_event, run_workspace_call
from teamrun.llm.types import Message, parse_arguments
from teamrun.logs import get_logger
from teamrun.tools.approval import Approver
from teamrun.tools.base import ToolOutcome
from teamrun.tools.invoke import invoke_tool
from teamrun.tools.people import AskSite, ask_site

__all__ = ["refuse_arguments", "run_action", "run_tool", "transfer"]

log = get_logger(__name__)


async def run_action(
    ctx: RunContext,
    frame: AgentFrame,
    delegator: Delegator,
    action: Action,
    *,
    turn: int,
    position: int,
    messages: Sequence[Message],
) -> CallResult:
    """Run one action of the reply of model call ``turn`` (``position``: its call's place in the reply)."""
    call = action.call
    if isinstance(action, BadArguments):
        return refuse_arguments(ctx, frame, action)
    if isinstance(action, Delegate):
        try:
            request = parse_request(ctx, frame, action.worker, parse_arguments(call.arguments))
        except ValueError as exc:
            return CallResult(call, f"Error: {exc}. Call {call.name} again with corrected arguments.")
        keys = {worker: f"{frame.key}/{worker}@{turn}.{position}" for worker in request.targets}
        async with ctx.activity.waiting():  # the workers work meanwhile
            content, signals = await delegator.delegate(request, keys, messages, single=action.worker is not None)
        return CallResult(call, content, signals)
    if isinstance(action, Transfer):
        return transfer(frame, action)
    if isinstance(action, ExtraTransfer):
        return CallResult(call, f"Ignored: only one transfer per turn; {action.first} was asked first.")
    if isinstance(action, RunTool):
        return await run_tool(ctx, frame, action, turn, position)
    if isinstance(action, Control):
        async with ctx.activity.waiting():  # wait_for: the background workers work meanwhile
            return CallResult(call, await delegator.control(call.name, parse_arguments(call.arguments)))
    if isinstance(action, WorkspaceCall):
        if is_board_tool(call.name):
            return CallResult(call, await run_board_call(ctx, frame, call, turn, position))
        return CallResult(call, await run_workspace_call(ctx, frame, call, turn, position))
    assert isinstance(action, Unknown)
    return unknown_tool(ctx, frame, action)


_SHOWN_NAME = 120
"""How much of an unknown tool's name its events carry (the name is the model's: it may be anything)."""


def unknown_tool(ctx: RunContext, frame: AgentFrame, action: Unknown) -> CallResult:
    """A call of a tool the agent does not have: the model reads which it has, and a ``tool`` span ends ``error``
    (a trace shows the call like any refused one); not a tool call for ``max_tool_calls``."""
    content = action.message()
    name = action.call.name
    shown = name if len(name) <= _SHOWN_NAME else name[: _SHOWN_NAME - 1] + "…"
    with frame.span(ctx, "tool", tool=shown) as span:
        problem = "not allowed for this task" if action.withheld else "no such tool"
        span.end.update(tool=shown, status="error", error=f"{problem}: {shown}", chars=len(content))
    return CallResult(action.call, content)


def refuse_arguments(ctx: RunContext, frame: AgentFrame, action: BadArguments) -> CallResult:
    """The refusal of a call whose arguments are out of bounds, in a ``tool`` span that ends ``error`` (its event
    says the rule); not a tool call for ``max_tool_calls``, nothing journaled (the same reply is refused again).
    A workspace write or a board call refused so is a ``workspace_write`` / ``board_op`` event too (reason
    ``arguments``), as every refused write is."""
    call, problem = action.call, action.problem
    content = action.refusal()
    log.info("tool_arguments_refused", tool=call.name, rule=problem.rule)
    with frame.span(ctx, "tool", tool=call.name) as span:
        said = f"arguments refused ({problem.rule}): {problem.message}"
        if is_board_tool(call.name):
            op = refused_op_event(ctx, frame, call.name, said)
            if op is not None:
                frame.emit(ctx, "board_op", span_id=span.id, **op)
        write = refused_write_event(ctx, call.name, said)  # None unless a workspace write
        if write is not None:
            frame.emit(ctx, "workspace_write", span_id=span.id, **write)
        span.end.update(
            tool=call.name,
            status="error",
            error=f"arguments refused ({problem.rule}): {problem.message}",
            chars=len(content),
        )
    return CallResult(call, content)


def transfer(frame: AgentFrame, action: Transfer) -> CallResult:
    reached = frame.ledger.check_before_handoff()
    if reached is not None:
        return CallResult(
            action.call, f"Error: {reached} reached; no more transfers. Answer the user yourself.", (reached,)
        )
    frame.ledger.charge("handoffs")
    return CallResult(
        action.call, f"Transferred to {action.target}: it now answers the user.", (HandedOff(action.target),)
    )


async def run_tool(ctx: RunContext, frame: AgentFrame, action: RunTool, turn: int, position: int) -> CallResult:
    """``action``'s tool call, the ``position``-th of the reply of model call ``turn``."""
    call = action.call
    reached = frame.ledger.check_before_tool_call()
    if reached is not None:
        return CallResult(
            call, f"Error: {reached} reached; this call was not run. Answer with what you have.", (reached,)
        )
    frame.ledger.charge("tool_calls")
    site = ask_site.set(
        AskSite(
            ctx.journal.run_id if ctx.journal else ctx.result.run_id,
            frame.key,
            turn,
            position,
            frame.name,
            ctx.desk,
            ctx.activity.parked_call,
            lambda kind, **data: frame.emit(ctx, kind, **data),
        )
    )
    with frame.span(ctx, "tool", tool=call.name) as span:
        span.end["tool"] = call.name  # also on the end of a tool that raised or was cancelled
        try:
            outcome = await _journaled(ctx, frame, action, turn, position)
        finally:
            ask_site.reset(site)
        if outcome.ok and (secrets := action.tool.secrets_in(outcome.content)):
            ctx.bus.keep_secrets(secrets)  # before any event can carry them (a secret person's answer)
            if ctx.journal is not None:
                ctx.journal.keep_secrets(secrets)  # and the run's record (`teamrun runs`, a restarted server)
        span.end.update(
            tool=call.name, status="ok" if outcome.ok else "error", error=outcome.error, chars=len(outcome.content)
        )
    return CallResult(call, outcome.content)


async def _journaled(ctx: RunContext, frame: AgentFrame, action: RunTool, turn: int, position: int) -> ToolOutcome:
    """Run the tool, or replay its journaled outcome; a non-idempotent tool's start is written first."""
    call, journal = action.call, ctx.journal
    if journal is None:
        return await invoke_tool(action.tool, call.arguments, approver=ctx.approver)
    fingerprint = tool_hash(call.name, call.arguments)
    outcome = journal.replay.tool(frame.key, turn, position, fingerprint)
    if outcome is not None:
        return outcome
    approver = ctx.approver
    if not tool_idempotent(action.tool, ctx.config.tools):
        start = JournalEntry(
            EntryKey(frame.key, turn, "tool_start", position),
            fingerprint,
            {"tool": call.name, "arguments": call.arguments},
        )
        if action.tool.require_approval:  # started once approved: a run waiting for the approval did not start it
            approver = _StartWhenApproved(approver, journal, start)
        else:
            await journal.write_now(start)
    outcome = await invoke_tool(action.tool, call.arguments, approver=approver)
    journal.write(  # rides with the next reply's commit (store branch: group commit)
        JournalEntry(
            EntryKey(frame.key, turn, "tool", position),
            fingerprint,
            {"ok": outcome.ok, "content": outcome.content, "error": outcome.error},
        )
    )
    return outcome


class _StartWhenApproved:
    """The run's approver; once it approves, the tool's start is journaled (and waited for) before it runs."""

    def __init__(self, approver: Approver, journal: RunJournal, start: JournalEntry) -> None:
        self.approver, self.journal, self.start = approver, journal, start

    async def approve(self, tool: str, arguments: dict[str, Any]) -> bool:
        approved = await self.approver.approve(tool, arguments)
        if approved:
            await self.journal.write_now(self.start)
        return approved
