"""Semantic checks: what a JSON Schema cannot say about a team file.

They run on the raw loaded data even when the schema found problems, so a
user sees every mistake at once; each check therefore reads the data
defensively (a value of the wrong type is simply skipped — the schema has
already reported it).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from teamrun.config import templates
from teamrun.config.diagnostics import Diagnostic, JsonPath, did_you_mean, dotted, listing
from teamrun.config.yamlsrc import SourceMap

_START_TEMPLATES = ("reject", "prompt", "append_prompt")
_COMPLETE_TEMPLATES = ("result_text", "feedback")
_ITERATION_TEMPLATES = ("feedback",)
_HOOK_TEMPLATES = {
    "on_start": _START_TEMPLATES,
    "on_complete": _COMPLETE_TEMPLATES,
    "on_iteration": _ITERATION_TEMPLATES,
}


def _mapping(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _names(value: Any) -> list[tuple[int, str]]:
    if not isinstance(value, list):
        return []
    return [(i, item) for i, item in enumerate(value) if isinstance(item, str)]


class SemanticChecker:
    """Cross-reference, graph, template and sub-schema checks over one team file."""

    def __init__(self, file: str, text: str, data: Any, source_map: SourceMap) -> None:
        self.file = file
        self.lines = text.splitlines()
        self.data = _mapping(data)
        self.source_map = source_map
        self.agents = {k: _mapping(v) for k, v in _mapping(self.data.get("agents")).items()}
        self.tools = {k: _mapping(v) for k, v in _mapping(self.data.get("tools")).items()}

    def check(self, *, import_check: bool = False) -> list[Diagnostic]:
        found = [
            *self._supervisor(),
            *self._references(),
            *self._cycles(),
            *self._depth(),
            *self._unused_agents(),
            *self._agent_details(),
            *self._tool_definitions(),
        ]
        if import_check:
            found.extend(self._imports())
        return found

    # -- helpers ---------------------------------------------------------------------------

    def _error(self, path: JsonPath, message: str, rule: str, *, key: bool = False) -> Diagnostic:
        mark = self.source_map.key(path) if key else self.source_map.value(path)
        return Diagnostic(self.file, mark.line, mark.column, message, rule=rule)

    def _warning(self, path: JsonPath, message: str, rule: str, *, key: bool = False) -> Diagnostic:
        mark = self.source_map.key(path) if key else self.source_map.value(path)
        return Diagnostic(self.file, mark.line, mark.column, message, "warning", rule)

    # -- references and the delegation graph -------------------------------------------------

    def _supervisor(self) -> Iterator[Diagnostic]:
        name = self.data.get("supervisor")
        if isinstance(name, str) and self.agents and name not in self.agents:
            hint = did_you_mean(name, list(self.agents))
            yield self._error(
                ("supervisor",),
                f"supervisor '{name}' is not defined in agents{hint} (defined agents: {listing(list(self.agents))})",
                "reference",
            )

    def _references(self) -> Iterator[Diagnostic]:
        for agent, spec in self.agents.items():
            for field in ("delegates_to", "handoffs"):
                seen: set[str] = set()
                for index, target in _names(spec.get(field)):
                    path = ("agents", agent, field, index)
                    if target == agent:
                        verb = "delegate to" if field == "delegates_to" else "hand off to"
                        yield self._error(path, f"agent '{agent}' cannot {verb} itself", "reference")
                    elif target not in self.agents:
                        hint = did_you_mean(target, list(self.agents))
                        yield self._error(
                            path,
                            f"{dotted(path)}: agent '{target}' is not defined{hint} "
                            f"(defined agents: {listing(list(self.agents))})",
                            "reference",
                        )
                    elif target in seen:
                        yield self._warning(path, f"'{target}' is listed twice in {dotted(path[:-1])}", "reference")
                    seen.add(target)
            for index, tool in _names(spec.get("tools")):
                if tool in self.tools:
                    continue
                path = ("agents", agent, "tools", index)
                if not self.tools:
                    detail = "no tools are defined (add them under a top-level 'tools:' section)"
                else:
                    detail = f"defined tools: {listing(list(self.tools))}"
                hint = did_you_mean(tool, list(self.tools))
                yield self._error(path, f"{dotted(path)}: tool '{tool}' is not defined{hint} ({detail})", "reference")

    def _edges(self, agent: str) -> list[tuple[int, str]]:
        return [(i, t) for i, t in _names(self.agents[agent].get("delegates_to")) if t in self.agents and t != agent]

    def _cycles(self) -> Iterator[Diagnostic]:
        state: dict[str, str] = {}  # "active" while on the DFS stack, "done" after
        stack: list[str] = []
        reported: set[frozenset[str]] = set()
        diagnostics: list[Diagnostic] = []

        def visit(agent: str) -> None:
            state[agent] = "active"
            stack.append(agent)
            for index, target in self._edges(agent):
                if state.get(target) == "active":
                    loop = stack[stack.index(target):]
                    if frozenset(loop) not in reported:
                        reported.add(frozenset(loop))
                        chain = " → ".join([*loop, target])
                        diagnostics.append(self._error(
                            ("agents", agent, "delegates_to", index),
                            f"delegation cycle: {chain}; delegation must form a tree "
                            "(use handoffs for agents that pass control back and forth)",
                            "cycle",
                        ))
                elif target not in state:
                    visit(target)
            stack.pop()
            state[agent] = "done"

        for agent in self.agents:
            if agent not in state:
                visit(agent)
        yield from diagnostics

    def _longest_chain(self, agent: str, seen: frozenset[str]) -> list[str]:
        best: list[str] = []
        for _, target in self._edges(agent):
            if target in seen:
                continue  # a cycle, reported elsewhere
            chain = self._longest_chain(target, seen | {target})
            if len(chain) > len(best):
                best = chain
        return [agent, *best]

    def _depth(self) -> Iterator[Diagnostic]:
        limit = _mapping(self.data.get("limits")).get("max_depth")
        supervisor = self.data.get("supervisor")
        if not isinstance(limit, int) or isinstance(limit, bool) or supervisor not in self.agents:
            return
        chain = self._longest_chain(str(supervisor), frozenset({str(supervisor)}))
        depth = len(chain) - 1
        if depth > limit:
            yield self._error(
                ("limits", "max_depth"),
                f"the delegation chain {' → '.join(chain)} is {depth} levels deep, more than "
                f"limits.max_depth ({limit}); raise the limit or flatten the team",
                "depth",
            )

    def _unused_agents(self) -> Iterator[Diagnostic]:
        supervisor = self.data.get("supervisor")
        if supervisor not in self.agents:
            return
        reachable = {str(supervisor)}
        frontier = [str(supervisor)]
        while frontier:
            spec = self.agents[frontier.pop()]
            for field in ("delegates_to", "handoffs"):
                for _, target in _names(spec.get(field)):
                    if target in self.agents and target not in reachable:
                        reachable.add(target)
                        frontier.append(target)
        for agent in self.agents:
            if agent not in reachable:
                yield self._warning(
                    ("agents", agent),
                    f"agent '{agent}' is never used: the supervisor '{supervisor}' cannot reach it "
                    "through delegates_to or handoffs",
                    "unused",
                    key=True,
                )

    # -- inside each agent ---------------------------------------------------------------

    def _agent_details(self) -> Iterator[Diagnostic]:
        for agent, spec in self.agents.items():
            base: JsonPath = ("agents", agent)
            yield from self._template((*base, "instructions"), spec.get("instructions"))
            yield from self._sub_schema((*base, "output_schema"), spec.get("output_schema"))
            delegation = _mapping(spec.get("delegation"))
            if delegation and not _names(spec.get("delegates_to")):
                yield self._warning(
                    (*base, "delegation"),
                    f"agent '{agent}' has a delegation section but no delegates_to, so it never applies",
                    "unused",
                    key=True,
                )
            yield from self._template((*base, "delegation", "prompt"), delegation.get("prompt"))
            yield from self._message_filter((*base, "delegation", "message_filter"), delegation.get("message_filter"))
            hooks = _mapping(delegation.get("hooks"))
            for event, fields in _HOOK_TEMPLATES.items():
                entries = hooks.get(event)
                if not isinstance(entries, list):
                    continue
                for index, hook in enumerate(entries):
                    hook_path = (*base, "delegation", "hooks", event, index)
                    hook = _mapping(hook)
                    yield from self._condition((*hook_path, "when"), hook.get("when"))
                    for field in fields:
                        yield from self._template((*hook_path, field), hook.get(field))
                    if hook and not (set(hook) - {"when"}):
                        yield self._error(hook_path, f"{dotted(hook_path)} has a condition but no action", "hook")

    def _message_filter(self, path: JsonPath, spec: Any) -> Iterator[Diagnostic]:
        for index, pattern in _names(_mapping(spec).get("drop_matching")):
            try:
                re.compile(pattern)
            except re.error as exc:
                yield self._error((*path, "drop_matching", index), f"invalid regular expression '{pattern}': {exc}", "regex")

    def _template(self, path: JsonPath, source: Any) -> Iterator[Diagnostic]:
        if not isinstance(source, str):
            return
        try:
            templates.syntax_check(source)
        except templates.TemplateSyntaxError as exc:
            line, column = self._template_position(path, exc.lineno or 1)
            yield Diagnostic(
                self.file, line, column,
                f"template error in {dotted(path)}: {exc.message} (template line {exc.lineno})",
                rule="template",
            )

    def _condition(self, path: JsonPath, source: Any) -> Iterator[Diagnostic]:
        if not isinstance(source, str):
            return
        try:
            templates.compile_condition(source)
        except templates.TemplateSyntaxError as exc:
            yield self._error(path, f"invalid condition in {dotted(path)} '{source}': {exc.message}", "template")

    def _template_position(self, path: JsonPath, template_line: int) -> tuple[int, int]:
        mark = self.source_map.value(path)
        if not mark.block:
            return mark.line + template_line - 1, mark.column if template_line == 1 else 1
        line = mark.line + template_line  # block scalar text starts below the `|` or `>`
        text = self.lines[line - 1] if 0 < line <= len(self.lines) else ""
        return line, len(text) - len(text.lstrip()) + 1

    def _sub_schema(self, path: JsonPath, schema: Any) -> Iterator[Diagnostic]:
        if not isinstance(schema, dict):
            return
        from jsonschema import Draft202012Validator

        meta = Draft202012Validator(Draft202012Validator.META_SCHEMA)
        for error in meta.iter_errors(schema):
            where = (*path, *error.absolute_path)
            if error.absolute_path and error.absolute_path[-1] == "type" and isinstance(error.instance, str):
                kinds = ["array", "boolean", "integer", "null", "number", "object", "string"]
                message = (
                    f"{dotted(path)} is not a valid JSON Schema: unknown type '{error.instance}'"
                    f"{did_you_mean(error.instance, kinds) or '; types are: ' + ', '.join(kinds)}"
                )
            else:
                message = f"{dotted(path)} is not a valid JSON Schema: {error.message}"
            yield self._error(where, message, "output_schema")

    # -- tools -----------------------------------------------------------------------------

    def _tool_definitions(self) -> Iterator[Diagnostic]:
        for name, spec in self.tools.items():
            path: JsonPath = ("tools", name)
            kinds = [k for k in ("python", "command") if k in spec]
            if len(kinds) != 1:
                problem = (
                    "has both 'python:' and 'command:'; keep one"
                    if kinds
                    else "needs 'python:' (a function) or 'command:' (an argv list)"
                )
                yield self._error(path, f"tool '{name}' {problem}", "tool", key=True)
            parameters = _mapping(spec.get("parameters"))
            for param, fragment in parameters.items():
                yield from self._sub_schema((*path, "parameters", param), fragment)
            command = spec.get("command")
            if isinstance(command, list):
                yield from self._command_items(name, command, set(parameters))

    def _command_items(self, tool: str, command: list[Any], parameters: set[str]) -> Iterator[Diagnostic]:
        for index, item in enumerate(command):
            path: JsonPath = ("tools", tool, "command", index)
            if not isinstance(item, str):
                continue
            try:
                names = templates.undeclared_names(item)
            except templates.TemplateSyntaxError as exc:
                yield self._error(path, f"template error in {dotted(path)}: {exc.message}", "template")
                continue
            for unknown in sorted(names - parameters):
                hint = did_you_mean(unknown, sorted(parameters))
                yield self._error(
                    path,
                    f"{dotted(path)} uses '{{{{ {unknown} }}}}' but tool '{tool}' has no parameter '{unknown}'{hint}",
                    "template",
                )

    def _imports(self) -> Iterator[Diagnostic]:
        from pathlib import Path

        from teamrun.config.imports import ImportProblem, resolve_import_path

        base_dir = Path(self.file).resolve().parent
        for path, reference in self._import_references():
            try:
                resolve_import_path(reference, base_dir=base_dir)
            except ImportProblem as exc:
                yield self._error(path, f"{dotted(path)}: {exc}", "import")

    def _import_references(self) -> Iterator[tuple[JsonPath, str]]:
        for name, spec in self.tools.items():
            if isinstance(spec.get("python"), str):
                yield ("tools", name, "python"), spec["python"]
        for agent, spec in self.agents.items():
            delegation = _mapping(spec.get("delegation"))
            mf = _mapping(delegation.get("message_filter"))
            if isinstance(mf.get("python"), str):
                yield ("agents", agent, "delegation", "message_filter", "python"), mf["python"]
            hooks = _mapping(delegation.get("hooks"))
            for event in _HOOK_TEMPLATES:
                entries = hooks.get(event)
                for index, hook in enumerate(entries if isinstance(entries, list) else []):
                    call = _mapping(hook).get("call")
                    if isinstance(call, str):
                        yield ("agents", agent, "delegation", "hooks", event, index, "call"), call


def check_semantics(
    file: str, text: str, data: Any, source_map: SourceMap, *, import_check: bool = False
) -> list[Diagnostic]:
    """Every semantic problem in one loaded team file."""
    return SemanticChecker(file, text, data, source_map).check(import_check=import_check)


__all__ = ["SemanticChecker", "check_semantics"]
