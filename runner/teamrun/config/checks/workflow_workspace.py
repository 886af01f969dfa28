"""Semantic checks of a workflow's use of the ``workspace:``, each located at ``file:line:col``.

Errors: a template that reads ``workspace`` in a file without a ``workspace:``
block, or reads ``workspace.<entry>`` for an entry that does not exist; a
step's ``write:`` without a ``workspace:`` block, to an entry that does not
exist, or to an entry whose schema or merge rule cannot take what the step
gives (its agent's ``output_schema`` type, text without one, a list for a map)
— a write like that would be refused at every run. Called by
:mod:`teamrun.config.checks.workflow`; like the other checks they read the raw
data defensively.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from teamrun.config.checks.raw import mapping, sequence
from teamrun.config.checks.templates import find
from teamrun.config.diagnostics import Diagnostic, JsonPath, did_you_mean, dotted, listing
from teamrun.config.workflow_workspace import WORKSPACE_NAME, entries_read

if TYPE_CHECKING:
    from teamrun.config.checks.context import CheckContext

__all__ = ["entries_written", "reads_checks", "write_checks"]

_NUMBER = {"number", "integer"}
_RULE_TAKES = {
    "merge": ({"object"}, "an object"),
    "max": (_NUMBER, "a number"),
    "min": (_NUMBER, "a number"),
    "sum": (_NUMBER, "a number"),
}


def _entries(c: CheckContext) -> dict[str, Any] | None:
    """The workspace's entries, ``None`` when the file has no ``workspace:`` block."""
    workspace = c.data.get("workspace")
    if not isinstance(workspace, dict):
        return None
    return mapping(workspace.get("entries"))


def reads_checks(c: CheckContext, path: JsonPath, source: Any, *, expression: bool = False) -> Iterator[Diagnostic]:
    """The template (or ``map:`` expression) at ``path``: the entries it reads must exist."""
    if not isinstance(source, str):
        return
    reads = entries_read(source, expression=expression)
    if not reads:
        return
    entries = _entries(c)
    said: set[str | None] = set()
    for read in reads:
        if read.entry in said or (entries is not None and (read.entry is None or read.entry in entries)):
            continue
        said.add(read.entry)
        shown = f"{WORKSPACE_NAME}.{read.entry}" if read.entry is not None else WORKSPACE_NAME
        if entries is None:
            message = (
                f"{dotted(path)} reads {shown}, but the file has no 'workspace:' block; declare the entries "
                "under 'workspace: {entries: ...}'"
            )
        else:
            assert read.entry is not None
            known = [str(e) for e in entries]
            message = (
                f"{dotted(path)} reads {shown}, which is not an entry of the workspace"
                f"{did_you_mean(read.entry, known)} (entries: {listing(known)})"
            )
        pattern = rf"\b{WORKSPACE_NAME}\b" + (rf"\s*[.\[]\s*['\"]?{re.escape(read.entry)}" if read.entry else "")
        line, column = find(c, path, source, read.line, pattern)
        yield Diagnostic(c.file, line, column, message, rule="workspace")


