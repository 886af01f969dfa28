"""Run a peer team: every peer works around the board until the work ends by itself or a bound stops it.

The peers' top frame (``peers``, depth 0) holds the run's limits, the way a workflow's does. The board
starts with its ``initial:`` payloads and the run's input as tasks (a resumed run keeps the board it
restored from the journal). Each peer is one worker run through the
:class:`~teamrun.engine.delegation.delegator.Delegator` (the same slot, budgets, hooks, journal key,
events and cancellation as a delegation), all at once; its board tools claim, post, complete and release
(:mod:`teamrun.engine.workspace.board_calls`). A peer that ends — answered, failed, timed out, cancelled —
loses its lease: the task goes back to the board for another peer (a peer stopped with the whole run — Ctrl-C,
a cancel, a person to wait for — keeps it: a resume continues the peer holding its task). A watcher returns
tasks whose lease expired. Every board change the driver makes (the starting tasks, a lease taken back) goes
through the one change path (:func:`~teamrun.engine.workspace.changes.apply_change`): journaled, so a resumed
run restores it and never hands out its version again. The run ends:

- ``done`` when the board is empty and no lease is live (every peer is told so and answers);
- ``budget_exhausted`` (exit 3) when ``limits.max_tasks`` tasks are done with tasks left;
- ``failed`` with ``stopped_by: deadlock`` when every peer waits and no open task can be claimed;
- ``failed`` when every peer ended with tasks left on the board.

The answer is the result of the task the run's input was posted as (when done), then every task done, with
its result, and what was left.
"""

from __future__ import annotations

import asyncio
import functools
import json
import time
from typing import Any

from teamrun.config.models import Delegation
from teamrun.engine.delegation.delegator import Delegator
from teamrun.engine.delegation.records import RunAgent, WorkerOutcome
from teamrun.engine.delegation.tools import DelegationRequest
from teamrun.engine.durability.journal import tool_hash
from teamrun.engine.runtime import AgentFrame, RunContext, run_all
from teamrun.engine.workspace.board import Board, board_entries
from teamrun.engine.workspace.board_calls import board_change, board_users
from teamrun.engine.workspace.changes import ChangeRecord, ChangeSite, apply_change
from teamrun.engine.workspace.peer_board import PeerBoard
from teamrun.engine.workspace.room import PeerRoom
from teamrun.errors import RunError
from teamrun.llm.types import Usage

__all__ = ["PEERS_FRAME", "PeersEnded", "open_boards", "run_peers", "stopped_summary"]

PEERS_FRAME = "peers"
"""The name of a peer team's top frame (the place a supervisor has in a team)."""
_INPUT = "input"
"""Who a board names as the poster of the run's input; ``initial:`` tasks are posted by ``initial``."""
_INITIAL = "initial"


class PeersEnded(RunError):
    """Every peer ended while tasks were left on the board, or the peers deadlocked."""


def open_boards(ctx: RunContext) -> None:
    """The run's boards over its workspace (restored from the journal on resume), leases armed from now."""
    workspace = ctx.workspace
    if workspace is None:
        return
    for name in board_entries(workspace.spec.entries):
        board = PeerBoard(workspace, name, board_users(ctx.config, name))
        board.rearm(time.monotonic())
        ctx.boards[name] = board


def _peer_task(board: Board) -> str:
    return (
        f"You are one of several peers working on the board '{board.name}'. Repeat: call board_claim to take a "
        "task, do what it asks, post follow-up tasks with board_post when the work needs more, then call "
        "board_complete with your result (or board_release if you cannot do it). When board_claim answers "
        "status done, stopped or deadlock, stop and answer with a short summary of the tasks you completed."
    )


def _site(frame: AgentFrame, board: Board, index: int, position: int, *asked: object) -> ChangeSite:
    """Where the driver's change is journaled: the board's place under the peers' frame; ``index`` 0 for the
    starting tasks (``position``: which), else the claim of task number ``position`` that ended (a task's n-th
    claim ends once): the same place in every attempt, so a resume answers it from the journal."""
    return ChangeSite(f"{frame.key}#{board.name}", index, position, tool_hash("board_driver", json.dumps(asked)), False)


