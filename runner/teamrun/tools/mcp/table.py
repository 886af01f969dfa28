"""Turning an agent's tool entries into the functions its model is offered (sources expanded).

The engine's hooks into MCP are these three small functions: :func:`tools_for_run`
(each run gets unstarted copies of the team's tool sources), :func:`expand_tools`
(an agent's entries become functions before its first model call, starting the
sources it declares, concurrently) and :func:`close_sources` (at the end of the run,
whatever happened).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping, Sequence

from teamrun.errors import UserError
from teamrun.tools.base import Tool, ToolSource

__all__ = ["approvable_names", "close_sources", "expand_tools", "tools_for_run"]


def tools_for_run(tools: Mapping[str, Tool | ToolSource]) -> dict[str, Tool | ToolSource]:
    """The tool table of one run: sources that can be copied are replaced by unstarted copies."""
    fresh: dict[str, Tool | ToolSource] = {}
    for name, entry in tools.items():
        copy = getattr(entry, "fresh", None)
        fresh[name] = copy() if isinstance(entry, ToolSource) and callable(copy) else entry
    return fresh


async def expand_tools(
    tools: Mapping[str, Tool | ToolSource],
    names: Sequence[str],
    *,
    agent: str,
    taken: Iterable[str] = (),
) -> dict[str, Tool]:
    """The functions of ``agent``'s tool entries ``names``, by the name the model sees.

    Sources are started (concurrently) if they are not yet. ``taken`` are the names the agent
    already has (delegation and handoff tools); a function that would reuse one of them, or
    another function's name, is a :class:`UserError` naming both sides.
    """
    sources = [tools[name] for name in names if isinstance(tools[name], ToolSource)]
    listed = await asyncio.gather(*(source.tools() for source in sources))  # type: ignore[union-attr]
    functions_of = {id(source): functions for source, functions in zip(sources, listed, strict=True)}
    owner = {name: "a delegation or handoff tool" for name in taken}
    expanded: dict[str, Tool] = {}
    for name in names:
        entry = tools[name]
        functions = functions_of[id(entry)] if isinstance(entry, ToolSource) else [entry]
        for function in functions:
            mine = f"tool entry '{name}'" if function.name == name else f"'{function.name}' of tool entry '{name}'"
            if function.name in owner:
                raise UserError(
                    f"agent '{agent}' would be offered two functions named '{function.name}': "
                    f"{owner[function.name]} and {mine}; rename one (for an MCP server: set `prefix`, "
                    "or leave the tool out with `allow`/`deny`)"
                )
            owner[function.name] = mine
            expanded[function.name] = function
    return expanded


async def close_sources(tools: Mapping[str, Tool | ToolSource]) -> None:
    """Stop every source of a run's tool table (never-started ones cost nothing)."""
    sources = [entry for entry in tools.values() if isinstance(entry, ToolSource)]
    if sources:
        await asyncio.gather(*(source.aclose() for source in sources), return_exceptions=True)


def approvable_names(tools: Mapping[str, Tool | ToolSource]) -> list[str]:
    """Function names ``--approve`` may list: the tool entries, plus MCP tools the file names.

    An MCP tool is known before its server starts when ``allow`` or a ``require_approval``
    list names it; its function name follows the entry's prefix rule.
    """
    from teamrun.config.tool_names import mcp_function_name
    from teamrun.tools.mcp.source import McpToolSource

    names = list(tools)
    for entry in tools.values():
        if isinstance(entry, McpToolSource):
            approval = entry.definition.require_approval
            named = [*(entry.definition.allow or []), *(approval if isinstance(approval, list) else [])]
            names.extend(mcp_function_name(entry.prefix, tool) for tool in named)
    return names
