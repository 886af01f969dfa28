"""Every rule for the names of the functions a model is offered, in one place.

An agent's model sees one flat list of functions: delegation tools
(``ask_<worker>`` or one ``delegate_task``), handoff tools
(``transfer_to_<agent>``) and the team's own tools (python, command, and MCP
servers' tools). Two functions of one name would be ambiguous (providers
reject it, or silently keep one), so a clash is a validation error, found
here both by ``teamrun validate`` and when the engine builds an agent's tool
table. This module imports nothing but the config models: ``validate`` uses it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from teamrun.config.models import Agent, TeamConfig

DELEGATE_TASK = "delegate_task"
"""The one delegation tool of ``delegation.tool: delegate_task``."""

FUNCTION_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
"""What every provider accepts as a function name (OpenAI's rule is the strictest common one)."""

ToolOrigin = Literal["delegation", "handoff", "tool", "source"]
"""``source``: one function of a tool entry that offers several (an MCP server); ``source`` is the entry."""


def delegation_tool_name(worker: str) -> str:
    """The per-agent delegation tool for ``worker``."""
    return f"ask_{worker}"


def handoff_tool_name(agent: str) -> str:
    """The tool that hands the conversation to ``agent``."""
    return f"transfer_to_{agent}"


@dataclass(frozen=True)
class OfferedName:
    """One function name an agent's model is offered, and where it comes from."""

    name: str
    origin: ToolOrigin
    source: str
    """What declared it: the worker, the handoff target, or the tool entry."""


def offered_names(agent: Agent) -> list[OfferedName]:
    """The function names ``agent`` is offered that are known from the file alone, in offer order."""
    offered: list[OfferedName] = []
    workers = agent.delegates_to or []
    tool_kind = agent.delegation.tool if agent.delegation is not None else "per_agent"
    if workers and tool_kind == "delegate_task":
        offered.append(OfferedName(DELEGATE_TASK, "delegation", ", ".join(workers)))
    elif workers:
        offered.extend(OfferedName(delegation_tool_name(w), "delegation", w) for w in workers)
    offered.extend(OfferedName(handoff_tool_name(a), "handoff", a) for a in agent.handoffs or [])
    offered.extend(OfferedName(t, "tool", t) for t in agent.tools or [])
    return offered


def clashes(offered: list[OfferedName]) -> list[tuple[OfferedName, OfferedName]]:
    """Pairs (first, later) of offered functions that share a name."""
    first: dict[str, OfferedName] = {}
    found: list[tuple[OfferedName, OfferedName]] = []
    for item in offered:
        if item.name in first:
            found.append((first[item.name], item))
        else:
            first[item.name] = item
    return found


def describe(item: OfferedName) -> str:
    """How a clash message names one side: ``the delegation tool for worker 'w'``."""
    if item.origin == "delegation":
        return f"the delegation tool for '{item.source}'"
    if item.origin == "handoff":
        return f"the handoff tool for '{item.source}'"
    if item.origin == "source":
        return f"the function '{item.name}' of the tool entry '{item.source}'"
    return f"the tool '{item.source}'"


def clash_message(agent: str, first: OfferedName, later: OfferedName) -> str:
    """The message for one clash: both sides named, and how to fix it."""
    return (f"agent '{agent}' would be offered two functions named '{first.name}': {describe(first)} and "
            f"{describe(later)}; rename one of them")


def team_clashes(config: TeamConfig) -> dict[str, list[tuple[OfferedName, OfferedName]]]:
    """Clashing names per agent, for agents that have any."""
    found = {name: clashes(offered_names(agent)) for name, agent in config.agents.items()}
    return {name: pairs for name, pairs in found.items() if pairs}


__all__ = [
    "DELEGATE_TASK",
    "FUNCTION_NAME",
    "OfferedName",
    "clash_message",
    "clashes",
    "delegation_tool_name",
    "describe",
    "handoff_tool_name",
    "offered_names",
    "team_clashes",
]
