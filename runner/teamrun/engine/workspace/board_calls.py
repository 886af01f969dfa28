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
from collections.abc import Mapping
from typing import Any

from teamrun.config import templates
from teamrun.config.models import TeamConfig
from teamrun.conventions import BOARD_CLAIM, BOARD_COMPLETE, BOARD_POST, BOARD_RELEASE
from teamrun.engine.durability.journal import EntryKey, JournalEntry, tool_hash
from teamrun.engine.runtime import AgentFrame, RunContext
from teamrun.engine.workspace.board import Board, BoardOp, BoardOutcome, Veto, board_entries
from teamrun.engine.workspace.room import PeerRoom
from teamrun.llm.types import ToolCall, ToolSchema, function_tool, parse_arguments

__all__ = ["board_tools", "board_users", "emit_board_op", "run_board_call", "usable_boards"]


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


def emit_board_op(ctx: RunContext, frame: AgentFrame, outcome: BoardOutcome, span_id: str | None = None) -> None:
    frame.emit(ctx, "board_op", span_id=span_id, **outcome.event_fields())


async def run_board_call(ctx: RunContext, frame: AgentFrame, call: ToolCall, turn: int, position: int) -> str:
    """The result text of board call ``call`` (the ``position``-th of the reply of model call ``turn``)."""
    with frame.span(ctx, "tool", tool=call.name) as span:
        span.end["tool"] = call.name
        content, ok = await _run(ctx, frame, call, turn, position, span.id)
        span.end.update(tool=call.name, status="ok" if ok else "error", chars=len(content))
    return content


async def _run(
    ctx: RunContext, frame: AgentFrame, call: ToolCall, turn: int, position: int, span_id: str
) -> tuple[str, bool]:
    journal = ctx.journal
    key = EntryKey(frame.key, turn, "tool", position)
    fingerprint = tool_hash(call.name, call.arguments)
    if journal is not None:
        replayed = journal.replay.tool(frame.key, turn, position, fingerprint)
        if replayed is not None:
            earlier = journal.replay.entries[key].payload.get("workspace")
            if isinstance(earlier, dict) and earlier.get("event"):
                frame.emit(ctx, "board_op", span_id=span_id, **{**earlier["event"], "replayed": True})
            return replayed.content, replayed.ok
    payload: dict[str, Any] = {}
    board: Board | None = None
    try:
        board, arguments = _target(ctx, frame, parse_arguments(call.arguments))
        shown, outcome = await _apply(ctx, frame, board, call.name, arguments, span_id)
    except ValueError as exc:  # a refusal like any other (reason `arguments`), and a board_op event
        shown, outcome = _malformed(
            ctx, frame, board, call.name, f"{exc}; call {call.name} again with corrected arguments"
        )
        if outcome is not None:
            emit_board_op(ctx, frame, outcome, span_id)
    if outcome is not None:
        payload = {"event": outcome.event_fields(), "state": outcome.state}
    content, ok = json.dumps(shown, ensure_ascii=False), outcome is None or outcome.applied
    if outcome is None and shown.get("status") == "refused":
        ok = False
    if journal is not None:  # queued in the step that applied the operation: the journal keeps their order
        record: dict[str, Any] = {"ok": ok, "content": content, "error": None if ok else content}
        if payload:
            record["workspace"] = payload
        journal.write(JournalEntry(key, fingerprint, record))
    return content, ok


_OPS: dict[str, BoardOp] = {
    BOARD_POST: "post",
    BOARD_CLAIM: "claim",
    BOARD_COMPLETE: "complete",
    BOARD_RELEASE: "release",
}


def _malformed(
    ctx: RunContext, frame: AgentFrame, board: Board | None, tool: str, message: str
) -> tuple[dict[str, Any], BoardOutcome | None]:
    """The refusal of a board call whose arguments could not be read: on the board it named, else the agent's
    only one (an event there); with no board to name, a refusal without an event."""
    if board is None:
        boards = usable_boards(ctx.config, frame.name)
        board = ctx.boards.get(boards[0]) if len(boards) == 1 else None
    if board is None:
        return {"status": "refused", "reason": "arguments", "message": message}, None
    outcome = board.refuse(_OPS.get(tool, "post"), frame.name, None, "arguments", message)
    return outcome.for_model(), outcome


def _target(ctx: RunContext, frame: AgentFrame, arguments: Mapping[str, Any]) -> tuple[Board, dict[str, Any]]:
    boards = usable_boards(ctx.config, frame.name)
    if not boards:
        raise ValueError(f"{frame.name} may use no board")
    name = arguments.get("board", boards[0] if len(boards) == 1 else None)
    if name not in boards:
        raise ValueError(f"'board' must be one of: {', '.join(boards)}")
    return ctx.boards[str(name)], dict(arguments)


async def _apply(
    ctx: RunContext, frame: AgentFrame, board: Board, op: str, arguments: dict[str, Any], span_id: str
) -> tuple[dict[str, Any], BoardOutcome | None]:
    """What the model sees, and the operation applied or refused (``None``: the work has ended)."""
    agent, room = frame.name, board.room
    if op == BOARD_CLAIM:
        return await _claim(ctx, frame, board, span_id)
    if op == BOARD_POST:
        after = arguments.get("after") or []
        if not isinstance(after, list) or not all(isinstance(a, str) for a in after):
            raise ValueError("'after' must be a list of task ids")
        if "payload" not in arguments:
            raise ValueError("'payload' is required")
        outcome = board.post(agent, arguments["payload"], after=after)
    else:
        task_id = arguments.get("task_id")
        if not isinstance(task_id, str) or not task_id:
            raise ValueError("'task_id' (the id of the task you hold) is required")
        if op == BOARD_COMPLETE:
            if "result" not in arguments:
                raise ValueError("'result' is required")
            outcome = board.complete(agent, task_id, arguments["result"], veto=_veto(ctx, frame, board, "on_complete"))
        else:
            assert op == BOARD_RELEASE
            outcome = board.release(agent, task_id, str(arguments.get("reason") or ""))
    emit_board_op(ctx, frame, outcome, span_id)
    if room is not None and outcome.applied:
        room.settle(changed=True)
    return outcome.for_model(), outcome


async def _claim(
    ctx: RunContext, frame: AgentFrame, board: Board, span_id: str
) -> tuple[dict[str, Any], BoardOutcome | None]:
    """Claim a task; in a peer team, wait while nothing is claimable and the work has not ended."""
    room: PeerRoom | None = board.room
    agent = frame.name
    while True:
        if room is not None and room.ended is not None:
            return room.ending_for_model(), None
        outcome = board.claim(
            agent,
            time.monotonic(),
            room=room.room() if room is not None else None,
            veto=_veto(ctx, frame, board, "on_claim"),
        )
        if outcome.applied or room is None or outcome.reason not in ("empty", "limit"):
            emit_board_op(ctx, frame, outcome, span_id)
            if room is not None and outcome.applied:
                room.settle(changed=True)
            return outcome.for_model(), outcome
        room.waiting.add(agent)
        try:
            if room.settle() is None:
                async with ctx.activity.waiting():  # the others work meanwhile (or wait for a person)
                    await room.changed()
        finally:
            room.waiting.discard(agent)


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
