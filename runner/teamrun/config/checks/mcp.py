"""Semantic checks of MCP server entries: one transport, keys that fit it, and the function names they add."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from teamrun.config.checks.raw import mapping, names
from teamrun.config.checks.tools import working_directory
from teamrun.config.diagnostics import Diagnostic, JsonPath, dotted

if TYPE_CHECKING:
    from teamrun.config.checks.context import CheckContext

__all__ = ["mcp_checks"]


def mcp_checks(checker: CheckContext) -> Iterator[Diagnostic]:
    """MCP server entries: one transport, keys that fit it, and the function names they add."""
    only_mcp = ("allow", "deny", "prefix", "fixed_arguments")
    for name, spec in checker.tools.items():
        path: JsonPath = ("tools", name)
        server = spec.get("mcp")
        if not isinstance(server, dict):
            for key in [k for k in only_mcp if k in spec]:
                yield checker.error(
                    (*path, key), f"{dotted((*path, key))} only applies to MCP servers ('mcp:')", "tool", key=True
                )
            if isinstance(spec.get("require_approval"), list):
                yield checker.error(
                    (*path, "require_approval"),
                    f"{dotted((*path, 'require_approval'))}: a list "
                    "of tool names only applies to MCP servers; use true or false",
                    "tool",
                )
            continue
        where = dotted((*path, "mcp"))
        if "command" in server and "url" in server:
            yield checker.error((*path, "mcp"), f"{where} has both 'command:' and 'url:'; keep one", "tool", key=True)
        elif "command" not in server and "url" not in server:
            yield checker.error(
                (*path, "mcp"),
                f"{where} needs 'command:' (a program, over stdio) or 'url:' (a streamable HTTP endpoint)",
                "tool",
                key=True,
            )
        else:
            yield from _mcp_program(checker, path, server)
            if "command" in server:
                yield from working_directory(checker, (*path, "mcp", "cwd"), server.get("cwd"))
        wrong = [("env", "url"), ("cwd", "url"), ("headers", "command")]
        for key in [k for k, other in wrong if k in server and other in server]:
            kind = "stdio servers ('command:')" if key != "headers" else "HTTP servers ('url:')"
            yield checker.error((*path, "mcp", key), f"{where}.{key} only applies to {kind}", "tool", key=True)
        for key in [k for k in ("parameters", "cwd") if k in spec]:
            hint = "set mcp.cwd" if key == "cwd" else "the server's tools bring their own parameters"
            yield checker.error(
                (*path, key), f"{dotted((*path, key))} does not apply to an MCP server: {hint}", "tool", key=True
            )
        allowed = {tool for _, tool in names(spec.get("allow"))}
        for index, tool in names(spec.get("deny")):
            if tool in allowed:
                yield checker.warning(
                    (*path, "deny", index), f"'{tool}' is both allowed and denied; it is not offered", "tool"
                )
        if spec.get("allow") == []:
            yield checker.warning((*path, "allow"), f"tool '{name}' allows no tool of its MCP server", "tool")
    yield from _mcp_clashes(checker)


def _mcp_program(checker: CheckContext, path: JsonPath, server: dict[str, Any]) -> Iterator[Diagnostic]:
    """A stdio server whose program is not installed here: a warning (CI may validate where it is not)."""
    from teamrun.config.programs import missing_program

    command, env, cwd = server.get("command"), server.get("env"), server.get("cwd")
    if isinstance(command, list) and (env is None or isinstance(env, dict)):
        where = Path(checker.file).parent / cwd if isinstance(cwd, str) else None
        why = missing_program(command, env=env, cwd=where)
        if why is not None:
            yield checker.warning(
                (*path, "mcp", "command", 0),
                f"{dotted((*path, 'mcp', 'command'))}: {why}; the run would stop before it starts",
                "program",
            )


def _mcp_clashes(checker: CheckContext) -> Iterator[Diagnostic]:
    """Function names an MCP entry's ``allow`` list adds that another function of the agent already has."""
    from teamrun.config.tool_names import (
        DELEGATE_TASK,
        delegation_tool_name,
        handoff_tool_name,
        mcp_function_name,
    )

    for agent, spec in checker.agents.items():
        delegation = mapping(spec.get("delegation"))
        workers = [w for _, w in names(spec.get("delegates_to"))]
        owners: dict[str, str] = {}
        if workers and delegation.get("tool") == "delegate_task":
            owners[DELEGATE_TASK] = "the delegation tool"
        owners.update({delegation_tool_name(w): f"the delegation tool for '{w}'" for w in workers})
        owners.update({handoff_tool_name(a): f"the handoff tool for '{a}'" for _, a in names(spec.get("handoffs"))})
        entries = [(i, e) for i, e in names(spec.get("tools")) if e in checker.tools]
        owners.update({e: f"the tool '{e}'" for _, e in entries if "mcp" not in checker.tools[e]})
        for index, entry in entries:
            tool_spec = checker.tools[entry]
            if not isinstance(tool_spec.get("mcp"), dict) or not isinstance(tool_spec.get("allow"), list):
                continue
            given = tool_spec.get("prefix")
            prefix = given if isinstance(given, str) else f"{entry}_"
            denied = {t for _, t in names(tool_spec.get("deny"))}
            for _, tool in names(tool_spec["allow"]):
                function = mcp_function_name(prefix, tool)
                mine = f"the tool '{tool}' of MCP server '{entry}'"
                if tool in denied:
                    continue
                if function in owners:
                    yield checker.error(
                        ("agents", agent, "tools", index),
                        f"agent '{agent}' would be offered two functions named '{function}': {owners[function]} "
                        f"and {mine}; set tools.{entry}.prefix or leave the tool out of allow",
                        "tool",
                    )
                owners.setdefault(function, mine)
