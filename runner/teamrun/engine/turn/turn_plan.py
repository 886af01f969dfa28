"""One model turn: the reply planned before anything runs, and the one function that picks what comes next.

:func:`plan_turn` sorts a reply's tool calls, using the agent's
:class:`~teamrun.engine.turn.tool_table.ToolTable`, into actions: delegations,
handoffs (the first one wins; later ones are ignored), plain tool calls and
unknown names. It is the boundary of what a model sends: a known tool's call
whose arguments break a rule of :mod:`teamrun.bounds` (a lone surrogate, NaN,
a huge integer, deep nesting, too many bytes, not a JSON object) is planned as
:class:`BadArguments`, refused before any tool, workspace, board or delegation
reads them. The history keeps such a call with ``{}`` for its arguments
(:func:`history_message`): they are never sent to the provider again, where a
converter would parse them once more. Running the actions gives one :class:`CallResult` per call,
each carrying the signals it raised (a limit reached, a bail, a handoff).
:func:`next_step` reads those signals and decides the turn's end:
:class:`FinalOutput`, :class:`RunAgain`, :class:`Stop` or :class:`HandOff`; a :class:`Turn`
is the messages a turn adds together with that decision.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from dataclasses import dataclass

from teamrun.bounds import OutOfBounds, check_arguments
from teamrun.config.tool_names import DELEGATE_TASK
from teamrun.engine.limits.ledger import LimitReached
from teamrun.engine.signals import Bail, HandedOff, Refused, Signal
from teamrun.engine.turn.tool_table import ToolTable
from teamrun.llm.types import Message, ModelReply, ToolCall
from teamrun.tools.base import Tool

# -- actions: what the model asked for ----------------------------------------------------


@dataclass(frozen=True)
class Delegate:
    call: ToolCall
    worker: str | None
    """The worker of an ``ask_<worker>`` call; ``None`` for ``delegate_task`` (targets in the arguments)."""


@dataclass(frozen=True)
class Transfer:
    call: ToolCall
    target: str


@dataclass(frozen=True)
class ExtraTransfer:
    """A second handoff in one turn: not run, the model is told who already takes over."""

    call: ToolCall
    first: str


@dataclass(frozen=True)
class RunTool:
    call: ToolCall
    tool: Tool


@dataclass(frozen=True)
class Control:
    """A background-task tool call (``wait_for``, ``check_tasks``, ``cancel_task``)."""

    call: ToolCall


@dataclass(frozen=True)
class WorkspaceCall:
    """A workspace tool call (``workspace_read``, ``workspace_changes``, ``workspace_write_<entry>``)."""

    call: ToolCall


@dataclass(frozen=True)
class Unknown:
    call: ToolCall
    offered: tuple[str, ...]
    withheld: bool = False
    """The agent declares this tool, but its task narrowed its tools and left this one out."""

    def message(self) -> str:
        problem = (
            f"the tool '{self.call.name}' is not allowed for this task"
            if self.withheld
            else f"there is no tool named '{self.call.name}'"
        )
        return f"Error: {problem}. Available tools: {', '.join(self.offered) or 'none'}."


@dataclass(frozen=True)
class BadArguments:
    """A call of a known tool whose arguments are out of bounds: nothing reads them, the model is told why."""

    call: ToolCall
    problem: OutOfBounds

    def refusal(self) -> str:
        """The tool result the model reads: JSON, like a workspace or board refusal."""
        message = f"{self.problem.message}; call {self.call.name} again with arguments within these bounds"
        where = {"where": self.problem.where} if self.problem.where else {}
        refusal = {"status": "refused", "reason": "arguments", "rule": self.problem.rule, **where, "message": message}
        return json.dumps(refusal, ensure_ascii=False)


Action = Delegate | Transfer | ExtraTransfer | RunTool | Control | WorkspaceCall | Unknown | BadArguments


@dataclass(frozen=True)
class TurnPlan:
    actions: tuple[Action, ...]

    @property
    def is_answer(self) -> bool:
        """No tool calls: the reply is the agent's answer."""
        return not self.actions


REFUSED_ARGUMENTS = "{}"
"""What the history keeps of a call's arguments that broke a rule of :mod:`teamrun.bounds`."""


def history_message(reply: ModelReply, plan: TurnPlan) -> Message:
    """The assistant message the agent's history keeps of ``reply`` (planned as ``plan``): a call whose arguments
    were refused at the boundary (:class:`BadArguments`, or an unknown tool's out of bounds) carries
    :data:`REFUSED_ARGUMENTS` instead, so invalid JSON, a megabyte or a 900-deep list is not re-sent to the
    provider with every later request (the refusal, in the call's tool result, says what was wrong)."""
    refused = {
        id(action.call)
        for action in plan.actions
        if isinstance(action, BadArguments)
        or (isinstance(action, Unknown) and check_arguments(action.call.arguments) is not None)
    }
    if not refused:
        return reply.as_message()
    calls = tuple(
        dataclasses.replace(call, arguments=REFUSED_ARGUMENTS) if id(call) in refused else call
        for call in reply.tool_calls
    )
    return dataclasses.replace(reply, tool_calls=calls).as_message()


