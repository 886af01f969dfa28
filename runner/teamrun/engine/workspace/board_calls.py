"""The board tools an agent is offered, and the one path a board call takes: parsed, replayed or applied,
journaled, emitted.

An agent that may use a board (its ``write:``; default: the team's peers) gets ``board_post`` (its
``payload`` carries the board's schema), ``board_claim``, ``board_complete`` and ``board_release``; with
more than one board each takes a ``board`` argument. Results are JSON; a refusal says ``status: refused``,
the ``reason`` and a message, so the model can retry. In a peer team a ``board_claim`` that finds nothing
to claim waits until the board changes, then answers a task or, once the work has ended, ``done``,
``stopped`` (``limits.max_tasks``) or ``deadlock``. Like a workspace call, a board call finished by an
earlier attempt of the run is answered from the journal (the board was restored from it), so a resume
applies no operation twice; every operation is a ``board_op`` event.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping
from typing import Any

from teamrun.config import templates
from teamrun.config.models import TeamConfig
from teamrun.conventions import BOARD_CLAIM, BOARD_COMPLETE, BOARD_POST, BOARD_RELEASE
from teamrun.engine.durability.journal import tool_hash
from teamrun.engine.runtime import AgentFrame, RunContext
from teamrun.engine.workspace.board import Board, BoardOp, BoardOutcome, Veto, board_entries
from teamrun.engine.workspace.changes import ChangeRecord, ChangeSite, Made, apply_change
from teamrun.engine.workspace.peer_board import room_of
from teamrun.engine.workspace.room import PeerRoom
from teamrun.llm.types import ToolCall, ToolSchema, function_tool, parse_arguments

__all__ = ["board_change", "board_tools", "board_users", "refused_op_event", "run_board_call", "usable_boards"]


def board_users(config: TeamConfig, board: str) -> tuple[str, ...]:
    """Who may use ``board``: its ``write:``, else the team's peers."""
    assert config.workspace is not None
    spec = config.workspace.entries[board]
    return tuple(spec.write if spec.write is not None else config.peers or ())


def usable_boards(config: TeamConfig, agent: str) -> list[str]:
    if config.workspace is None:
        return []
    return [b for b in board_entries(config.workspace.entries) if agent in board_users(config, b)]


def board_tools(config: TeamConfig, agent: str) -> list[ToolSchema]:
    """``agent``'s board tools (none when it may use no board)."""
    boards = usable_boards(config, agent)
    if not boards:
        return []
    assert config.workspace is not None
    entries = config.workspace.entries
    several = len(boards) > 1
    choose: dict[str, Any] = {"board": {"type": "string", "enum": boards, "description": "The board."}}
    extra, required = (choose, ["board"]) if several else ({}, [])
    about = "; ".join(
        f"{b}" + (f": {(entries[b].description or '').strip()}" if entries[b].description else "") for b in boards
    )
    payload = dict(entries[boards[0]].value_schema) if not several else {}
    task_id = {"type": "string", "description": "The id of the task you hold (from board_claim), e.g. t3."}
    return [
        function_tool(
            BOARD_POST,
            f"Post a new task on the board ({about}) for any peer to claim.",
            {
                **extra,
                "payload": {**payload, "description": "What the task asks (the board's task schema)."},
                "after": {
                    "type": "array",
                    "items": {"type": "string"},
                    "description": "Ids of tasks that must be done before this one may be claimed (optional).",
                },
            },
            [*required, "payload"],
        ),
        function_tool(
            BOARD_CLAIM,
            "Claim the next open task: you hold it alone until you complete or release it (or your lease "
            "expires). When nothing is left the answer says the work is done: then answer with a summary.",
            dict(extra),
            list(required),
        ),
        function_tool(
            BOARD_COMPLETE,
            "Complete the task you hold, with its result (a task is done exactly once).",
            {**extra, "task_id": task_id, "result": {"type": "string", "description": "The task's result."}},
            [*required, "task_id", "result"],
        ),
        function_tool(
            BOARD_RELEASE,
            "Give the task you hold back to the board for another peer (say why).",
            {**extra, "task_id": task_id, "reason": {"type": "string", "description": "Why you give it back."}},
            [*required, "task_id"],
        ),
    ]


