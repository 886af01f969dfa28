"""``teamrun validate --import-check`` for MCP servers: start each one and check the names the file uses.

Every name in ``allow``, ``deny`` and a ``require_approval`` list must be a tool the
server offers (a misspelt name in ``require_approval`` would silently skip the
approval it was meant to ask for). A server that cannot start is reported at its
``mcp:`` key, with the tail of its stderr.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from teamrun.config.diagnostics import Diagnostic, JsonPath, did_you_mean
from teamrun.errors import TeamrunError

__all__ = ["check_mcp_servers"]


def check_mcp_servers(result: Any) -> list[Diagnostic]:
    """Diagnostics for the MCP servers of one checked file (a :class:`~teamrun.config.loader.CheckResult`)."""
    tools = result.data.get("tools") if isinstance(result.data, dict) else None
    if not result.ok or not isinstance(tools, dict):
        return []  # an invalid file: its own errors come first
    entries = {name: spec for name, spec in tools.items() if isinstance(spec, dict) and "mcp" in spec}
    if not entries:
        return []
    return asyncio.run(_check(result, entries))


async def _check(result: Any, entries: dict[str, dict[str, Any]]) -> list[Diagnostic]:
    from teamrun.config.models import ToolDef
    from teamrun.tools.mcp.source import McpToolSource

    base_dir = Path(result.file).resolve().parent
    found: list[Diagnostic] = []

    def problem(path: JsonPath, message: str) -> None:
        mark = result.source_map.value(path)
        found.append(Diagnostic(result.file, mark.line, mark.column, message, rule="import"))

    for name, spec in entries.items():
        source = McpToolSource(name, ToolDef.model_validate(spec), base_dir=base_dir, secrets=result.secrets)
        try:
            await source.tools()
        except TeamrunError as exc:
            if not source.listing:
                problem(("tools", name, "mcp"), str(exc))
                continue
        finally:
            await source.aclose()
        offered = [tool.name for tool in source.listing]
        for key in ("allow", "deny", "require_approval"):
            names = spec.get(key)
            for index, tool in enumerate(names if isinstance(names, list) else []):
                if tool not in offered:
                    problem(
                        ("tools", name, key, index),
                        f"tools.{name}.{key}[{index}]: the MCP server offers no tool '{tool}'"
                        f"{did_you_mean(tool, offered) or ''} (it offers: {', '.join(offered) or 'none'})",
                    )
    return found
