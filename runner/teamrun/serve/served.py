"""A team as the server serves it: the team and the redactor its answers are masked with."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from teamrun.secrets import Redactor

if TYPE_CHECKING:
    from teamrun.engine.team import Team

__all__ = ["Served"]


@dataclass
class Served:
    """One served team (addressed by ``team.name``)."""

    team: Team
    redactor: Redactor
    """The team's secrets and the server's tokens: everything said of its runs is masked with it."""