async def _seed(ctx: RunContext, frame: AgentFrame, board: Board, input: str) -> None:
    """Post the ``initial:`` payloads and the run's input (a board kept from the thread's last turn is kept; a
    resumed run's starting tasks are answered from the journal)."""
    kept = bool(board.tasks)
    seeds = [(_INITIAL, p) for p in board.spec.initial] if isinstance(board.spec.initial, list) else []
    if input.strip():
        seeds.append((_INPUT, _input_payload(board, input)))
    for position, (poster, payload) in enumerate(seeds):
        post = functools.partial(_post, board, poster, payload, kept)
        made = await apply_change(ctx, frame, _site(frame, board, 0, position, poster, payload), post)
        if made is None:  # kept from the thread's last turn: its tasks stand
            return
        kept = False  # this run's own starting tasks: the ones not journaled yet are posted
        if not made.record.ok:
            raise PeersEnded(f"the board '{board.name}' refused a starting task: {made.record.content}")


def _post(board: Board, poster: str, payload: Any, kept: bool) -> ChangeRecord | None:
    """A starting task posted, or ``None`` on a board ``kept`` from the thread's last turn."""
    return None if kept else board_change(board.post(poster, payload, by_engine=True))


async def _take_back(ctx: RunContext, frame: AgentFrame, board: Board, task: dict[str, Any], why: str) -> bool:
    """Return ``task`` (claimed) to the board: its lease expired, or its claimant ended. Whether it changed."""
    task_id, holder, claims = str(task["id"]), str(task.get("claimed_by") or ""), int(task.get("claims") or 0)
    position = next(i for i, t in enumerate(board.tasks) if t.get("id") == task_id)

    def release() -> ChangeRecord:
        return board_change(board.release(holder, task_id, why, op="expire"))

    made = await apply_change(ctx, frame, _site(frame, board, claims, position, task_id, holder, claims), release)
    return made is not None and not made.replayed and made.record.ok


def _input_payload(board: Board, input: str) -> Any:
    """The run's input as a payload: the text itself if the board's schema takes it, else the JSON it holds, else
    ``{"task": text}``."""
    workspace = board.workspace
    if workspace.schema_problem(board.name, input) is None:
        return input
    try:
        parsed = json.loads(input)
    except ValueError:
        parsed = None
    if parsed is not None and workspace.schema_problem(board.name, parsed) is None:
        return parsed
    return {"task": input}


async def run_peers(ctx: RunContext, frame: AgentFrame, input: str, run_agent: RunAgent) -> WorkerOutcome:
    """Run the team's peers around its board on ``input``; see the module for how it ends."""
    peers = list(ctx.config.peers or ())
    board = ctx.boards[board_entries(ctx.config.workspace.entries)[0]] if ctx.config.workspace else None
    if board is None:
        raise PeersEnded("a peer team needs a board: a workspace entry with `kind: board`")
    limits = ctx.config.limits
    room = PeerRoom(board, peers, limits.max_tasks if limits is not None else None)
    assert isinstance(board, PeerBoard)  # open_boards made it
    board.room = room
    delegator = Delegator(ctx, frame, run_agent, Delegation(max_concurrency=len(peers)))
    with frame.agent_span(ctx, model=PEERS_FRAME, task=input) as span:
        await _seed(ctx, frame, board, input)
        room.settle(changed=True)

        async def peer(name: str) -> None:
            request = DelegationRequest([name], _peer_task(board), step=f"peer {name}")
            try:
                await delegator.run_worker(name, request, f"{frame.key}/{name}")
            except asyncio.CancelledError:  # the run stops (Ctrl-C, cancel, a person to wait for): the peer keeps
                raise  # its lease, and a resume continues it holding its task
            except BaseException:
                await _leave(ctx, frame, room, name)
                raise
            await _leave(ctx, frame, room, name)

        watcher = asyncio.create_task(_expire_leases(ctx, frame, room), name="teamrun:board-leases")
        try:
            await run_all(peer(name) for name in peers)
        finally:
            watcher.cancel()
            await asyncio.gather(watcher, return_exceptions=True)
        ending = room.ended
        board.closed = True
        text = _summary(board, ending)
        status, stopped_by = "ok", None
        if ending == "limit":
            status = "budget_exhausted"
            stopped_by = f"limits.max_tasks ({room.max_tasks}): {board.counts()['open']} task(s) left on the board"
        elif ending == "deadlock":
            status, stopped_by = "deadlock", "deadlock: every peer waits and no open task can be claimed"
        elif ending is None:
            status = "stranded"
            stopped_by = "every peer ended with tasks left on the board"
        span.end.update(status=status if status in ("ok", "budget_exhausted") else "error", stopped_by=stopped_by)
    return WorkerOutcome(text, status, Usage(), 0.0, (), stopped_by)