def board_change(outcome: BoardOutcome) -> ChangeRecord:
    """A board operation's record for the one change path: the model's result, its ``board_op`` event, the state."""
    shown = json.dumps(outcome.for_model(), ensure_ascii=False)
    return ChangeRecord(shown, outcome.applied, "board_op", outcome.event_fields(), outcome.state)


async def run_board_call(ctx: RunContext, frame: AgentFrame, call: ToolCall, turn: int, position: int) -> str:
    """The result text of board call ``call`` (the ``position``-th of the reply of model call ``turn``), made through
    the one change path (:func:`~teamrun.engine.workspace.changes.apply_change`)."""
    with frame.span(ctx, "tool", tool=call.name) as span:
        span.end["tool"] = call.name
        site = ChangeSite(frame.key, turn, position, tool_hash(call.name, call.arguments))
        record = await _make(ctx, frame, site, call, span.id)
        content, ok = record.content, record.ok
        span.end.update(tool=call.name, status="ok" if ok else "error", chars=len(content))
        if not ok:  # refused: the tool_end says why, as a tool's error does
            span.end["error"] = str((record.event or {}).get("message") or content)
    return content


def refused_op_event(ctx: RunContext, frame: AgentFrame, tool: str, problem: str) -> Mapping[str, Any] | None:
    """The ``board_op`` event's fields (reason ``arguments``) of a board call refused before its arguments were
    read (out of the bounds of :mod:`teamrun.bounds`): on the agent's only board; ``None`` when it has several
    (which one the arguments named is not read). Nothing changed and nothing is journaled."""
    message = f"{problem}; call {tool} again with arguments within these bounds"
    return _malformed(ctx, frame, None, tool, message).event


async def _make(ctx: RunContext, frame: AgentFrame, site: ChangeSite, call: ToolCall, span_id: str) -> ChangeRecord:
    """Make the call's operation; a claim in a peer team waits while nothing is claimable and the work goes on."""
    try:
        board, arguments = _target(ctx, frame, parse_arguments(call.arguments))
    except ValueError as exc:
        message = f"{exc}; call {call.name} again with corrected arguments"
        return await _once(ctx, frame, site, lambda: _malformed(ctx, frame, None, call.name, message), None, span_id)
    room = room_of(board)
    if call.name != BOARD_CLAIM:
        return await _once(ctx, frame, site, lambda: _operate(ctx, frame, board, call.name, arguments), room, span_id)
    while True:
        made = await apply_change(ctx, frame, site, lambda: _claim(ctx, frame, board), span_id=span_id)
        if made is not None:
            return _woken(room, made)
        assert room is not None  # only a peer team's claim waits
        room.waiting.add(frame.name)
        try:
            if room.settle() is None:
                async with ctx.activity.waiting():  # the others work meanwhile (or wait for a person)
                    await room.changed()
        finally:
            room.waiting.discard(frame.name)


async def _once(
    ctx: RunContext,
    frame: AgentFrame,
    site: ChangeSite,
    decide: Callable[[], ChangeRecord],
    room: PeerRoom | None,
    span_id: str,
) -> ChangeRecord:
    """An operation that never waits; an applied one wakes the peers waiting in ``room``."""
    made = await apply_change(ctx, frame, site, decide, span_id=span_id)
    assert made is not None  # only a claim waits
    return _woken(room, made)


def _woken(room: PeerRoom | None, made: Made) -> ChangeRecord:
    """``made``'s record, once the peers waiting in ``room`` were woken if it changed the board."""
    if room is not None and not made.replayed and made.record.kind is not None and made.record.ok:
        room.settle(changed=True)
    return made.record


_OPS: dict[str, BoardOp] = {
    BOARD_POST: "post",
    BOARD_CLAIM: "claim",
    BOARD_COMPLETE: "complete",
    BOARD_RELEASE: "release",
}