def plan_turn(reply: ModelReply, table: ToolTable) -> TurnPlan:
    actions: list[Action] = []
    transfer: str | None = None
    for call in reply.tool_calls:
        entry = table.get(call.name)
        if entry is None:
            actions.append(Unknown(call, tuple(table.names), call.name in table.withheld))
        elif (problem := check_arguments(call.arguments)) is not None:
            actions.append(BadArguments(call, problem))
        elif entry.kind == "delegation":
            actions.append(Delegate(call, None if entry.name == DELEGATE_TASK else entry.offered.source))
        elif entry.kind == "background":
            actions.append(Control(call))
        elif entry.kind == "workspace":
            actions.append(WorkspaceCall(call))
        elif entry.kind == "handoff":
            assert entry.target is not None
            if transfer is None:
                transfer = entry.target
                actions.append(Transfer(call, entry.target))
            else:
                actions.append(ExtraTransfer(call, transfer))
        else:
            assert entry.tool is not None
            actions.append(RunTool(call, entry.tool))
    return TurnPlan(tuple(actions))


# -- signals: what running an action means for the turn ---------------------------------------


@dataclass(frozen=True)
class CallResult:
    """One tool call's result: the text the model sees, and the signals it raised."""

    call: ToolCall
    content: str
    signals: tuple[Signal, ...] = ()


# -- the end of a turn ----------------------------------------------------------------------


@dataclass(frozen=True)
class FinalOutput:
    text: str
    stopped: Stop | None = None
    """A limit reached while the answer was being checked (a judge's call refused): the answer is delivered
    unchecked and the agent ends as a limit ends it (``budget_exhausted``), with no last turn past the limit."""


@dataclass(frozen=True)
class RunAgain:
    pass


@dataclass(frozen=True)
class Stop:
    why: LimitReached | str
    """The limit reached, or why a hook stopped the agent."""
    budget: bool = True
    """True when a spending limit stopped the agent (the run then ends ``budget_exhausted``)."""

    @property
    def reason(self) -> str:
        return str(self.why)

    @property
    def note(self) -> str:
        """The reason as the agent's last-turn note says it."""
        return f"{self.why} has been reached" if isinstance(self.why, LimitReached) else self.why


@dataclass(frozen=True)
class HandOff:
    target: str


NextStep = FinalOutput | RunAgain | Stop | HandOff


@dataclass(frozen=True)
class Turn:
    """What one turn added to the conversation, and what comes next (the agent loop appends the messages)."""

    messages: list[Message]
    next: NextStep


def ends_turn(results: Sequence[CallResult]) -> bool:
    """A bail or a handoff decides the turn whatever else happened (no ``on_iteration`` hooks run)."""
    return any(isinstance(s, Bail | HandedOff) for r in results for s in r.signals)


def next_step(results: Sequence[CallResult], *, hook_stop: str | None = None) -> NextStep:
    """What follows a turn of tool calls: a bail's answer, a handoff, a stop, or another model call.

    ``hook_stop``: why an ``on_iteration`` hook (or its failure) stopped the agent.
    A limit reached during the turn comes before a hook's stop (it happened first).
    """
    signals = [s for r in results for s in r.signals]
    for signal in signals:
        if isinstance(signal, Bail):
            return FinalOutput(signal.result.response)
    for signal in signals:
        if isinstance(signal, HandedOff):
            return HandOff(signal.target)
    for signal in signals:
        if isinstance(signal, LimitReached):
            return Stop(signal)
    for signal in signals:
        if isinstance(signal, Refused):
            return Stop(signal.limit, budget=False)
    if hook_stop is not None:
        return Stop(hook_stop, budget=False)
    return RunAgain()


__all__ = [
    "REFUSED_ARGUMENTS",
    "Action",
    "BadArguments",
    "Bail",
    "CallResult",
    "Control",
    "Delegate",
    "ExtraTransfer",
    "FinalOutput",
    "HandOff",
    "HandedOff",
    "NextStep",
    "Refused",
    "RunAgain",
    "RunTool",
    "Signal",
    "Stop",
    "Transfer",
    "Turn",
    "TurnPlan",
    "Unknown",
    "WorkspaceCall",
    "ends_turn",
    "history_message",
    "next_step",
    "plan_turn",
]
