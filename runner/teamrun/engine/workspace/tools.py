"""The workspace tools an agent is offered, built from its permissions, and reading the calls it makes.

An agent that may read some entry gets ``workspace_read`` (its ``entry`` an
enum of what it may read) and ``workspace_changes``; for each entry it may
write, one ``workspace_write_<entry>`` whose parameters carry the entry's
schema (the whole value for ``replace``, the items for ``append``, the keys
for ``merge``, a number for ``max``/``min``/``sum``) and, where the rule
needs it, the ``version`` it read. Writers of an entry may always read it.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from teamrun.config.models import TeamConfig, WorkspaceEntry
from teamrun.conventions import WORKSPACE_CHANGES, WORKSPACE_READ, WORKSPACE_WRITE_PREFIX, workspace_write_tool_name
from teamrun.llm.types import ToolSchema, function_tool

__all__ = ["Access", "WorkspaceRequest", "access", "parse_call", "workspace_tools"]

_VERSION = {
    "type": "integer",
    "minimum": 0,
    "description": "The version you read (from workspace_read); a stale version is refused with the current value.",
}


@dataclass(frozen=True)
class Access:
    """What one agent may do with the workspace."""

    read: tuple[str, ...]
    write: tuple[str, ...]


def access(config: TeamConfig, agent: str) -> Access:
    """The entries ``agent`` may read (by default every agent reads; writers always do) and write."""
    workspace = config.workspace
    if workspace is None:
        return Access((), ())
    write = tuple(name for name, e in workspace.entries.items() if e.kind != "board" and agent in (e.write or ()))
    read = tuple(name for name, e in workspace.entries.items() if e.read is None or agent in e.read or name in write)
    return Access(read, write)


def workspace_tools(config: TeamConfig, agent: str) -> list[ToolSchema]:
    """``agent``'s workspace tools (none without a workspace or any access)."""
    allowed = access(config, agent)
    if config.workspace is None or not allowed.read:
        return []
    entries = config.workspace.entries
    listing = "; ".join(_describe(name, entries[name]) for name in allowed.read)
    tools: list[ToolSchema] = [
        function_tool(
            WORKSPACE_READ,
            f"Read one entry of the team's shared workspace: its value, its version and who wrote it. "
            f"Entries: {listing}.",
            {"entry": {"type": "string", "enum": list(allowed.read), "description": "The entry to read."}},
            ["entry"],
        ),
        function_tool(
            WORKSPACE_CHANGES,
            "List the workspace entries written since a version (their versions and writers, not their values).",
            {"since": {"type": "integer", "minimum": 0, "description": "The workspace version you last saw (0: all)."}},
            ["since"],
        ),
    ]
    tools.extend(_write_tool(name, entries[name]) for name in allowed.write)
    return tools


def _describe(name: str, entry: WorkspaceEntry) -> str:
    return f"{name} ({entry.merge})" + (f": {entry.description.strip().rstrip('.')}" if entry.description else "")


def _write_tool(name: str, entry: WorkspaceEntry) -> ToolSchema:
    schema = copy.deepcopy(entry.value_schema)
    about = f" {entry.description.strip()}" if entry.description else ""
    rule = entry.merge
    if rule == "replace":
        return function_tool(
            workspace_write_tool_name(name),
            f"Replace the workspace entry '{name}'.{about} Give the version you read: if someone wrote it since, "
            "the write is refused with the current value; read it again and retry.",
            {"value": schema or {}, "version": _VERSION},
            ["value", "version"],
        )
    if rule == "append":
        items = schema.get("items", {}) if isinstance(schema.get("items", {}), dict) else {}
        return function_tool(
            workspace_write_tool_name(name),
            f"Add items to the end of the workspace list '{name}'.{about} Nothing others add is lost.",
            {"items": {"type": "array", "items": items, "minItems": 1}},
            ["items"],
        )
    if rule == "merge":
        value: dict[str, Any] = {"type": "object", "description": "The keys to set (others are kept)."}
        if isinstance(schema.get("properties"), dict):
            value["properties"] = schema["properties"]
        if "additionalProperties" in schema:
            value["additionalProperties"] = schema["additionalProperties"]
        return function_tool(
            workspace_write_tool_name(name),
            f"Set keys of the workspace object '{name}'.{about} Give the version you read: a key someone else "
            "wrote since is a conflict, refused with the current value.",
            {"value": value, "version": _VERSION},
            ["value", "version"],
        )
    kind = schema.get("type") if schema.get("type") in ("integer", "number") else "number"
    verb = {"max": "Raise it to this number if higher", "min": "Lower it to this number if lower", "sum": "Add"}
    return function_tool(
        workspace_write_tool_name(name),
        f"{verb[rule]}: the workspace number '{name}' ({rule}).{about}",
        {"value": {"type": kind}},
        ["value"],
    )


@dataclass(frozen=True)
class WorkspaceRequest:
    """One workspace call, parsed."""

    op: str
    """``read``, ``changes`` or ``write``."""
    entry: str | None = None
    value: Any = None
    version: int | None = None
    since: int = 0


def parse_call(
    name: str, arguments: Mapping[str, Any], allowed: Access, entries: Mapping[str, WorkspaceEntry]
) -> WorkspaceRequest:
    """The call ``name(arguments)`` as a request; :class:`ValueError` says what is wrong with it."""
    if name == WORKSPACE_READ:
        entry = arguments.get("entry")
        if entry not in allowed.read:
            raise ValueError(f"'entry' must be one of: {', '.join(allowed.read)}")
        return WorkspaceRequest("read", str(entry))
    if name == WORKSPACE_CHANGES:
        since = arguments.get("since", 0)
        if isinstance(since, bool) or not isinstance(since, int) or since < 0:
            raise ValueError("'since' must be a whole number >= 0")
        return WorkspaceRequest("changes", since=since)
    entry = name.removeprefix(WORKSPACE_WRITE_PREFIX)
    if entry not in allowed.write:
        raise ValueError(
            f"there is no workspace entry '{entry}' you may write (you may write: {', '.join(allowed.write) or 'none'})"
        )
    spec = entries[entry]
    key = "items" if spec.merge == "append" else "value"
    if key not in arguments:
        raise ValueError(f"'{key}' is required")
    version = arguments.get("version")
    if spec.merge in ("replace", "merge"):
        if isinstance(version, bool) or not isinstance(version, int):
            raise ValueError("'version' (a whole number: the version you read) is required")
    else:
        version = None
    return WorkspaceRequest("write", entry, arguments[key], version)