async def _leave(ctx: RunContext, frame: AgentFrame, room: PeerRoom, peer: str) -> None:
    """``peer`` ended (answered or failed): it leaves, and the task it held goes back to the board."""
    held = room.leave(peer)
    if held is not None:
        await _take_back(ctx, frame, room.board, held, f"{peer} ended")
    room.settle(changed=True)


async def _expire_leases(ctx: RunContext, frame: AgentFrame, room: PeerRoom) -> None:
    """Return each task whose lease ran out, as its deadline passes."""
    while room.ended is None:
        deadlines = room.board.deadlines.values()
        wait = max(0.0, min(deadlines) - time.monotonic()) if deadlines else None
        tick = asyncio.ensure_future(room.changed())
        try:
            await asyncio.wait({tick}, timeout=wait)
        finally:
            tick.cancel()
        due = room.due(time.monotonic())
        taken = False
        for task in due:  # each made in turn (a take-back waits for the journal): one another took meanwhile
            if task.get("status") == "claimed":  # is no longer due
                taken = await _take_back(ctx, frame, room.board, task, "its lease expired") or taken
        if taken:
            room.settle(changed=True)


def stopped_summary(ctx: RunContext, headline: str) -> str:
    """A peer team stopped from outside (Ctrl-C, cancel, the run's timeout): the tasks done so far."""
    for board in ctx.boards.values():
        done = [t for t in board.tasks if t.get("status") == "done"]
        if done:
            lines = [f"No final answer: {headline}. Tasks done on the board '{board.name}' so far:"]
            lines += [f"- {t['id']} ({t.get('completed_by')}): {t.get('result')}" for t in done]
            return "\n".join(lines)
    return ""


def _summary(board: Board, ending: str | None) -> str:
    counts = board.counts()
    head = {
        "done": f"The board '{board.name}' is empty: {counts['done']} task(s) done",
        "limit": f"Stopped at limits.max_tasks: {counts['done']} task(s) done, {counts['open']} left",
        "deadlock": f"Deadlock: {counts['done']} task(s) done, {counts['open']} open task(s) can never be claimed",
    }.get(ending or "", f"Every peer ended: {counts['done']} task(s) done, {counts['open'] + counts['claimed']} left")
    if counts["failed"]:
        head += f", {counts['failed']} failed"
    answer = next((t for t in board.tasks if t.get("posted_by") == _INPUT and t.get("status") == "done"), None)
    lines = [str(answer.get("result")), ""] if answer is not None else []  # the run's input answered first
    lines.append(head + ".")
    for task in board.tasks:
        if task.get("status") == "done":
            lines.append(f"- {task['id']} ({task.get('completed_by')}): {task.get('result')}")
        elif ending != "done":
            lines.append(f"- {task['id']}: {task.get('status')}")
    return "\n".join(lines)
