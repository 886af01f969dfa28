"""The peers around a board: who is alive, who waits for a task, and when the board's work has ended.

A peer that finds nothing to claim waits (:meth:`PeerRoom.changed`) until the board changes: a task is
posted, completed or released, a lease expires, a peer ends. After each change :meth:`PeerRoom.settle`
decides whether the work has ended, once and for good (the board is then closed):

- ``done``: no open task and no live lease (global termination);
- ``limit``: ``limits.max_tasks`` tasks are done, no lease is live, and open tasks are left;
- ``deadlock``: no lease is live, every peer still running waits, and no open task can be claimed
  (each waits on tasks that can never be done).

No I/O, no events and no change of the board here: the changes (a claim, a lease taken back) go through the one
change path (:mod:`teamrun.engine.workspace.changes`), made by :mod:`teamrun.engine.workspace.board_calls` and
the peer driver.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import Any, Literal

from teamrun.engine.workspace.board import Board

__all__ = ["Ending", "PeerRoom"]

Ending = Literal["done", "limit", "deadlock"]


class PeerRoom:
    """The peers of one board, and the ending of their work."""

    def __init__(self, board: Board, peers: Iterable[str], max_tasks: int | None) -> None:
        self.board = board
        self.alive: set[str] = set(peers)
        self.waiting: set[str] = set()
        self.max_tasks = max_tasks
        self.ended: Ending | None = None
        self._tick = asyncio.Event()

    def claims_left(self) -> int | None:
        """Claims ``limits.max_tasks`` still allows (done and claimed tasks count); ``None``: no limit."""
        if self.max_tasks is None:
            return None
        counts = self.board.counts()
        return self.max_tasks - counts["done"] - counts["claimed"]

    def notify(self) -> None:
        """Wake every waiting peer: the board changed."""
        self._tick.set()
        self._tick = asyncio.Event()

    async def changed(self) -> None:
        """Wait for the next change of the board."""
        await self._tick.wait()

    def settle(self, *, changed: bool = False) -> Ending | None:
        """Decide whether the work has ended (see the module); an ending closes the board. Waiting peers are
        woken when the board ``changed`` or the work has just ended."""
        if self.ended is None:
            self.ended = self._verdict()
            if self.ended is not None:
                self.board.closed = True
                changed = True
        if changed:
            self.notify()
        return self.ended

    def _verdict(self) -> Ending | None:
        counts = self.board.counts()
        if counts["claimed"]:
            return None
        if not counts["open"]:
            return "done"
        if self.max_tasks is not None and counts["done"] >= self.max_tasks:
            return "limit"
        if self.alive and self.alive <= self.waiting and not self.board.claimable():
            return "deadlock"
        return None

    def due(self, now: float) -> list[dict[str, Any]]:
        """The claimed tasks whose lease ran out by ``now`` (the peer driver takes them back)."""
        due = []
        for task_id, deadline in list(self.board.deadlines.items()):
            task = self.board.task(task_id) or {}
            if task.get("status") != "claimed":  # ended another way meanwhile
                self.board.deadlines.pop(task_id, None)
            elif deadline <= now:
                due.append(task)
        return due

    def leave(self, peer: str) -> dict[str, Any] | None:
        """``peer`` ended (answered or failed): it leaves; the task it held, which the peer driver takes back."""
        self.alive.discard(peer)
        self.waiting.discard(peer)
        return self.board.held_by(peer)

    def ending_for_model(self) -> dict[str, Any]:
        """What a peer's ``board_claim`` answers once the work has ended."""
        counts = self.board.counts()
        said = {
            "done": "the board is empty and no lease is live: the work is done",
            "limit": f"limits.max_tasks ({self.max_tasks}) tasks are done: the run stops here",
            "deadlock": "every peer waits and no open task can be claimed (each waits on tasks that cannot be done)",
        }
        assert self.ended is not None
        status = {"done": "done", "limit": "stopped", "deadlock": "deadlock"}[self.ended]
        return {
            "status": status,
            "board": self.board.name,
            "counts": counts,
            "message": f"{said[self.ended]}; answer now with a short summary of what you did",
        }
