"""Semantic checks of the ``tools:`` section and of the function names each agent's model is offered.

One kind per tool (``python``, ``command``, ``mcp``, ``person``), valid parameter
and answer schemas, command templates that read declared parameters only, a ``cwd``
that exists (relative to the team file's folder, as the run resolves it), and no
two functions of one name offered to one agent (:mod:`teamrun.config.tool_names`
owns the naming rules; an MCP server's names: :mod:`teamrun.config.checks.mcp`).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from teamrun.config import templates
from teamrun.config.checks.choices import choice_checks
from teamrun.config.checks.raw import mapping, names
from teamrun.config.checks.sub_schemas import sub_schema
from teamrun.config.checks.templates import template_message
from teamrun.config.diagnostics import Diagnostic, JsonPath, did_you_mean, dotted, listing

if TYPE_CHECKING:
    from teamrun.config.checks.context import CheckContext
    from teamrun.config.models import TeamConfig

__all__ = ["team_as_read", "tool_checks", "working_directory"]

_TOOL_KEYS = ("python", "command", "mcp", "person")


def tool_checks(c: CheckContext) -> Iterator[Diagnostic]:
    """The tool definitions, then the function names offered to each agent."""
    yield from _tool_definitions(c)
    yield from _function_name_clashes(c)


def _tool_definitions(c: CheckContext) -> Iterator[Diagnostic]:
    for name, spec in c.tools.items():
        path: JsonPath = ("tools", name)
        kinds = [k for k in _TOOL_KEYS if k in spec]
        if len(kinds) > 1:
            yield c.error(
                path,
                f"tool '{name}' has both " + " and ".join(f"'{k}:'" for k in kinds) + "; keep one",
                "tool",
                key=True,
            )
        elif not kinds and not any(did_you_mean(key, _TOOL_KEYS) for key in spec):
            # (a misspelt `comand:` is reported as an unknown key instead)
            yield c.error(
                path,
                f"tool '{name}' needs 'python:' (a function), 'command:' (an argv list), 'mcp:' (an MCP server) "
                "or 'person:' (a person to ask)",
                "tool",
                key=True,
            )
        yield from _exit_codes(c, path, spec, kinds)
        person = mapping(spec.get("person"))
        if "answer_schema" in person:
            yield from sub_schema(c, (*path, "person", "answer_schema"), person["answer_schema"])
            yield from choice_checks(c, (*path, "person"), person)
        parameters = mapping(spec.get("parameters"))
        for param, fragment in parameters.items():
            yield from sub_schema(c, (*path, "parameters", param), fragment)
        command = spec.get("command")
        if isinstance(command, list):
            yield from _command_items(c, name, command, set(parameters))
            yield from working_directory(c, (*path, "cwd"), spec.get("cwd"))


def working_directory(c: CheckContext, path: JsonPath, cwd: Any) -> Iterator[Diagnostic]:
    """A ``cwd`` that is not a folder, resolved as the run resolves it: relative to the team file's folder.

    Only a plain path is judged: one written with ``${VAR}`` or a template is left to the run. A relative
    path that is missing is an error (it travels with the file); an absolute one a warning (it may exist
    on the machine that runs the team)."""
    team_file = Path(c.file)
    if not isinstance(cwd, str) or not cwd or not team_file.is_file() or not _plain(c, path, cwd):
        return
    folder = Path(cwd)
    resolved = folder if folder.is_absolute() else team_file.parent / folder
    if resolved.is_dir():
        return
    what = "is not a folder" if resolved.exists() else "does not exist"
    shown = cwd if folder.is_absolute() else f"{cwd} (relative to the team file's folder: {resolved})"
    message = f"{dotted(path)}: the working directory {shown} {what}; create it or point cwd at a folder"
    if folder.is_absolute():
        yield c.warning(path, message + " (it may exist where the team runs)", "tool")
    else:
        yield c.error(path, message, "tool")


def _plain(c: CheckContext, path: JsonPath, cwd: str) -> bool:
    """Whether ``cwd`` is written as a plain path: no template, no ``${VAR}`` in the file's text of it."""
    if "{{" in cwd or "{%" in cwd:
        return False
    mark = c.source_map.value(path)
    written = c.lines[mark.line - 1][mark.column - 1 :] if 0 < mark.line <= len(c.lines) else ""
    return "${" not in written


def _exit_codes(c: CheckContext, path: JsonPath, spec: dict[str, Any], kinds: list[str]) -> Iterator[Diagnostic]:
    """``ok_exit_codes``: command tools only; a list without 0 makes a command that succeeds an error."""
    if "ok_exit_codes" not in spec:
        return
    where: JsonPath = (*path, "ok_exit_codes")
    if kinds and "command" not in kinds:
        yield c.error(where, f"{dotted(where)} only applies to command tools ('command:')", "tool", key=True)
        return
    codes = spec["ok_exit_codes"]
    if isinstance(codes, list) and codes and all(type(code) is int for code in codes) and 0 not in codes:
        yield c.warning(
            where,
            f"{dotted(where)} leaves out 0, so a command that succeeds is an error; list it too (e.g. [0, {codes[0]}])",
            "tool",
        )


