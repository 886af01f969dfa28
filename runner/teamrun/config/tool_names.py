"""Every rule for the names of the functions a model is offered, in one place.

An agent's model sees one flat list of functions: delegation tools
(``ask_<worker>`` or one ``delegate_task``), handoff tools
(``transfer_to_<agent>``) and the team's own tools (python, command, and MCP
servers' tools). Two functions of one name would be ambiguous (providers
reject it, or silently keep one), so a clash is a validation error, found
here both by ``teamrun validate`` and when the engine builds an agent's tool
table. This module imports nothing but the config models and :mod:`teamrun.conventions`
(where the fixed names and prefixes live): ``validate`` uses it.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:  # annotations only: `validate` reads names without building the pydantic models
    from teamrun.config.models import Agent, TeamConfig, ToolDef

from teamrun.conventions import (
    BACKGROUND_TOOLS,
    CANCEL_TASK,
    CHECK_TASKS,
    DELEGATE_TASK,
    WAIT_FOR,
    delegation_tool_name,
    handoff_tool_name,
)

FUNCTION_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
"""What every provider accepts as a function name (OpenAI's rule is the strictest common one)."""

ToolOrigin = Literal["delegation", "handoff", "tool", "source", "mcp", "background", "workspace", "memory"]
"""``source``: one function of a tool entry that offers several (an MCP server), named by its entry;
``mcp``: an MCP server's tool named in the file (``allow``), known before the server starts."""
_NOT_IN_NAME = re.compile(r"[^a-zA-Z0-9_-]")


def background_workers(agent: Agent) -> list[str]:
    """The workers ``agent`` delegates to in the background (``delegation.background``)."""
    workers = agent.delegates_to or []
    setting = agent.delegation.background if agent.delegation is not None else False
    if setting is True:
        return list(workers)
    if isinstance(setting, list):
        return [w for w in workers if w in setting]
    return []


def mcp_prefix(entry: str, definition: ToolDef) -> str:
    """What goes before an MCP server's tool names: the entry's ``prefix``, else ``<entry>_``."""
    return f"{entry}_" if definition.prefix is None else definition.prefix


def mcp_function_name(prefix: str, tool: str) -> str:
    """The function name the model sees for ``tool`` of an MCP server.

    ``prefix + tool`` (the prefix is left out when ``tool`` already starts with it:
    entry ``git`` keeps ``git_status``), with every character a provider rejects
    replaced by ``_``. A name longer than 64 characters is cut, and ends with a
    hash of the full name so that two long names stay distinct.
    """
    joined = tool if tool.startswith(prefix) else prefix + tool
    name = _NOT_IN_NAME.sub("_", joined) or "_"
    if len(name) > 64:
        digest = hashlib.sha256(joined.encode()).hexdigest()[:8]
        name = f"{name[:55]}_{digest}"
    return name


@dataclass(frozen=True)
class OfferedName:
    """One function name an agent's model is offered, and where it comes from."""

    name: str
    origin: ToolOrigin
    source: str
    """What declared it: the worker, the handoff target, or the tool entry."""


def offered_names(agent: Agent, tools: Mapping[str, ToolDef] | None = None) -> list[OfferedName]:
    """The function names ``agent`` is offered that are known from the file alone, in offer order.

    With ``tools`` (the team's tool entries), an MCP entry stands for the functions
    its ``allow`` list names (without one they are only known once the server runs).
    """
    offered: list[OfferedName] = []
    workers = agent.delegates_to or []
    tool_kind = agent.delegation.tool if agent.delegation is not None else "per_agent"
    if workers and tool_kind == "delegate_task":
        offered.append(OfferedName(DELEGATE_TASK, "delegation", ", ".join(workers)))
    elif workers:
        offered.extend(OfferedName(delegation_tool_name(w), "delegation", w) for w in workers)
    if background_workers(agent):
        offered.extend(OfferedName(name, "background", name) for name in BACKGROUND_TOOLS)
    offered.extend(OfferedName(handoff_tool_name(a), "handoff", a) for a in agent.handoffs or [])
    for entry in agent.tools or []:
        definition = (tools or {}).get(entry)
        if definition is None or definition.mcp is None:
            offered.append(OfferedName(entry, "tool", entry))
            continue
        prefix = mcp_prefix(entry, definition)
        denied = set(definition.deny or [])
        offered.extend(
            OfferedName(mcp_function_name(prefix, tool), "mcp", f"{entry}:{tool}")
            for tool in definition.allow or []
            if tool not in denied
        )
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
    if item.origin == "background":
        return f"the background-task tool '{item.name}'"
    if item.origin == "workspace":
        return f"the workspace tool '{item.name}'"
    if item.origin == "memory":
        return f"the memory tool '{item.name}'"
    if item.origin == "source":
        return f"the function '{item.name}' of the tool entry '{item.source}'"
    if item.origin == "mcp":
        entry, _, tool = item.source.partition(":")
        return f"the tool '{tool}' of MCP server '{entry}'"
    return f"the tool '{item.source}'"


def clash_message(agent: str, first: OfferedName, later: OfferedName) -> str:
    """The message for one clash: both sides named, and how to fix it."""
    return (
        f"agent '{agent}' would be offered two functions named '{first.name}': {describe(first)} and "
        f"{describe(later)}; rename one of them"
    )


def team_clashes(config: TeamConfig) -> dict[str, list[tuple[OfferedName, OfferedName]]]:
    """Clashing names per agent, for agents that have any."""
    found = {name: clashes(offered_names(agent, config.tools)) for name, agent in config.agents.items()}
    return {name: pairs for name, pairs in found.items() if pairs}


__all__ = [
    "BACKGROUND_TOOLS",
    "CANCEL_TASK",
    "CHECK_TASKS",
    "DELEGATE_TASK",
    "FUNCTION_NAME",
    "WAIT_FOR",
    "OfferedName",
    "background_workers",
    "clash_message",
    "clashes",
    "delegation_tool_name",
    "describe",
    "handoff_tool_name",
    "mcp_function_name",
    "mcp_prefix",
    "offered_names",
    "team_clashes",
]
