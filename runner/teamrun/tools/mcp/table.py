"""The MCP tool names ``--approve`` may use, known before any server runs."""

from __future__ import annotations

from collections.abc import Mapping

from teamrun.tools.base import Tool, ToolSource

__all__ = ["approvable_names"]


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