def _command_items(c: CheckContext, tool: str, command: list[Any], parameters: set[str]) -> Iterator[Diagnostic]:
    for index, item in enumerate(command):
        path: JsonPath = ("tools", tool, "command", index)
        if not isinstance(item, str):
            continue
        try:
            used = templates.undeclared_names(item)
        except templates.TemplateSyntaxError as exc:
            yield c.error(
                path,
                f"template error in {dotted(path)}: {template_message(exc.message)}",
                "template",
            )
            continue
        for unknown in sorted(used - parameters):
            hint = did_you_mean(unknown, sorted(parameters))
            declared = f" (parameters: {listing(sorted(parameters))})" if parameters and not hint else ""
            yield c.error(
                path,
                f"{dotted(path)} uses '{{{{ {unknown} }}}}' but tool '{tool}' has no "
                f"parameter '{unknown}'{hint}{declared}",
                "template",
            )


def _function_name_clashes(c: CheckContext) -> Iterator[Diagnostic]:
    """Two functions of one name offered to one agent's model (``tool_names`` owns the rules)."""
    from teamrun.config.tool_names import describe, team_clashes

    for agent, pairs in team_clashes(team_as_read(c.agents, c.tools)).items():
        for first, later in pairs:
            if "mcp" in (first.origin, later.origin):
                continue  # an MCP server's tools: reported by checks.mcp, located at the entry
            if (first.origin, first.source) == (later.origin, later.source):
                if later.origin == "tool":  # (twice in delegates_to or handoffs is warned about above)
                    twice: JsonPath = ("agents", agent, "tools", _indexes(c, agent, "tools", later.source)[-1])
                    message = f"'{later.source}' is listed twice in agents.{agent}.tools"
                    yield c.warning(twice, message, "reference")
                continue
            path = _offered_path(c, agent, later) or _offered_path(c, agent, first) or ("agents", agent)
            yield c.error(
                path,
                f"agents.{agent}: {describe(later)} and {describe(first)} would both be offered to the model "
                f"as '{later.name}'; rename the tool (a model cannot tell two functions of one name apart)",
                "tool_name",
            )


def _offered_path(c: CheckContext, agent: str, item: Any) -> JsonPath | None:
    """Where an offered function comes from in the file: the tools item, else the delegates_to/handoffs item."""
    if item.origin == "background":
        return ("agents", agent, "delegation", "background")
    field = {"tool": "tools", "delegation": "delegates_to", "handoff": "handoffs"}[item.origin]
    indexes = _indexes(c, agent, field, item.source)
    return ("agents", agent, field, indexes[0]) if indexes else None


def _indexes(c: CheckContext, agent: str, field: str, name: str) -> list[int]:
    return [index for index, value in names(c.agents[agent].get(field)) if value == name]


@dataclass(frozen=True)
class _DelegationAsRead:
    tool: str
    background: bool | list[str]


@dataclass(frozen=True)
class _AgentAsRead:
    delegates_to: list[str]
    handoffs: list[str]
    tools: list[str]
    delegation: _DelegationAsRead | None


@dataclass(frozen=True)
class _ToolAsRead:
    mcp: dict[str, Any] | None
    prefix: str | None
    allow: list[str] | None
    deny: list[str] | None


@dataclass(frozen=True)
class _TeamAsRead:
    agents: dict[str, _AgentAsRead]
    tools: dict[str, _ToolAsRead]


def team_as_read(agents: dict[str, dict[str, Any]], tools: dict[str, dict[str, Any]]) -> TeamConfig:
    """What :mod:`teamrun.config.tool_names` reads of a team, taken from the file's mappings.

    The fields it reads, with the models' defaults, and only well-formed values (a malformed one is the
    schema's to report). Building the pydantic models instead would cost ``validate`` more than all the
    rest of its checks; ``tests/config/test_name_clash_view.py`` checks both give the same clashes.
    """

    def listed(value: Any) -> list[str]:
        return [name for _, name in names(value)]

    def delegation(value: Any) -> _DelegationAsRead | None:
        if not isinstance(value, dict):
            return None
        tool = value.get("tool")
        background = value.get("background")
        return _DelegationAsRead(
            tool if isinstance(tool, str) else "per_agent",
            background if isinstance(background, bool) else listed(background),
        )

    def optional(value: Any) -> list[str] | None:
        return listed(value) if isinstance(value, list) else None

    read = _TeamAsRead(
        {
            name: _AgentAsRead(
                listed(spec.get("delegates_to")),
                listed(spec.get("handoffs")),
                listed(spec.get("tools")),
                delegation(spec.get("delegation")),
            )
            for name, spec in agents.items()
        },
        {
            name: _ToolAsRead(
                spec.get("mcp") if isinstance(spec.get("mcp"), dict) else None,
                spec.get("prefix") if isinstance(spec.get("prefix"), str) else None,
                optional(spec.get("allow")),
                optional(spec.get("deny")),
            )
            for name, spec in tools.items()
        },
    )
    return cast("TeamConfig", read)
