"""An agent's kind, decided once from its config, and which ways of reaching an agent each kind takes.

Two kinds: ``local`` (a model loop here, :class:`~teamrun.engine.turn.agent_loop.AgentLoop`) and ``remote``
(an ``a2a:`` agent spoken to over A2A, :func:`~teamrun.engine.remote.worker.run_remote`). An agent is reached
as the run's ``entry`` agent, by a ``delegation``, a ``handoff``, as a ``peer`` around a board or as a workflow
``step``; :func:`teamrun.engine.turn.agent_loop.run_agent` is the one place a frame is run by its kind, and asks
:func:`admit` first. A remote agent takes a task: it is never handed a conversation (a handoff) and never works
around a board (a peer cannot reach the board from elsewhere). ``teamrun validate`` refuses both; a config built
by hand that gets here anyway is refused by :class:`AgentKindRefused` instead of running a local loop for it.
"""

from __future__ import annotations

from typing import Literal

from teamrun.config.models import Agent, TeamConfig
from teamrun.errors import UserError

__all__ = ["AgentKind", "AgentKindRefused", "Reach", "admit", "kind_of"]

AgentKind = Literal["local", "remote"]
"""``local``: a model loop in this process; ``remote``: an ``a2a:`` agent elsewhere."""
Reach = Literal["entry", "delegation", "handoff", "peer", "step"]
"""How an agent is reached: the run's first agent, a delegated task, a handed-over conversation, a peer around
a board, a workflow step."""

_REFUSED: dict[tuple[AgentKind, Reach], str] = {
    ("remote", "handoff"): (
        "a handoff hands over the conversation, and a remote agent takes a task: use delegates_to instead"
    ),
    ("remote", "peer"): "a peer works around the board, which a remote agent cannot reach: use delegates_to instead",
}


class AgentKindRefused(UserError):
    """An agent reached in a way its kind cannot take (a team file built by hand: ``teamrun validate`` refuses it)."""


def kind_of(agent: Agent) -> AgentKind:
    """The agent's kind: ``remote`` when it is declared with ``a2a:``, else ``local``."""
    return "remote" if agent.a2a is not None else "local"


def admit(config: TeamConfig, name: str, reached: Reach) -> AgentKind:
    """``name``'s kind, when it may be reached this way; else :class:`AgentKindRefused` saying why."""
    kind = kind_of(config.agents[name])
    why = _REFUSED.get((kind, reached))
    if why is not None:
        raise AgentKindRefused(f"agent '{name}' is a remote (a2a:) agent and cannot be reached as a {reached}: {why}")
    return kind
