"""Build the tools a team file declares."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from teamrun.config.models import ToolDef
from teamrun.errors import UserError
from teamrun.tools.base import Tool, ToolSource
from teamrun.tools.command_tool import CommandTool
from teamrun.tools.python_tool import PythonTool

__all__ = ["build_mcp_source", "build_tool", "build_tools"]


def build_tools(
    definitions: Mapping[str, ToolDef], *, base_dir: Path, secrets: Iterable[str] = (), mcp_tape: Any = None
) -> dict[str, Tool | ToolSource]:
    """Every declared tool entry, by name. Python tools are imported now, with ``base_dir`` on sys.path.

    An MCP server entry becomes a :class:`ToolSource` (not started: that happens on first use);
    ``secrets`` are masked in what it reports; ``mcp_tape`` (a
    :class:`teamrun.tools.mcp.tape.McpTape`) records or replays its results.
    Raises one :class:`UserError` listing every tool that could not be built.
    """
    tools: dict[str, Tool | ToolSource] = {}
    problems: list[str] = []
    for name, definition in definitions.items():
        try:
            if definition.mcp is not None:
                tools[name] = build_mcp_source(name, definition, base_dir=base_dir, secrets=secrets, tape=mcp_tape)
            else:
                tools[name] = build_tool(name, definition, base_dir=base_dir)
        except UserError as exc:
            problems.append(str(exc))
    if len(problems) == 1:
        raise UserError(problems[0])
    if problems:
        raise UserError(f"{len(problems)} tools could not be built:\n" + "\n".join(problems))
    return tools


def build_mcp_source(
    name: str, definition: ToolDef, *, base_dir: Path, secrets: Iterable[str] = (), tape: Any = None
) -> ToolSource:
    """An MCP server entry: needs exactly one of ``mcp.command`` (stdio) and ``mcp.url`` (HTTP).

    A stdio server whose program does not exist is refused (:class:`UserError`), unless ``tape``
    replays the entry (then the server never starts).
    """
    from teamrun.tools.mcp.source import McpToolSource

    server = definition.mcp
    if definition.python is not None or definition.command is not None or server is None:
        raise UserError(f"tool {name!r}: set one of `python`, `command` or `mcp`")
    if (server.command is None) == (server.url is None):
        raise UserError(f"tool {name!r}: an MCP server needs `mcp.command` (stdio) or `mcp.url` (HTTP), not both")
    if server.command is not None and not (tape is not None and tape.replays(name)):
        from teamrun.config.programs import missing_program

        cwd = base_dir / server.cwd if server.cwd is not None else None
        why = missing_program(server.command, env=server.env, cwd=cwd)
        if why is not None:  # a setup problem: refused before the run, not a failed tool call in it
            raise UserError(f"tool {name!r} (tools.{name}.mcp.command): its MCP server cannot start: {why}")
    return McpToolSource(name, definition, base_dir=base_dir, secrets=secrets, tape=tape)


def build_tool(name: str, definition: ToolDef, *, base_dir: Path) -> Tool:
    """One tool: a :class:`PythonTool` for ``python:``, a :class:`CommandTool` for ``command:``, a
    :class:`~teamrun.tools.people.PersonTool` for ``person:``."""
    if definition.person is not None:
        from teamrun.tools.people import PersonTool

        return PersonTool(name, definition)
    if definition.python is not None and definition.command is not None:
        raise UserError(f"tool {name!r}: set either `python` or `command`, not both")
    if definition.python is not None:
        return PythonTool.from_definition(name, definition, base_dir=base_dir)
    if definition.command is not None:
        return CommandTool.from_definition(name, definition, base_dir=base_dir)
    raise UserError(
        f"tool {name!r}: set `python: module:function` or `command: [program, ...]` "
        "(or `mcp: {...}` for an MCP server)"
    )