def _malformed(ctx: RunContext, frame: AgentFrame, board: Board | None, tool: str, message: str) -> ChangeRecord:
    """The refusal of a board call whose arguments could not be read: on the board it named, else the agent's
    only one (a ``board_op`` event there); with no board to name, a refusal without an event."""
    if board is None:
        boards = usable_boards(ctx.config, frame.name)
        board = ctx.boards.get(boards[0]) if len(boards) == 1 else None
    if board is None:
        shown = {"status": "refused", "reason": "arguments", "message": message}
        return ChangeRecord(json.dumps(shown, ensure_ascii=False), False)
    return board_change(board.refuse(_OPS.get(tool, "post"), frame.name, None, "arguments", message))


def _target(ctx: RunContext, frame: AgentFrame, arguments: Mapping[str, Any]) -> tuple[Board, dict[str, Any]]:
    boards = usable_boards(ctx.config, frame.name)
    if not boards:
        raise ValueError(f"{frame.name} may use no board")
    name = arguments.get("board", boards[0] if len(boards) == 1 else None)
    if name not in boards:
        raise ValueError(f"'board' must be one of: {', '.join(boards)}")
    return ctx.boards[str(name)], dict(arguments)


def _operate(ctx: RunContext, frame: AgentFrame, board: Board, op: str, arguments: dict[str, Any]) -> ChangeRecord:
    """Post, complete or release (a claim is :func:`_claim`): applied or refused."""
    try:
        return board_change(_outcome(ctx, frame, board, op, arguments))
    except ValueError as exc:  # a refusal like any other (reason `arguments`), and a board_op event
        return _malformed(ctx, frame, board, op, f"{exc}; call {op} again with corrected arguments")


def _outcome(ctx: RunContext, frame: AgentFrame, board: Board, op: str, arguments: dict[str, Any]) -> BoardOutcome:
    agent = frame.name
    if op == BOARD_POST:
        after = arguments.get("after") or []
        if not isinstance(after, list) or not all(isinstance(a, str) for a in after):
            raise ValueError("'after' must be a list of task ids")
        if "payload" not in arguments:
            raise ValueError("'payload' is required")
        return board.post(agent, arguments["payload"], after=after)
    task_id = arguments.get("task_id")
    if not isinstance(task_id, str) or not task_id:
        raise ValueError("'task_id' (the id of the task you hold) is required")
    if op == BOARD_COMPLETE:
        if "result" not in arguments:
            raise ValueError("'result' is required")
        return board.complete(agent, task_id, arguments["result"], veto=_veto(ctx, frame, board, "on_complete"))
    assert op == BOARD_RELEASE
    return board.release(agent, task_id, str(arguments.get("reason") or ""))


def _claim(ctx: RunContext, frame: AgentFrame, board: Board) -> ChangeRecord | None:
    """Claim a task. In a peer team: the work's ending once it has ended; ``None`` while nothing is claimable
    and the work goes on (the caller waits for the board to change)."""
    room = room_of(board)
    if room is not None and room.ended is not None:
        return ChangeRecord(json.dumps(room.ending_for_model(), ensure_ascii=False), True)
    outcome = board.claim(
        frame.name,
        time.monotonic(),
        room=room.claims_left() if room is not None else None,
        veto=_veto(ctx, frame, board, "on_claim"),
    )
    if outcome.applied or room is None or outcome.reason not in ("empty", "limit"):
        return board_change(outcome)
    return None


def _veto(ctx: RunContext, frame: AgentFrame, board: Board, point: str) -> Veto | None:
    """The board's ``hooks.<point>`` as a veto: the first rule whose ``when`` holds refuses, with its text. A
    rule that fails to evaluate is said as a warning and ignored (like a delegation hook that fails)."""
    hooks = board.spec.hooks
    rules = getattr(hooks, point) if hooks is not None else None
    if not rules:
        return None

    def check(task: dict[str, Any], result: Any) -> str | None:
        names = {"agent": frame.name, "task": task, "result": result, "board": board.name, "vars": dict(ctx.vars)}
        for index, rule in enumerate(rules):
            try:
                if rule.when is None or templates.compile_condition(rule.when)(**names):
                    return templates.render(rule.reject, names)
            except Exception as exc:  # a hook that fails is recorded and ignored
                where = f"workspace.entries.{board.name}.hooks.{point}[{index}]"
                ctx.warn(frame, f"{where} failed and was ignored: {type(exc).__name__}: {exc}")
        return None

    return check
