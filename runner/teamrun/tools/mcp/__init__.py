"""MCP servers as tool entries: their tools become ordinary tools, called through ``invoke_tool``.

The ``mcp`` SDK (the official Python SDK) is imported only when a server is started.
"""

from teamrun.tools.mcp.content import result_text
from teamrun.tools.mcp.source import START_TIMEOUT_S, McpServerTool, McpToolSource

__all__ = [
    "START_TIMEOUT_S",
    "McpServerTool",
    "McpToolSource",
    "result_text",
]
