"""Semantic checks of a team file's ``workflow:``, each located at ``file:line:col``.

What the schema cannot say: which keys a step may combine, agents and teams
that are not defined, step ids used twice, templates that read a step that has
not run yet (or a field its agent's ``output_schema`` lacks), a ``map`` over
something that is not a list, a ``route`` on a field the output does not have
and branches its values can never reach, agents no step runs.
Like the other checks they read the raw data defensively: a value of the wrong
type is skipped (the schema has reported it).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from teamrun.config import templates
from teamrun.config.checks.raw import mapping, sequence
from teamrun.config.checks.references import is_agent_name
from teamrun.config.checks.templates import find, template, unknown_names
from teamrun.config.checks.workflow_workspace import reads_checks, write_checks
from teamrun.config.diagnostics import Diagnostic, JsonPath, did_you_mean, dotted, listing
from teamrun.config.route_keys import branch_key
from teamrun.config.workflow_workspace import WORKSPACE_NAME

if TYPE_CHECKING:
    from teamrun.config.checks.context import CheckContext

__all__ = ["STEP_NAMES", "workflow_checks"]

STEP_NAMES = ("input", "vars", "today", "steps", "history", WORKSPACE_NAME)
"""What a step's ``input`` (and the workflow's ``output``) reads; a map item adds ``item`` and ``index``,
a loop's steps ``iteration`` and ``feedback``. (``workspace`` is checked by ``checks.workflow_workspace``.)"""
_MAP_NAMES = ("item", "index")
_LOOP_NAMES = ("iteration", "feedback")
_STEP_FIELDS = ("output", "text", "status", "error", "branch", "choice", "iterations", "passed", "errors")


@dataclass(frozen=True)
class _Known:
    """A step later steps may read: what its ``output`` is."""

    kind: str
    """``text``, ``structured`` (its agent has an ``output_schema``), ``list`` (a map), ``route``."""
    schema: dict[str, Any] = field(default_factory=dict)


@dataclass
class _Walk:
    """The steps visible at a point of the workflow, and what the walk found."""

    visible: dict[str, _Known]
    names: tuple[str, ...] = STEP_NAMES
    later: frozenset[str] = frozenset()
    """Loop body steps visible only from the iteration before (this step and those after it in the body):
    a read of one must be guarded with ``iteration``."""


