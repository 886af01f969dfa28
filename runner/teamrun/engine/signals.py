"""What running one planned action means for the agent's turn: the signals :func:`next_step` reads.

A limit reached (:class:`~teamrun.engine.limits.ledger.LimitReached`), a refusal that ends the agent's
turns without exhausting a budget (:class:`Refused`), a bail (:class:`Bail`), a handoff (:class:`HandedOff`).
Raised by the actions (:mod:`teamrun.engine.turn.actions`) and the delegator; read by
:func:`teamrun.engine.turn.turn_plan.next_step`.
"""

from __future__ import annotations

from dataclasses import dataclass

from teamrun.engine.limits.ledger import LimitReached
from teamrun.engine.result import DelegationResult

__all__ = ["Bail", "HandedOff", "Refused", "Signal"]


@dataclass(frozen=True)
class Bail:
    """An ``on_complete`` hook bailed: this worker result is the agent's answer."""

    result: DelegationResult


@dataclass(frozen=True)
class HandedOff:
    target: str


@dataclass(frozen=True)
class Refused:
    """A refusal that ends the agent's turns without exhausting a budget (``max_depth``)."""

    limit: LimitReached


Signal = LimitReached | Bail | HandedOff | Refused