def write_checks(c: CheckContext, path: JsonPath, step: dict[str, Any], body: list[Any]) -> Iterator[Diagnostic]:
    """A step's ``write:`` (``body``: a loop's steps, whose last one gives the loop's output)."""
    entry = step.get("write")
    if not isinstance(entry, str):
        return
    where: JsonPath = (*path, "write")
    entries = _entries(c)
    if entries is None:
        yield c.error(
            where,
            f"{dotted(path)}.write: writes '{entry}', but the file has no 'workspace:' block; declare the entry under "
            "'workspace: {entries: ...}'",
            "workspace",
        )
        return
    if entry not in entries:
        known = [str(e) for e in entries]
        yield c.error(
            where,
            f"{dotted(path)}.write: '{entry}' is not an entry of the workspace{did_you_mean(entry, known)} "
            f"(entries: {listing(known)})",
            "workspace",
        )
        return
    spec = mapping(entries[entry])
    if spec.get("kind") == "board":
        yield c.error(
            where,
            f"{dotted(path)}.write: '{entry}' is a board: its tasks change only through the board tools "
            "(post, claim, complete, release), never by a step's output",
            "workspace",
        )
        return
    gives = _gives(c, step, body)
    if gives is None:
        return
    kinds, items, what = gives
    rule = spec.get("merge", "replace")
    schema = mapping(spec.get("schema"))
    problem = None
    if rule == "append":
        written = items if items is not None else kinds  # a list's items are appended one by one
        wanted = _types(mapping(schema.get("items")))
        if written is not None and wanted is not None and not _overlap(written, wanted):
            problem = f"appends {_shown(written)} items, but the entry's items are {_shown(wanted)}"
    elif isinstance(rule, str) and rule in _RULE_TAKES:
        takes, said = _RULE_TAKES[rule]
        if kinds is not None and not _overlap(kinds, takes):
            problem = f"merge '{rule}' takes {said}"
    if problem is None and rule != "append":
        wanted = _types(schema)
        if kinds is not None and wanted is not None and not _overlap(kinds, wanted):
            problem = f"the entry's schema takes {_shown(wanted)}"
        elif kinds == {"array"} and items is not None and wanted == {"array"}:
            wanted_items = _types(mapping(schema.get("items")))
            if wanted_items is not None and not _overlap(items, wanted_items):
                problem = f"the entry's items are {_shown(wanted_items)}, not {_shown(items)}"
    if problem is not None:
        yield c.error(
            where,
            f"{dotted(path)}.write: the step gives {what}, but workspace.entries.{entry} cannot take it: {problem} "
            "(every run would refuse the write; change the entry's schema or merge rule, or the agent's "
            "output_schema)",
            "workspace",
        )


def _gives(
    c: CheckContext, step: dict[str, Any], body: list[Any]
) -> tuple[set[str] | None, set[str] | None, str] | None:
    """What the step writes: its JSON types, a list's item types, and how to say it; ``None``: unknown."""
    loop = step.get("loop")
    if isinstance(loop, dict):
        last = [s for s in body if isinstance(s, dict)]
        return _gives(c, last[-1], sequence(mapping(last[-1].get("loop")).get("steps"))) if last else None
    if isinstance(step.get("route"), dict):
        return None  # a branch's last output
    agent = step.get("agent") or step.get("team")
    if not isinstance(agent, str) or agent not in c.agents:
        return None
    schema = c.agents[agent].get("output_schema")
    if isinstance(schema, dict):
        kinds = _types(schema)
        items = _types(mapping(schema.get("items"))) if kinds == {"array"} else None
        what = f"{agent}'s output ({_shown(kinds)}, by its output_schema)"
    else:
        kinds, items, what = {"string"}, None, f"text ({agent} has no output_schema)"
    if "map" in step:
        return {"array"}, kinds, f"a list of {what}, one per map item"
    return kinds, items, what


def _types(schema: dict[str, Any]) -> set[str] | None:
    kind = schema.get("type")
    if isinstance(kind, str):
        return {kind}
    if isinstance(kind, list) and kind and all(isinstance(k, str) for k in kind):
        return set(kind)
    return None


def _overlap(a: set[str], b: set[str]) -> bool:
    return bool(_widen(a) & _widen(b))


def _widen(kinds: set[str]) -> set[str]:
    """An integer is a number, and 3.0 an integer: the two types meet."""
    return kinds | _NUMBER if kinds & _NUMBER else kinds


def _shown(kinds: set[str] | None) -> str:
    return "/".join(sorted(kinds)) if kinds else "any type"


def entries_written(data: dict[str, Any]) -> set[str]:
    """The entries some workflow step writes (``write:``), anywhere in its steps."""
    found: set[str] = set()

    def walk(steps: list[Any]) -> None:
        for raw in steps:
            step = mapping(raw)
            if isinstance(step.get("write"), str):
                found.add(step["write"])
            walk(sequence(mapping(step.get("loop")).get("steps")))
            route = mapping(step.get("route"))
            for branch in [*mapping(route.get("branches")).values(), route.get("default")]:
                walk(sequence(branch))

    walk(sequence(mapping(data.get("workflow")).get("steps")))
    return found