class WorkflowChecker:
    """Checks one file's ``workflow:`` with the semantic checker's locating helpers."""

    def __init__(self, checker: CheckContext) -> None:
        self.c = checker
        self.workflow = checker.data.get("workflow")
        self.ids: dict[str, JsonPath] = {}
        self.used: set[str] = set()

    def check(self) -> Iterator[Diagnostic]:
        data = self.c.data
        if not data:
            return
        if self.workflow is None:
            if "supervisor" not in data and "peers" not in data:
                yield self.c.error(
                    (),
                    "the team file is missing the required key 'supervisor': the agent that "
                    "receives the user's input, e.g. 'supervisor: lead'",
                    "schema",
                )
            return
        if not isinstance(self.workflow, dict):
            return
        if "supervisor" in data:
            yield self.c.error(
                ("supervisor",),
                "a file with 'workflow:' runs its steps, not a supervisor: remove "
                "'supervisor:' (a supervisor with its workers is a step: `- team: <agent>`)",
                "reference",
                key=True,
            )
        if "accept" in data:
            yield self.c.warning(
                ("accept",),
                "the top-level accept: checks a supervisor's answer and a workflow "
                "has none: check the steps' agents with their own accept:, or loop over steps "
                "with until:",
                "workflow",
                key=True,
            )
        walk = _Walk({})
        yield from self._chain(("workflow", "steps"), sequence(self.workflow.get("steps")), walk)
        yield from self._template(("workflow", "output"), self.workflow.get("output"), walk)
        yield from self._unused()

    # -- steps -----------------------------------------------------------------------------------

    def _chain(self, path: JsonPath, steps: list[Any], walk: _Walk) -> Iterator[Diagnostic]:
        for index, raw in enumerate(steps):
            step = mapping(raw)
            if step:
                yield from self._step((*path, index), step, walk)

    def _step(self, path: JsonPath, step: dict[str, Any], walk: _Walk) -> Iterator[Diagnostic]:
        runs = [k for k in ("agent", "team") if k in step]
        loop = step.get("loop")
        if loop is not None:
            extra = [k for k in ("agent", "team", "map", "route", "input", "max_concurrency") if k in step]
            if extra:
                yield self.c.error(
                    (*path, extra[0]),
                    f"{dotted(path)}: a loop step has only 'loop' (and 'id'); put '{extra[0]}' on a step in loop.steps",
                    "workflow",
                    key=True,
                )
        elif len(runs) != 1:
            detail = "has both 'agent' and 'team'" if runs else "runs nothing"
            yield self.c.error(
                path, f"{dotted(path)} {detail}: give a step exactly one of 'agent', 'team' or 'loop'", "workflow"
            )
        if "map" in step and "route" in step:
            yield self.c.error(
                (*path, "route"),
                f"{dotted(path)}: a step cannot both map and route; route in the next step",
                "workflow",
                key=True,
            )
        if "max_concurrency" in step and "map" not in step:
            yield self.c.error(
                (*path, "max_concurrency"),
                f"{dotted(path)}: max_concurrency applies to a 'map' step only",
                "workflow",
                key=True,
            )
        agent = next((step[k] for k in runs if isinstance(step[k], str)), None)
        kind = runs[0] if runs else "agent"
        if agent is not None:
            yield from self._agent((*path, kind), kind, agent)
        name = step.get("id") if isinstance(step.get("id"), str) else agent or ("loop" if loop is not None else None)
        if isinstance(name, str):
            if name in self.ids:
                yield self.c.error(
                    (*path, "id") if "id" in step else (*path, kind),
                    f"{dotted(path)}: step id '{name}' is used by {dotted(self.ids[name])} too; "
                    "give each step its own 'id'",
                    "workflow",
                )
            else:
                self.ids[name] = path
        yield from write_checks(self.c, path, step, sequence(mapping(loop).get("steps")))
        if isinstance(loop, dict):
            yield from self._loop(path, loop, walk)
            body = [s for s in sequence(loop.get("steps")) if isinstance(s, dict)]
            last = self._known(body[-1]) if body else _Known("text")
            walk.visible[name or "loop"] = last
            return
        names = (*walk.names, *_MAP_NAMES) if "map" in step else walk.names
        yield from self._template((*path, "input"), step.get("input"), _Walk(walk.visible, names, walk.later))
        if "map" in step:
            yield from self._map((*path, "map"), step.get("map"), walk)
        if isinstance(step.get("route"), dict):
            yield from self._route(path, step, agent, name, walk)
        if isinstance(name, str):
            walk.visible[name] = _Known("list") if "map" in step else self._known(step)

    def _agent(self, path: JsonPath, kind: str, agent: str) -> Iterator[Diagnostic]:
        agents = self.c.agents
        if agent not in agents:
            if is_agent_name(agent):
                hint = did_you_mean(agent, list(agents))
                yield self.c.error(
                    path,
                    f"{dotted(path)}: agent '{agent}' is not defined{hint} (defined agents: {listing(list(agents))})",
                    "reference",
                )
            return
        self.used.add(agent)
        if kind == "team":
            workers = [w for w in sequence(agents[agent].get("delegates_to")) if isinstance(w, str)]
            if not workers:
                yield self.c.warning(
                    path,
                    f"{dotted(path)}: '{agent}' has no delegates_to, so it is no team; write `agent: " + agent + "`",
                    "workflow",
                )
            self._reach(workers)

    def _reach(self, names: list[str]) -> None:
        frontier = [n for n in names if n in self.c.agents and n not in self.used]
        while frontier:
            name = frontier.pop()
            self.used.add(name)
            spec = self.c.agents[name]
            for key in ("delegates_to", "handoffs"):
                frontier += [
                    t
                    for t in sequence(spec.get(key))
                    if isinstance(t, str) and t in self.c.agents and t not in self.used and t not in frontier
                ]

    def _schema(self, agent: Any) -> dict[str, Any] | None:
        if not isinstance(agent, str) or agent not in self.c.agents:
            return None
        schema = self.c.agents[agent].get("output_schema")
        return schema if isinstance(schema, dict) else None

    def _known(self, step: dict[str, Any]) -> _Known:
        if "map" in step:
            return _Known("list")
        if isinstance(step.get("route"), dict):
            return _Known("route")  # a branch's output: any of its last steps'
        schema = self._schema(step.get("agent") or step.get("team"))
        return _Known("structured", schema) if schema is not None else _Known("text")

    def _loop(self, path: JsonPath, loop: dict[str, Any], walk: _Walk) -> Iterator[Diagnostic]:
        # (a loop without max_iterations is the schema's error; its steps are still checked, their agents used)
        # a body step may read every body step: a later one's output is the previous iteration's
        # (guard it with `{% if iteration > 1 %}`: at the first iteration it has not run)
        for raw in sequence(loop.get("steps")):
            step = mapping(raw)
            name = step.get("id") or step.get("agent") or step.get("team")
            if isinstance(name, str) and "loop" not in step:
                walk.visible.setdefault(name, self._known(step))
        body = sequence(loop.get("steps"))
        names = [mapping(raw).get("id") or mapping(raw).get("agent") or mapping(raw).get("team") for raw in body]
        for index, raw in enumerate(body):
            later = frozenset(n for n in names[index:] if isinstance(n, str))
            inner = _Walk(walk.visible, (*walk.names, *_LOOP_NAMES), later | walk.later)
            if mapping(raw):
                yield from self._step((*path, "loop", "steps", index), mapping(raw), inner)

    def _route(self, path: JsonPath, step: dict[str, Any], agent: Any, name: Any, walk: _Walk) -> Iterator[Diagnostic]:
        route = step["route"]
        on = route.get("on")
        schema = self._schema(agent)
        properties = mapping(schema.get("properties")) if schema is not None else {}
        if isinstance(agent, str) and agent in self.c.agents and schema is None:
            yield self.c.error(
                (*path, "route"),
                f"{dotted(path)}: route needs a structured output, but agent "
                f"'{agent}' has no output_schema (give it one with a '{on}' field)",
                "workflow",
                key=True,
            )
        elif isinstance(on, str) and schema is not None and on not in properties:
            hint = did_you_mean(on, list(properties))
            yield self.c.error(
                (*path, "route", "on"),
                f"{dotted(path)}.route.on: '{on}' is not a field of "
                f"{agent}'s output_schema{hint} (fields: {listing(list(properties))})",
                "workflow",
            )
        allowed = _values(mapping(properties.get(on))) if isinstance(on, str) else None
        branches = mapping(route.get("branches"))
        if allowed is not None:
            for branch in branches:
                if branch not in allowed:
                    yield self.c.warning(
                        (*path, "route", "branches", branch),
                        f"{dotted(path)}.route.branches.{branch} is unreachable: {on} is one of {listing(allowed)}",
                        "workflow",
                        key=True,
                    )
        inside = dict(walk.visible)
        if isinstance(name, str):
            inside[name] = _Known("structured", schema) if schema is not None else _Known("text")
        for branch, steps in branches.items():
            yield from self._chain(
                (*path, "route", "branches", branch), sequence(steps), _Walk(dict(inside), walk.names)
            )
        yield from self._chain(
            (*path, "route", "default"), sequence(route.get("default")), _Walk(dict(inside), walk.names)
        )

    # -- templates and map expressions ------------------------------------------------------------------

    def _template(self, path: JsonPath, source: Any, walk: _Walk) -> Iterator[Diagnostic]:
        if not isinstance(source, str):
            return
        found = list(template(self.c, path, source, walk.names))
        yield from found
        yield from reads_checks(self.c, path, source)
        if found or templates.is_plain_text(source):
            return
        yield from self._references(path, source, templates.environment().parse(source), walk)

    def _map(self, path: JsonPath, source: Any, walk: _Walk) -> Iterator[Diagnostic]:
        if not isinstance(source, str):
            return
        try:
            tree = templates.environment().parse("{{ " + source + " }}")
            uses = templates.names_used(source, expression=True)
        except templates.TemplateSyntaxError as exc:
            yield self.c.error(path, f"{dotted(path)}: '{source}' is no expression: {exc.message}", "workflow")
            return
        found = list(unknown_names(self.c, path, source, uses, walk.names, kind="template"))
        yield from found
        yield from reads_checks(self.c, path, source, expression=True)
        if any(d.severity == "error" for d in found):
            return  # (a var no 'vars:' declares is a warning: it still is no list)
        yield from self._references(path, source, tree, walk)
        outputs = getattr(tree.body[0], "nodes", None) if tree.body else None
        body = outputs[0] if outputs else None
        chain = _chain(body) if body is not None else None
        if chain is None:
            return
        not_list = self._not_a_list(chain, walk)
        if not_list is not None:
            yield self.c.error(
                path,
                f"{dotted(path)}: '{source}' is {not_list}, not a list; map over a list "
                "(an output_schema field of type array, or a map step's output)",
                "workflow",
            )

    def _not_a_list(self, chain: list[str], walk: _Walk) -> str | None:
        """What the map expression gives when it can be told from the file and is not a list."""
        if chain == ["input"]:
            return "the run's input (text)"
        if chain[0] == "vars" and len(chain) == 2:
            return "a var (vars hold single values)"
        if chain[0] != "steps" or len(chain) < 3 or chain[1] not in walk.visible:
            return None
        known = walk.visible[chain[1]]
        if chain[2] == "text":
            return f"the text of step '{chain[1]}'"
        if known.kind == "route":
            return None
        if chain[2] != "output":
            return None
        if len(chain) == 3:
            return (
                None
                if known.kind == "list"
                else (
                    f"the whole output of step '{chain[1]}' (an object)"
                    if known.kind == "structured"
                    else f"the output of step '{chain[1]}' (text: its agent has no output_schema)"
                )
            )
        if known.kind != "structured" or len(chain) != 4:
            return None
        kind = mapping(mapping(known.schema.get("properties")).get(chain[3])).get("type")
        return (
            None
            if kind in (None, "array") or (isinstance(kind, list) and "array" in kind)
            else (f"field '{chain[3]}' of the output of step '{chain[1]}' (type {kind})")
        )

    def _references(self, path: JsonPath, source: str, tree: Any, walk: _Walk) -> Iterator[Diagnostic]:
        """``steps.<id>...`` reads: the step must have run before, the field must be in its output_schema."""
        said: set[str] = set()
        for node, chain in _chains(tree):
            if chain[0] != "steps" or len(chain) < 2:
                continue
            step = chain[1]
            message = None
            if step not in walk.visible:
                later = step in self.ids or self._defined_anywhere(step)
                why = "has not run yet at this point" if later else "is not a step of this workflow"
                known = listing(list(walk.visible))
                hint = "" if later else did_you_mean(step, list(walk.visible))
                message = f"{dotted(path)} reads steps.{step}, which {why}{hint} (steps before it: {known})"
            elif step in walk.later and "iteration" not in source and "defined" not in source:
                message = (
                    f"{dotted(path)} reads steps.{step}, which runs after it in the loop: at the first iteration "
                    "it has not run and the step fails; guard the read with {% if iteration > 1 %}"
                )
            elif len(chain) >= 3 and chain[2] not in _STEP_FIELDS:
                message = f"{dotted(path)} reads steps.{step}.{chain[2]}; a step has {', '.join(_STEP_FIELDS)}"
            elif len(chain) >= 4 and chain[2] == "output":
                known_step = walk.visible[step]
                properties = mapping(known_step.schema.get("properties"))
                if known_step.kind == "structured" and properties and chain[3] not in properties:
                    hint = did_you_mean(chain[3], list(properties))
                    message = (
                        f"{dotted(path)} reads steps.{step}.output.{chain[3]}, a field the output_schema of "
                        f"step '{step}' does not have{hint} (fields: {listing(list(properties))})"
                    )
                elif known_step.kind == "route":
                    message = (
                        f"{dotted(path)} reads steps.{step}.output.{chain[3]}, but step '{step}' routes: its "
                        f"output is its branch's; its agent's fields are steps.{step}.choice.<field>"
                    )
                elif known_step.kind == "text":
                    message = (
                        f"{dotted(path)} reads steps.{step}.output.{chain[3]}, but the output of step '{step}' "
                        "is text (its agent has no output_schema)"
                    )
            if message is not None and message not in said:
                said.add(message)
                line, column = find(self.c, path, source, node.lineno, rf"\bsteps\s*[.\[]\s*['\"]?{re.escape(step)}")
                yield Diagnostic(self.c.file, line, column, message, rule="workflow")

    def _defined_anywhere(self, step: str) -> bool:
        return step in _all_step_names(sequence(mapping(self.workflow).get("steps")))

    def _unused(self) -> Iterator[Diagnostic]:
        if not self.c.graph_complete:
            return
        for agent in self.c.agents:
            if agent not in self.used:
                yield self.c.warning(
                    ("agents", agent),
                    f"agent '{agent}' is never used: no workflow step runs it "
                    "(nor a team step's supervisor delegates to it)",
                    "unused",
                    key=True,
                )


