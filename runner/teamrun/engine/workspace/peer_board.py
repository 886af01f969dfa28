"""A run's board with, in a peer team, the peers around it: the one module that knows both.

:class:`~teamrun.engine.workspace.board.Board` is the tasks and their rules;
:class:`~teamrun.engine.workspace.room.PeerRoom` the peers that work on a board and when their work ends (it reads
the board). A claim in a peer team
needs both — it waits in the room while the board has nothing to claim — so the run's boards are
:class:`PeerBoard`\\ s (:func:`teamrun.engine.peers.driver.open_boards`) and neither of the two imports the other's
user.
"""

from __future__ import annotations

from dataclasses import dataclass

from teamrun.engine.workspace.board import Board
from teamrun.engine.workspace.room import PeerRoom

__all__ = ["PeerBoard", "room_of"]


@dataclass
class PeerBoard(Board):
    """A board of the run; ``room``: its peers, in a peer team (the peer driver sets it as the peers start)."""

    room: PeerRoom | None = None


def room_of(board: Board) -> PeerRoom | None:
    """The peers around ``board``, if it is a peer team's."""
    return board.room if isinstance(board, PeerBoard) else None
