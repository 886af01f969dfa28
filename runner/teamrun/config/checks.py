"""Semantic checks: what a JSON Schema cannot say about a team file.

They run on the raw loaded data even when the schema found problems, so a
user sees every mistake at once; each check therefore reads the data
defensively (a value of the wrong type is simply skipped — the schema has
already reported it).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from teamrun.config import templates
from teamrun.config.diagnostics import (
    Diagnostic,
    JsonPath,
    did_you_mean,
    dotted,
    listing,
    shorten,
)
from teamrun.config.regexes import judge_regex
from teamrun.config.workflow_checks import workflow_checks
from teamrun.config.workspace_checks import workspace_checks
from teamrun.config.yamlsrc import SourceMap

if TYPE_CHECKING:
    from teamrun.config.models import TeamConfig

HOOK_POINTS = ("on_start", "on_complete", "on_iteration")
HOOK_ACTIONS: dict[str, tuple[str, ...]] = {
    "on_start": ("reject", "prompt", "append_prompt", "max_steps", "context", "call"),
    "on_complete": ("result_text", "feedback", "bail", "call"),
    "on_iteration": ("feedback", "stop", "call"),
}
"""What a hook at each point can do. The models (``config.models.hook_actions``) are the source; this copy
lets `validate` check a file without building them, and ``tests/config/test_hook_tables.py`` keeps it equal."""
HOOK_TEMPLATES: dict[str, tuple[str, ...]] = {
    "on_start": ("reject", "prompt", "append_prompt"),
    "on_complete": ("result_text", "feedback"),
    "on_iteration": ("feedback",),
}
"""The actions of each hook point whose text is a template (``config.models.hook_templates``; kept equal by test)."""


_TOOL_KEYS = ("python", "command", "mcp", "person")
INSTRUCTION_NAMES = ("vars", "today", "agent", "team", "context")
"""What instructions can read (the engine's ``RunContext.template_context``)."""
PROMPT_NAMES = (*INSTRUCTION_NAMES, "workers", "tool", "parallel")
"""What ``delegation.prompt`` can read: the instructions' names and the workers."""
HOOK_NAMES = (
    "point",
    "agent",
    "parent",
    "iteration",
    "depth",
    "vars",
    "prompt",
    "success",
    "error",
    "result",
    "messages",
    "status",
    "usage",
    "finish_reason",
    "tool_results",
    "text",
    "task_id",
)
"""What ``when:`` expressions and hook texts can read (the fields of the engine's ``HookContext``)."""
_JSON_TYPES = ("array", "boolean", "integer", "null", "number", "object", "string")
_TOKEN_WORDS = {
    "'end of print statement'": "'}}'",
    "'end of statement block'": "'%}'",
    "'begin of print statement'": "'{{'",
    "'begin of statement block'": "'{%'",
    "expected token 'name'": "expected a name",
}
_UNCLOSED_BLOCK = re.compile(r"The innermost block that needs to be closed is '(\w+)'")


def _mapping(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _number(value: Any) -> int | float | None:
    # never float(): an integer of 400 digits is valid YAML and does not fit a float
    return value if isinstance(value, int | float) and not isinstance(value, bool) else None


def _names(value: Any) -> list[tuple[int, str]]:
    if not isinstance(value, list):
        return []
    return [(i, item) for i, item in enumerate(value) if isinstance(item, str)]


_WHERE = {"template": "when this template is rendered", "condition": "in a hook's condition"}


def _template_message(message: str | None) -> str:
    """Jinja's wording, made shorter where it is long."""
    text = (message or "invalid template").strip()
    unclosed = _UNCLOSED_BLOCK.search(text)
    if unclosed:
        tag = unclosed.group(1)
        return f"'{{% {tag} %}}' is never closed; add '{{% end{tag} %}}'"
    for jinja, shown in _TOKEN_WORDS.items():
        text = text.replace(jinja, shown)
    return text.rstrip(".")


def _is_regex(instance: object) -> bool:
    if isinstance(instance, str):
        verdict = judge_regex(instance)  # a caution is reported by _regex_cautions, located
        if verdict.error is not None:
            raise re.error(verdict.error)
    return True


@functools.cache
def _meta_validator() -> Any:
    from jsonschema import Draft202012Validator, FormatChecker

    formats = FormatChecker(formats=())
    formats.checkers = dict(Draft202012Validator.FORMAT_CHECKER.checkers)
    # jsonschema's own regex check lets OverflowError (`a{99999999999}`) escape as a traceback
    formats.checks("regex", raises=(re.error, OverflowError))(_is_regex)
    return Draft202012Validator(Draft202012Validator.META_SCHEMA, format_checker=formats)


def _schema_patterns(schema: Any, at: JsonPath = ()) -> Iterator[tuple[JsonPath, str, bool]]:
    """The regular expressions of a JSON Schema: each ``pattern`` value and ``patternProperties`` key, with
    its path and whether it is a key."""
    if isinstance(schema, list):
        for index, item in enumerate(schema):
            yield from _schema_patterns(item, (*at, index))
        return
    if not isinstance(schema, dict):
        return
    for key, value in schema.items():
        if key in _DATA_KEYWORDS:
            continue  # data, not schemas
        if key == "pattern" and isinstance(value, str):
            yield (*at, key), value, False
            continue
        if key == "patternProperties" and isinstance(value, dict):
            yield from (((*at, key, name), name, True) for name in value if isinstance(name, str))
        if key in ("properties", "patternProperties", "$defs", "definitions", "dependentSchemas") and isinstance(
            value, dict
        ):
            for name, sub in value.items():
                yield from _schema_patterns(sub, (*at, key, name))
        elif isinstance(value, dict | list):
            yield from _schema_patterns(value, (*at, key))


_IN_PLACE = ("allOf", "anyOf", "oneOf", "not", "if", "then", "else", "dependentSchemas")
"""Keywords whose sub-schemas apply to the same value (a ``$ref`` loop through only these never ends)."""
_DATA_KEYWORDS = ("enum", "const", "default", "examples")
"""Keywords whose values are data, not schemas."""


class SchemaRefs:
    """The ``$ref``s of a JSON Schema written in a team file: local only, resolvable, no endless loop.

    teamrun never fetches a schema over the network, so a ``$ref`` that is not
    a fragment of the same schema (``#/$defs/x``, ``#anchor``) is an error.
    """

    def __init__(self, schema: dict[str, Any]) -> None:
        self.schema = schema
        self.refs: list[tuple[JsonPath, str]] = []
        self.anchors: dict[str, JsonPath] = {}
        self._collect(schema, ())

    def _collect(self, node: Any, path: JsonPath) -> None:
        if isinstance(node, dict):
            for key, value in node.items():
                if key in ("$ref", "$dynamicRef") and isinstance(value, str):
                    self.refs.append(((*path, key), value))
                elif key in ("$anchor", "$dynamicAnchor") and isinstance(value, str):
                    self.anchors.setdefault(value, path)
                elif key not in _DATA_KEYWORDS:
                    self._collect(value, (*path, key))
        elif isinstance(node, list):
            for index, value in enumerate(node):
                self._collect(value, (*path, index))

    def target(self, ref: str) -> JsonPath | None:
        """Where a local ``$ref`` points (``None`` when it points nowhere)."""
        from urllib.parse import unquote

        fragment = unquote(ref[1:])
        if fragment and not fragment.startswith("/"):
            return self.anchors.get(fragment)
        node: Any = self.schema
        path: list[str | int] = []
        for token in fragment.split("/")[1:] if fragment else []:
            part = token.replace("~1", "/").replace("~0", "~")
            if isinstance(node, dict) and part in node:
                node = node[part]
                path.append(part)
            elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
                node = node[int(part)]
                path.append(int(part))
            else:
                return None
        return tuple(path) if isinstance(node, dict | bool) else None

    def problems(self) -> Iterator[tuple[JsonPath, str]]:
        for where, ref in self.refs:
            key = where[-1]
            if not ref.startswith("#"):
                yield (
                    where,
                    (
                        f"'{key}: {shorten(ref)}' refers outside this schema; teamrun never fetches schemas "
                        "(copy the definition under '$defs' and write '#/$defs/name')"
                    ),
                )
            elif self.target(ref) is None:
                yield where, f"'{key}: {shorten(ref)}' does not point at a schema in this one"
        yield from self._loops()

    def _node(self, path: JsonPath) -> Any:
        node: Any = self.schema
        for step in path:
            node = node[step]
        return node

    def _in_place(self, path: JsonPath) -> Iterator[tuple[JsonPath, JsonPath]]:
        """``(where, next)``: schemas applied to the same value as the one at ``path``."""
        node = self._node(path)
        if not isinstance(node, dict):
            return
        for key in _IN_PLACE:
            value = node.get(key)
            if isinstance(value, list) and key.endswith("Of"):
                yield from (((*path, key, i), (*path, key, i)) for i in range(len(value)))
            elif isinstance(value, dict) and key == "dependentSchemas":
                yield from (((*path, key, name), (*path, key, name)) for name in value)
            elif isinstance(value, dict) and not key.endswith("Of") and key != "dependentSchemas":
                yield (*path, key), (*path, key)
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith("#"):
            target = self.target(ref)
            if target is not None:
                yield (*path, "$ref"), target

    def _loops(self) -> Iterator[tuple[JsonPath, str]]:
        """A ``$ref`` that reaches its own schema again without descending into the value never ends."""
        state: dict[JsonPath, str] = {}
        for start, _ in self.refs:
            root = start[:-1]
            if root in state:
                continue
            state[root] = "active"
            stack: list[tuple[JsonPath, Iterator[tuple[JsonPath, JsonPath]]]] = [(root, self._in_place(root))]
            while stack:
                step = next(stack[-1][1], None)
                if step is None:
                    state[stack.pop()[0]] = "done"
                    continue
                where, target = step
                if state.get(target) == "active":
                    yield (
                        where,
                        (
                            "'$ref' leads back to the schema it is part of without going into a property "
                            "or an item (an endless loop)"
                        ),
                    )
                    return
                if target not in state:
                    state[target] = "active"
                    stack.append((target, self._in_place(target)))


class SemanticChecker:
    """Cross-reference, graph, template and sub-schema checks over one team file."""

    def __init__(self, file: str, text: str, data: Any, source_map: SourceMap) -> None:
        self.file = file
        self.lines = text.splitlines()
        self.data = _mapping(data)
        self.source_map = source_map
        self.agents = {k: _mapping(v) for k, v in _mapping(self.data.get("agents")).items()}
        self.tools = {k: _mapping(v) for k, v in _mapping(self.data.get("tools")).items()}
        supervisor = self.data.get("supervisor")
        self.supervisor = supervisor if isinstance(supervisor, str) else None
        """The supervisor's name when it is a string (the schema reports anything else)."""
        self.graph_complete = True
        """False once a delegates_to/handoffs entry is unusable: then reachability says nothing."""
        self.vars_read: set[str] = set()
        """The ``vars`` keys the templates read (filled by the template checks)."""

    def check(self, *, import_check: bool = False, given_vars: Iterable[str] = ()) -> list[Diagnostic]:
        """Every problem; ``given_vars``: the names of the run's ``--var`` values, checked against the file."""
        found = [
            *self._supervisor(),
            *self._references(),
            *self._cycles(),
            *self._depth(),
            *self._unused_agents(),
            *self._agent_details(),
            *self._budgets(),
            *self._tool_definitions(),
            *self._function_name_clashes(),
            *mcp_checks(self),
            *self._acceptance(),
            *workflow_checks(self),
            *workspace_checks(self),
        ]
        if import_check:
            found.extend(self._imports())
        found.extend(self._given_vars(given_vars))  # after the templates: they fill vars_read
        return found

    def _given_vars(self, given: Iterable[str]) -> Iterator[Diagnostic]:
        """A ``--var`` that sets nothing: its name is neither declared under ``vars:`` nor read by a template."""
        declared = self.data.get("vars")
        known = (
            sorted({str(k) for k in declared} | self.vars_read)
            if isinstance(declared, dict)
            else sorted(self.vars_read)
        )
        where: JsonPath = ("vars",) if isinstance(declared, dict) else ()
        for name in dict.fromkeys(given):
            if name in known:
                continue
            hint = did_you_mean(name, known)
            if not known:
                message = f"--var {name} sets nothing: this team declares no vars and its templates read none"
            else:
                listed = "" if hint else f" (its vars: {listing(known)})"
                message = f"--var {name} sets nothing: this team has no var '{name}'{hint}{listed}"
            yield self._warning(where, message, "vars", key=bool(where))

    # -- helpers ---------------------------------------------------------------------------

    def _error(self, path: JsonPath, message: str, rule: str, *, key: bool = False) -> Diagnostic:
        mark = self.source_map.key(path) if key else self.source_map.value(path)
        return Diagnostic(self.file, mark.line, mark.column, message, rule=rule)

    def _warning(self, path: JsonPath, message: str, rule: str, *, key: bool = False) -> Diagnostic:
        mark = self.source_map.key(path) if key else self.source_map.value(path)
        return Diagnostic(self.file, mark.line, mark.column, message, "warning", rule)

    # -- references and the delegation graph -------------------------------------------------

    def _supervisor(self) -> Iterator[Diagnostic]:
        name = self.supervisor
        if name is not None and self.agents and name not in self.agents and self._is_name(name):
            hint = did_you_mean(name, list(self.agents))
            yield self._error(
                ("supervisor",),
                f"supervisor '{name}' is not defined in agents{hint} (defined agents: {listing(list(self.agents))})",
                "reference",
            )

    def _references(self) -> Iterator[Diagnostic]:
        for agent, spec in self.agents.items():
            for field in ("delegates_to", "handoffs"):
                value = spec.get(field)
                if value is not None and len(_names(value)) != (len(value) if isinstance(value, list) else -1):
                    self.graph_complete = False
                seen: set[str] = set()
                for index, target in _names(value):
                    path = ("agents", agent, field, index)
                    if target == agent:
                        verb = "delegate to" if field == "delegates_to" else "hand off to"
                        yield self._error(path, f"agent '{agent}' cannot {verb} itself", "reference")
                    elif target not in self.agents:
                        self.graph_complete = False
                        if self._is_name(target):  # (else the schema reports the bad name)
                            yield self._error(path, self._unknown_agent(path, target), "reference")
                    elif target in seen:
                        yield self._warning(path, f"'{target}' is listed twice in {dotted(path[:-1])}", "reference")
                    seen.add(target)
            for index, tool in _names(spec.get("tools")):
                if tool in self.tools or not self._is_name(tool):
                    continue
                path = ("agents", agent, "tools", index)
                if tool in self.agents:
                    detail = f"; '{tool}' is an agent: list it under delegates_to"
                elif not self.tools:
                    detail = "; no tools are defined yet (add them under a top-level 'tools:' section)"
                else:
                    detail = did_you_mean(tool, list(self.tools)) + f" (defined tools: {listing(list(self.tools))})"
                yield self._error(path, f"{dotted(path)}: tool '{tool}' is not defined{detail}", "reference")

    @staticmethod
    def _is_name(name: str) -> bool:
        """Whether ``name`` is a well-formed agent name (else the schema reports it)."""
        from teamrun.config.schema import ecma_pattern, validation_schema

        return ecma_pattern(validation_schema()["properties"]["supervisor"]["pattern"]).search(name) is not None

    def _unknown_agent(self, path: JsonPath, target: str) -> str:
        message = f"{dotted(path)}: agent '{target}' is not defined"
        if target in self.tools:
            return message + f"; '{target}' is a tool: list it under tools"
        hint = did_you_mean(target, list(self.agents))
        return message + f"{hint} (defined agents: {listing(list(self.agents))})"

    def _edges(self, agent: str) -> list[tuple[int, str]]:
        return [(i, t) for i, t in _names(self.agents[agent].get("delegates_to")) if t in self.agents and t != agent]

    def _cycles(self) -> Iterator[Diagnostic]:
        """Each delegation cycle once, at the delegates_to entry that closes it (iterative DFS)."""
        state: dict[str, str] = {}  # "active" while on the DFS stack, "done" after
        reported: set[frozenset[str]] = set()
        for root in self.agents:
            if root in state:
                continue
            state[root] = "active"
            stack: list[tuple[str, Iterator[tuple[int, str]]]] = [(root, iter(self._edges(root)))]
            while stack:
                agent, edges = stack[-1]
                step = next(edges, None)
                if step is None:
                    stack.pop()
                    state[agent] = "done"
                    continue
                index, target = step
                if state.get(target) == "active":
                    names = [name for name, _ in stack]
                    loop = names[names.index(target) :]
                    if frozenset(loop) not in reported:
                        reported.add(frozenset(loop))
                        chain = " → ".join([*loop, target])
                        yield self._error(
                            ("agents", agent, "delegates_to", index),
                            f"delegation cycle: {chain}; delegation must form a tree "
                            "(use handoffs for agents that pass control back and forth)",
                            "cycle",
                        )
                elif target not in state:
                    state[target] = "active"
                    stack.append((target, iter(self._edges(target))))

    def _longest_chain(self, start: str) -> list[str]:
        """The longest delegation chain from ``start``; edges that close a cycle are ignored."""
        best: dict[str, list[str]] = {}
        on_stack = {start}
        stack: list[tuple[str, Iterator[tuple[int, str]]]] = [(start, iter(self._edges(start)))]
        while stack:
            agent, edges = stack[-1]
            step = next(edges, None)
            if step is None:
                stack.pop()
                on_stack.discard(agent)
                tails = [best[t] for _, t in self._edges(agent) if t in best and t not in on_stack]
                best[agent] = [agent, *max(tails, key=len, default=[])]
                continue
            target = step[1]
            if target not in best and target not in on_stack:
                on_stack.add(target)
                stack.append((target, iter(self._edges(target))))
        return best[start]

    def _depth(self) -> Iterator[Diagnostic]:
        limit = _mapping(self.data.get("limits")).get("max_depth")
        supervisor = self.supervisor
        if not isinstance(limit, int) or isinstance(limit, bool) or supervisor not in self.agents:
            return
        chain = self._longest_chain(supervisor)
        depth = len(chain) - 1
        if depth > limit:
            shown = chain if len(chain) <= 8 else [*chain[:4], "…", *chain[-3:]]
            yield self._error(
                ("limits", "max_depth"),
                f"the delegation chain {' → '.join(shown)} is {depth} levels deep, more than "
                f"limits.max_depth ({limit}); raise the limit or flatten the team",
                "depth",
            )

    def _unused_agents(self) -> Iterator[Diagnostic]:
        supervisor = self.supervisor
        if supervisor not in self.agents or not self.graph_complete or "workflow" in self.data:
            return  # (a workflow's unused agents: workflow_checks)
        reachable = {supervisor}
        frontier = [supervisor]
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

    # -- budgets -------------------------------------------------------------------------

    _RUN_WIDE = (
        "max_tool_calls",
        "max_delegations",
        "max_handoffs",
        "max_total_tokens",
        "max_input_tokens",
        "max_output_tokens",
        "max_cost_usd",
        "timeout_s",
    )
    """Limits a worker spends from the run's ledger: an agent's budget above the run's never applies."""

    def _budgets(self) -> Iterator[Diagnostic]:
        run = _mapping(self.data.get("limits"))
        for agent, spec in self.agents.items():
            budget = _mapping(spec.get("budget"))
            for key in self._RUN_WIDE:
                mine, theirs = _number(budget.get(key)), _number(run.get(key))
                if mine is not None and theirs is not None and mine > theirs:
                    yield self._warning(
                        ("agents", agent, "budget", key),
                        f"agents.{agent}.budget.{key} ({budget[key]}) is above limits.{key} ({run[key]}); "
                        "the run's limit is reached first",
                        "budget",
                    )
            delegation = _mapping(spec.get("delegation"))
            concurrency = _number(delegation.get("max_concurrency"))
            if delegation.get("parallel") is False and concurrency is not None and concurrency > 1:
                yield self._warning(
                    ("agents", agent, "delegation", "max_concurrency"),
                    "max_concurrency has no effect with parallel: false (delegations run one at a time)",
                    "budget",
                )

    # -- inside each agent ---------------------------------------------------------------

    def _agent_details(self) -> Iterator[Diagnostic]:
        for agent, spec in self.agents.items():
            base: JsonPath = ("agents", agent)
            yield from self._template((*base, "instructions"), spec.get("instructions"), INSTRUCTION_NAMES)
            yield from self._sub_schema((*base, "output_schema"), spec.get("output_schema"))
            delegation = _mapping(spec.get("delegation"))
            if delegation and spec.get("delegates_to") in (None, []):
                yield self._warning(
                    (*base, "delegation"),
                    f"agent '{agent}' has a delegation section but no delegates_to, so it never applies",
                    "unused",
                    key=True,
                )
            yield from self._template((*base, "delegation", "prompt"), delegation.get("prompt"), PROMPT_NAMES)
            yield from self._template(
                (*base, "delegation", "append_guidelines"), delegation.get("append_guidelines"), PROMPT_NAMES
            )
            if agent == self.supervisor and spec.get("memory") == "thread" and not self._delegated_to(agent):
                yield self._warning(
                    (*base, "memory"),
                    f"agents.{agent}.memory: thread does nothing on the supervisor: its conversation is the "
                    "thread itself (memory applies to workers)",
                    "unused",
                )
            workers = [w for _, w in _names(spec.get("delegates_to"))]
            background = delegation.get("background")
            for index, name in _names(background if isinstance(background, list) else None):
                if name not in workers:
                    yield self._error(
                        (*base, "delegation", "background", index),
                        f"agents.{agent}.delegation.background: '{name}' is not in agents.{agent}.delegates_to "
                        f"({', '.join(workers) or 'empty'}); only its workers can run in the background",
                        "reference",
                    )
            yield from self._message_filter((*base, "delegation", "message_filter"), delegation.get("message_filter"))
            hooks = _mapping(delegation.get("hooks"))
            for event, fields in HOOK_TEMPLATES.items():
                entries = hooks.get(event)
                if not isinstance(entries, list):
                    continue
                for index, entry in enumerate(entries):
                    hook_path = (*base, "delegation", "hooks", event, index)
                    hook = _mapping(entry)
                    yield from self._condition((*hook_path, "when"), hook.get("when"))
                    for field in fields:
                        yield from self._template((*hook_path, field), hook.get(field), HOOK_NAMES)
                    if hook and not (set(hook) - {"when"}):
                        actions = ", ".join(HOOK_ACTIONS[event])
                        yield self._error(
                            hook_path,
                            f"{dotted(hook_path)} has a condition but no action; add one of: {actions}",
                            "hook",
                        )

    def _delegated_to(self, name: str) -> bool:
        """Whether some agent delegates to or hands off to ``name``."""
        return any(
            name == target
            for spec in self.agents.values()
            for field in ("delegates_to", "handoffs")
            for _, target in _names(spec.get(field))
        )

    def _accept_owners(self) -> Iterator[tuple[JsonPath, dict[str, Any]]]:
        """The team and each agent: whoever may hold ``accept:`` and ``max_attempts``."""
        yield (), self.data
        for agent, spec in self.agents.items():
            yield ("agents", agent), spec

    def _acceptance(self) -> Iterator[Diagnostic]:
        from teamrun.config.answer_checks import check_cautions, check_problems

        for base, spec in self._accept_owners():
            checks = spec.get("accept")
            for index, check in enumerate(checks if isinstance(checks, list) else []):
                for path, message, key in check_problems((*base, "accept", index), check):
                    yield self._error(path, message, "accept", key=key)
                for path, message in check_cautions((*base, "accept", index), check):
                    yield self._warning(path, message, "regex")
                if isinstance(check, dict) and check.get("contains") == "":
                    where = (*base, "accept", index, "contains")
                    yield self._warning(where, f"{dotted(where)} is empty, so this check always passes", "accept")
            if "max_attempts" in spec and not checks:
                yield self._warning(
                    (*base, "max_attempts"),
                    f"{dotted((*base, 'max_attempts'))} has no effect without {dotted((*base, 'accept'))} checks",
                    "unused",
                    key=True,
                )

    def _message_filter(self, path: JsonPath, spec: Any) -> Iterator[Diagnostic]:
        for index, pattern in _names(_mapping(spec).get("drop_matching")):
            verdict = judge_regex(pattern)
            where = (*path, "drop_matching", index)
            if verdict.error is not None:
                yield self._error(
                    where,
                    f"{dotted(where)}: invalid regular expression '{shorten(pattern)}': {verdict.error}",
                    "regex",
                )
            elif verdict.caution is not None:
                yield self._warning(
                    where, f"{dotted(where)}: regular expression '{shorten(pattern)}': {verdict.caution}", "regex"
                )

    def _template(self, path: JsonPath, source: Any, names: tuple[str, ...]) -> Iterator[Diagnostic]:
        if not isinstance(source, str):
            return
        try:
            templates.syntax_check(source)
            uses = templates.names_used(source)
            ranges = templates.range_sizes(source)
        except templates.TemplateSyntaxError as exc:
            template_line = exc.lineno or 1
            line, column = self._template_position(path, template_line, source)
            where = f" (template line {template_line})" if "\n" in source.rstrip("\n") else ""
            yield Diagnostic(
                self.file,
                line,
                column,
                f"template error in {dotted(path)}: {_template_message(exc.message)}{where}",
                rule="template",
            )
            return
        for template_line, size in ranges:
            if size > templates.MAX_RANGE:
                line, column = self._find(path, source, template_line, r"\brange\s*\(")
                yield Diagnostic(
                    self.file,
                    line,
                    column,
                    f"template error in {dotted(path)}: range() of {size} items is more than "
                    f"a template may use ({templates.MAX_RANGE})",
                    rule="template",
                )
        yield from self._names(path, source, uses, names, kind="template")

    def _condition(self, path: JsonPath, source: Any) -> Iterator[Diagnostic]:
        if not isinstance(source, str):
            return
        try:
            templates.compile_condition(source)
            uses = templates.names_used(source, expression=True)
        except templates.TemplateSyntaxError as exc:
            if "{{" in source or "{%" in source:
                detail = "write the expression itself, without '{{ }}' or '{% %}'"
            else:
                detail = _template_message(exc.message)
                detail = detail.replace("'end of template'", "end of the expression")
                detail = detail.replace("chunk after expression", "unexpected text after the expression")
            yield self._error(path, f"invalid condition in {dotted(path)} '{shorten(source)}': {detail}", "template")
            return
        yield from self._names(path, source, uses, HOOK_NAMES, kind="condition")

    def _names(
        self, path: JsonPath, source: str, uses: list[templates.NameUse], names: tuple[str, ...], *, kind: str
    ) -> Iterator[Diagnostic]:
        """Unknown names (errors) and ``vars`` keys the file does not declare, where they are used.

        Both fail every run (undefined names are errors when rendering); an unknown
        name in a ``when:`` would instead make the hook fail and be skipped silently.
        """
        declared = self.data.get("vars")
        self.vars_read.update(use.key for use in uses if use.name == "vars" and use.key is not None)
        for use in uses:
            if use.key is None and use.name not in names:
                line, column = self._find(path, source, use.line, rf"(?<![\w.]){re.escape(use.name)}\b")
                hint = did_you_mean(use.name, names)
                message = (
                    f"{dotted(path)} uses '{use.name}', which is not defined {_WHERE[kind]}{hint} "
                    f"(names available: {', '.join(names)})"
                )
                yield Diagnostic(self.file, line, column, message, rule=kind)
            elif use.key is not None and use.name in names and not (isinstance(declared, dict) and use.key in declared):
                key = re.escape(use.key)
                line, column = self._find(path, source, use.line, rf"\bvars\s*(?:\.\s*{key}\b|\[\s*['\"]{key}['\"])")
                if isinstance(declared, dict):
                    hint = did_you_mean(use.key, [str(k) for k in declared])
                    known = "" if hint else f" (declared: {listing([str(k) for k in declared])})"
                    yield Diagnostic(
                        self.file,
                        line,
                        column,
                        f"{dotted(path)} uses vars.{use.key}, which is not declared under 'vars:'{hint}{known} "
                        "(declare every variable there; --var overrides its value)",
                        rule="vars",
                    )
                elif declared is None:
                    yield Diagnostic(
                        self.file,
                        line,
                        column,
                        f"{dotted(path)} uses vars.{use.key}, but the file has no 'vars:' section: every run "
                        f"must pass --var {use.key}=... (declare it under 'vars:' to give it a default)",
                        "warning",
                        "vars",
                    )

    def _find(self, path: JsonPath, source: str, template_line: int, pattern: str) -> tuple[int, int]:
        """Where ``pattern`` first matches on line ``template_line`` of a template value in the file."""
        line, column = self._template_position(path, template_line, source)
        text = self.lines[line - 1] if 0 < line <= len(self.lines) else ""
        found = re.compile(pattern).search(text, column - 1) or re.compile(pattern).search(text)
        return (line, found.start() + 1) if found else (line, column)

    def _template_position(self, path: JsonPath, template_line: int, source: str) -> tuple[int, int]:
        """The file line and column where line ``template_line`` of a template value starts."""
        mark = self.source_map.value(path)
        style = self._char(mark.line, mark.column)
        if template_line <= 1 and not mark.block:
            return mark.line, mark.column
        if mark.block and style == "|":
            line = mark.line + template_line  # literal block text starts below the `|`
            return line, self._indent(line) + 1
        # Folded text (`>` blocks, multi-line plain and quoted values): a single line break
        # becomes a space and each blank line a newline, so count blank lines.
        first = mark.line + 1 if mark.block else mark.line
        current, pending, line = 1, 0, first
        for line in range(first, min(len(self.lines), first + source.count("\n") * 2 + 50) + 1):
            text = self.lines[line - 1] if line <= len(self.lines) else ""
            if not text.strip():
                pending += 1
                continue
            if line != first:
                current += pending
            pending = 0
            if current >= template_line:
                return line, (mark.column if line == mark.line else self._indent(line) + 1)
        return line, self._indent(line) + 1

    def _char(self, line: int, column: int) -> str:
        text = self.lines[line - 1] if 0 < line <= len(self.lines) else ""
        return text[column - 1] if 0 < column <= len(text) else ""

    def _indent(self, line: int) -> int:
        text = self.lines[line - 1] if 0 < line <= len(self.lines) else ""
        return len(text) - len(text.lstrip())

    def _sub_schema(self, path: JsonPath, schema: Any) -> Iterator[Diagnostic]:
        if not isinstance(schema, dict):
            return
        from teamrun.config.schema import describe_type, describe_value

        for where, problem in SchemaRefs(schema).problems():
            yield self._error((*path, *where), f"{dotted(path)} is not a valid JSON Schema: {problem}", "output_schema")

        seen: set[tuple[JsonPath, str]] = set()
        for error in _meta_validator().iter_errors(schema):
            inner: JsonPath = tuple(error.absolute_path)
            if (inner, error.message) in seen:
                continue  # the meta-schema reaches some keywords along several routes
            seen.add((inner, error.message))
            sub = f"'{dotted(inner)}'"
            if inner and inner[-1] == "type" and isinstance(error.instance, str):
                types = "; types are: " + ", ".join(_JSON_TYPES)
                detail = f"unknown type '{error.instance}'" + (did_you_mean(error.instance, _JSON_TYPES) or types)
            elif error.validator == "type":
                expected = describe_type(error.validator_value)
                detail = f"{sub} must be {expected}, not {describe_value(error.instance)}"
            elif error.validator in ("minimum", "exclusiveMinimum"):
                sign = ">=" if error.validator == "minimum" else ">"
                detail = f"{sub} must be {sign} {error.validator_value}, not {error.instance}"
            elif error.validator == "format" and error.validator_value == "regex":
                detail = f"{sub} is not a valid regular expression: '{error.instance}'"
            elif inner:
                detail = f"{sub}: {error.message}"
            else:
                detail = error.message
            yield self._error(
                (*path, *inner),
                f"{dotted(path)} is not a valid JSON Schema: {detail}",
                "output_schema",
            )
        for inner, pattern, at_key in _schema_patterns(schema):
            caution = judge_regex(pattern).caution
            if caution is not None:
                yield self._warning(
                    (*path, *inner),
                    f"{dotted((*path, *inner))}: regular expression '{shorten(pattern)}': {caution}",
                    "regex",
                    key=at_key,
                )

    # -- tools -----------------------------------------------------------------------------

    def _tool_definitions(self) -> Iterator[Diagnostic]:
        for name, spec in self.tools.items():
            path: JsonPath = ("tools", name)
            kinds = [k for k in _TOOL_KEYS if k in spec]
            if len(kinds) > 1:
                yield self._error(
                    path,
                    f"tool '{name}' has both " + " and ".join(f"'{k}:'" for k in kinds) + "; keep one",
                    "tool",
                    key=True,
                )
            elif not kinds and not any(did_you_mean(key, _TOOL_KEYS) for key in spec):
                # (a misspelt `comand:` is reported as an unknown key instead)
                yield self._error(
                    path,
                    f"tool '{name}' needs 'python:' (a function), 'command:' (an argv list), 'mcp:' (an MCP server) "
                    "or 'person:' (a person to ask)",
                    "tool",
                    key=True,
                )
            person = _mapping(spec.get("person"))
            if "answer_schema" in person:
                yield from self._sub_schema((*path, "person", "answer_schema"), person["answer_schema"])
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
                yield self._error(
                    path,
                    f"template error in {dotted(path)}: {_template_message(exc.message)}",
                    "template",
                )
                continue
            for unknown in sorted(names - parameters):
                hint = did_you_mean(unknown, sorted(parameters))
                declared = f" (parameters: {listing(sorted(parameters))})" if parameters and not hint else ""
                yield self._error(
                    path,
                    f"{dotted(path)} uses '{{{{ {unknown} }}}}' but tool '{tool}' has no "
                    f"parameter '{unknown}'{hint}{declared}",
                    "template",
                )

    def _function_name_clashes(self) -> Iterator[Diagnostic]:
        """Two functions of one name offered to one agent's model (``tool_names`` owns the rules)."""
        from teamrun.config.tool_names import describe, team_clashes

        for agent, pairs in team_clashes(_team_as_read(self.agents, self.tools)).items():
            for first, later in pairs:
                if "mcp" in (first.origin, later.origin):
                    continue  # an MCP server's tools: reported by mcp_checks, located at the entry
                if (first.origin, first.source) == (later.origin, later.source):
                    if later.origin == "tool":  # (twice in delegates_to or handoffs is warned about above)
                        twice: JsonPath = ("agents", agent, "tools", self._indexes(agent, "tools", later.source)[-1])
                        message = f"'{later.source}' is listed twice in agents.{agent}.tools"
                        yield self._warning(twice, message, "reference")
                    continue
                path = self._offered_path(agent, later) or self._offered_path(agent, first) or ("agents", agent)
                yield self._error(
                    path,
                    f"agents.{agent}: {describe(later)} and {describe(first)} would both be offered to the model "
                    f"as '{later.name}'; rename the tool (a model cannot tell two functions of one name apart)",
                    "tool_name",
                )

    def _offered_path(self, agent: str, item: Any) -> JsonPath | None:
        """Where an offered function comes from in the file: the tools item, else the delegates_to/handoffs item."""
        if item.origin == "background":
            return ("agents", agent, "delegation", "background")
        field = {"tool": "tools", "delegation": "delegates_to", "handoff": "handoffs"}[item.origin]
        indexes = self._indexes(agent, field, item.source)
        return ("agents", agent, field, indexes[0]) if indexes else None

    def _indexes(self, agent: str, field: str, name: str) -> list[int]:
        return [index for index, value in _names(self.agents[agent].get(field)) if value == name]

    def _imports(self) -> Iterator[Diagnostic]:
        import contextlib
        import sys
        from pathlib import Path

        from teamrun.config.imports import ImportProblem, resolve_import_path

        base_dir = Path(self.file).resolve().parent
        for path, reference in self._import_references():
            try:
                # whatever user modules print while importing must not mix into the report
                with contextlib.redirect_stdout(sys.stderr):
                    resolve_import_path(reference, base_dir=base_dir, keep_on_path=False)
            except ImportProblem as exc:
                yield self._error(path, f"{dotted(path)}: {exc}", "import")

    def _import_references(self) -> Iterator[tuple[JsonPath, str]]:
        """Every well-formed import path (a malformed one is already a schema error)."""
        from teamrun.config.schema import ecma_pattern, validation_schema

        pattern = ecma_pattern(validation_schema()["$defs"]["ToolDef"]["properties"]["python"]["pattern"])
        for path, reference in self._all_import_references():
            if pattern.search(reference):
                yield path, reference

    def _all_import_references(self) -> Iterator[tuple[JsonPath, str]]:
        for name, spec in self.tools.items():
            if isinstance(spec.get("python"), str):
                yield ("tools", name, "python"), spec["python"]
        for base, owner in self._accept_owners():
            checks = owner.get("accept")
            for index, check in enumerate(checks if isinstance(checks, list) else []):
                if isinstance(_mapping(check).get("python"), str):
                    yield (*base, "accept", index, "python"), check["python"]
        for agent, spec in self.agents.items():
            delegation = _mapping(spec.get("delegation"))
            mf = _mapping(delegation.get("message_filter"))
            if isinstance(mf.get("python"), str):
                yield ("agents", agent, "delegation", "message_filter", "python"), mf["python"]
            hooks = _mapping(delegation.get("hooks"))
            for event in HOOK_POINTS:
                entries = hooks.get(event)
                for index, hook in enumerate(entries if isinstance(entries, list) else []):
                    call = _mapping(hook).get("call")
                    if isinstance(call, str):
                        yield ("agents", agent, "delegation", "hooks", event, index, "call"), call


def mcp_checks(checker: SemanticChecker) -> Iterator[Diagnostic]:
    """MCP server entries: one transport, keys that fit it, and the function names they add."""
    only_mcp = ("allow", "deny", "prefix", "fixed_arguments")
    for name, spec in checker.tools.items():
        path: JsonPath = ("tools", name)
        server = spec.get("mcp")
        if not isinstance(server, dict):
            for key in [k for k in only_mcp if k in spec]:
                yield checker._error(
                    (*path, key), f"{dotted((*path, key))} only applies to MCP servers ('mcp:')", "tool", key=True
                )
            if isinstance(spec.get("require_approval"), list):
                yield checker._error(
                    (*path, "require_approval"),
                    f"{dotted((*path, 'require_approval'))}: a list "
                    "of tool names only applies to MCP servers; use true or false",
                    "tool",
                )
            continue
        where = dotted((*path, "mcp"))
        if "command" in server and "url" in server:
            yield checker._error((*path, "mcp"), f"{where} has both 'command:' and 'url:'; keep one", "tool", key=True)
        elif "command" not in server and "url" not in server:
            yield checker._error(
                (*path, "mcp"),
                f"{where} needs 'command:' (a program, over stdio) or 'url:' (a streamable HTTP endpoint)",
                "tool",
                key=True,
            )
        else:
            yield from _mcp_program(checker, path, server)
        wrong = [("env", "url"), ("cwd", "url"), ("headers", "command")]
        for key in [k for k, other in wrong if k in server and other in server]:
            kind = "stdio servers ('command:')" if key != "headers" else "HTTP servers ('url:')"
            yield checker._error((*path, "mcp", key), f"{where}.{key} only applies to {kind}", "tool", key=True)
        for key in [k for k in ("parameters", "cwd") if k in spec]:
            hint = "set mcp.cwd" if key == "cwd" else "the server's tools bring their own parameters"
            yield checker._error(
                (*path, key), f"{dotted((*path, key))} does not apply to an MCP server: {hint}", "tool", key=True
            )
        allowed = {tool for _, tool in _names(spec.get("allow"))}
        for index, tool in _names(spec.get("deny")):
            if tool in allowed:
                yield checker._warning(
                    (*path, "deny", index), f"'{tool}' is both allowed and denied; it is not offered", "tool"
                )
        if spec.get("allow") == []:
            yield checker._warning((*path, "allow"), f"tool '{name}' allows no tool of its MCP server", "tool")
    yield from _mcp_clashes(checker)


def _mcp_program(checker: SemanticChecker, path: JsonPath, server: dict[str, Any]) -> Iterator[Diagnostic]:
    """A stdio server whose program is not installed here: a warning (CI may validate where it is not)."""
    from teamrun.config.programs import missing_program

    command, env, cwd = server.get("command"), server.get("env"), server.get("cwd")
    if isinstance(command, list) and (env is None or isinstance(env, dict)):
        where = Path(checker.file).parent / cwd if isinstance(cwd, str) else None
        why = missing_program(command, env=env, cwd=where)
        if why is not None:
            yield checker._warning(
                (*path, "mcp", "command", 0),
                f"{dotted((*path, 'mcp', 'command'))}: {why}; the run would stop before it starts",
                "program",
            )


def _mcp_clashes(checker: SemanticChecker) -> Iterator[Diagnostic]:
    """Function names an MCP entry's ``allow`` list adds that another function of the agent already has."""
    from teamrun.config.tool_names import (
        DELEGATE_TASK,
        delegation_tool_name,
        handoff_tool_name,
        mcp_function_name,
    )

    for agent, spec in checker.agents.items():
        delegation = _mapping(spec.get("delegation"))
        workers = [w for _, w in _names(spec.get("delegates_to"))]
        owners: dict[str, str] = {}
        if workers and delegation.get("tool") == "delegate_task":
            owners[DELEGATE_TASK] = "the delegation tool"
        owners.update({delegation_tool_name(w): f"the delegation tool for '{w}'" for w in workers})
        owners.update({handoff_tool_name(a): f"the handoff tool for '{a}'" for _, a in _names(spec.get("handoffs"))})
        entries = [(i, e) for i, e in _names(spec.get("tools")) if e in checker.tools]
        owners.update({e: f"the tool '{e}'" for _, e in entries if "mcp" not in checker.tools[e]})
        for index, entry in entries:
            tool_spec = checker.tools[entry]
            if not isinstance(tool_spec.get("mcp"), dict) or not isinstance(tool_spec.get("allow"), list):
                continue
            given = tool_spec.get("prefix")
            prefix = given if isinstance(given, str) else f"{entry}_"
            denied = {t for _, t in _names(tool_spec.get("deny"))}
            for _, tool in _names(tool_spec["allow"]):
                function = mcp_function_name(prefix, tool)
                mine = f"the tool '{tool}' of MCP server '{entry}'"
                if tool in denied:
                    continue
                if function in owners:
                    yield checker._error(
                        ("agents", agent, "tools", index),
                        f"agent '{agent}' would be offered two functions named '{function}': {owners[function]} "
                        f"and {mine}; set tools.{entry}.prefix or leave the tool out of allow",
                        "tool",
                    )
                owners.setdefault(function, mine)


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


def _team_as_read(agents: dict[str, dict[str, Any]], tools: dict[str, dict[str, Any]]) -> TeamConfig:
    """What :mod:`teamrun.config.tool_names` reads of a team, taken from the file's mappings.

    The fields it reads, with the models' defaults, and only well-formed values (a malformed one is the
    schema's to report). Building the pydantic models instead would cost ``validate`` more than all the
    rest of its checks; ``tests/config/test_name_clash_view.py`` checks both give the same clashes.
    """

    def listed(value: Any) -> list[str]:
        return [name for _, name in _names(value)]

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


def check_semantics(
    file: str,
    text: str,
    data: Any,
    source_map: SourceMap,
    *,
    import_check: bool = False,
    given_vars: Iterable[str] = (),
) -> list[Diagnostic]:
    """Every semantic problem in one loaded team file (``given_vars``: the names of the run's ``--var``)."""
    return SemanticChecker(file, text, data, source_map).check(import_check=import_check, given_vars=given_vars)


__all__ = ["SemanticChecker", "check_semantics", "mcp_checks"]