def _values(schema: dict[str, Any]) -> list[str] | None:
    """The branch names a route field can name, as the route matches them (:func:`branch_key`): its
    ``enum``, or ``true``/``false`` for a boolean; ``None`` when any text may come."""
    if isinstance(schema.get("enum"), list):
        return [branch_key(v) for v in schema["enum"]]
    kind = schema.get("type")
    kinds = kind if isinstance(kind, list) else [kind]
    if kinds and all(k in ("boolean", "null") for k in kinds) and "boolean" in kinds:
        return ["true", "false", *(["null"] if "null" in kinds else [])]
    return None


def _all_step_names(steps: list[Any]) -> set[str]:
    names: set[str] = set()
    for raw in steps:
        step = mapping(raw)
        name = step.get("id") or step.get("agent") or step.get("team") or ("loop" if "loop" in step else None)
        if isinstance(name, str):
            names.add(name)
        names |= _all_step_names(sequence(mapping(step.get("loop")).get("steps")))
        route = mapping(step.get("route"))
        for branch in [*mapping(route.get("branches")).values(), route.get("default")]:
            names |= _all_step_names(sequence(branch))
    return names


def _chain(node: Any) -> list[str] | None:
    """``steps.plan.output.topics`` (attributes or constant subscripts) as its names, else ``None``."""
    from jinja2 import nodes

    parts: list[str] = []
    while True:
        if isinstance(node, nodes.Getattr):
            parts.append(str(node.attr))
            node = node.node
        elif isinstance(node, nodes.Getitem) and isinstance(node.arg, nodes.Const) and isinstance(node.arg.value, str):
            parts.append(node.arg.value)
            node = node.node
        elif isinstance(node, nodes.Name):
            parts.append(node.name)
            return parts[::-1]
        else:
            return None


def _chains(tree: Any) -> Iterator[tuple[Any, list[str]]]:
    """Each longest attribute chain in a template, with its node."""
    from jinja2 import nodes

    inner: set[int] = set()
    for node in tree.find_all((nodes.Getattr, nodes.Getitem)):
        if id(node) in inner:
            continue
        chain = _chain(node)
        child = node.node
        while isinstance(child, nodes.Getattr | nodes.Getitem):
            inner.add(id(child))
            child = child.node
        if chain is not None:
            yield node, chain


def workflow_checks(checker: CheckContext) -> Iterator[Diagnostic]:
    """Every problem of the file's ``workflow:`` (and a file with neither a supervisor nor a workflow)."""
    yield from WorkflowChecker(checker).check()
