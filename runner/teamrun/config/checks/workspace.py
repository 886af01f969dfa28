"""Semantic checks of a team file's ``workspace:``, each located at ``file:line:col``.

What the schema cannot say: readers and writers that are not agents, an entry's
``schema`` that is not a JSON Schema, a merge rule on a value of the wrong type
(``append`` on a non-list, ``merge`` on a non-object, ``max``/``min``/``sum`` on
a non-number), an initial value the schema (or the rule, or ``max_bytes``)
refuses, a workspace tool whose name an agent's own tool already has, an
entry nobody writes that has no initial value (it stays empty), and
instructions that name the write tool of an entry that does not exist or that
the agent may not write (warnings: instructions are prose), and an agent's
``answer_to`` that names no entry, or a board, or (a warning) an entry that cannot take a text while the agent
answers in text (no ``output_schema``, or an ``a2a:`` agent): such an answer can never be written.
Like the other checks they read the raw data defensively: a value of the wrong
type is skipped (the schema has reported it).
"""

from __future__ import annotations

import json
import re
from collections.abc import Generator, Iterator
from typing import TYPE_CHECKING, Any

from teamrun.config.checks.raw import names
from teamrun.config.checks.sub_schemas import first_error, sub_schema
from teamrun.config.checks.workflow_workspace import entries_written
from teamrun.config.diagnostics import Diagnostic, JsonPath, did_you_mean, listing
from teamrun.conventions import WORKSPACE_CHANGES, WORKSPACE_READ, WORKSPACE_WRITE_PREFIX, workspace_write_tool_name
from teamrun.defaults import DEFAULT_ENTRY_BYTES, DEFAULT_WORKSPACE_BYTES

if TYPE_CHECKING:
    from teamrun.config.checks.context import CheckContext

__all__ = ["entry_schema", "entry_users", "workspace_checks"]

_RULE_TYPES = {
    "append": ({"array"}, "a list"),
    "merge": ({"object"}, "an object"),
    "max": ({"number", "integer"}, "a number"),
    "min": ({"number", "integer"}, "a number"),
    "sum": ({"number", "integer"}, "a number"),
}
_EMPTY = {"append": [], "merge": {}, "sum": 0}
_WRITE_TOOL = re.compile(re.escape(WORKSPACE_WRITE_PREFIX) + r"([A-Za-z][A-Za-z0-9_-]*)")


def _types(schema: dict[str, Any]) -> set[str] | None:
    kind = schema.get("type")
    if isinstance(kind, str):
        return {kind}
    if isinstance(kind, list) and all(isinstance(k, str) for k in kind):
        return set(kind) - {"null"}
    return None


def _value_fits(rule: str, value: Any) -> bool:
    if rule == "append":
        return isinstance(value, list)
    if rule == "merge":
        return isinstance(value, dict)
    if rule in ("max", "min", "sum"):
        return isinstance(value, int | float) and not isinstance(value, bool)
    return True


def workspace_checks(c: CheckContext) -> Iterator[Diagnostic]:
    """Every problem of ``workspace:`` (none when the file has none) and of the agents' ``answer_to``."""
    workspace = c.data.get("workspace") if c.data else None
    entries = workspace.get("entries") if isinstance(workspace, dict) else None
    yield from _answers(c, entries if isinstance(entries, dict) else {})
    if not isinstance(workspace, dict) or not isinstance(workspace.get("entries"), dict):
        return
    by_steps = entries_written(c.data) | set(_answered(c).values())  # a step's `write:`, an `answer_to` write too
    for name, raw in workspace["entries"].items():
        if isinstance(raw, dict) and raw.get("kind") != "board":  # a board: checks.peers
            yield from _entry(c, ("workspace", "entries", name), str(name), raw, str(name) in by_steps)
    yield from _total(c, workspace)
    yield from _clashes(c, workspace["entries"])
    yield from _instructions(c, workspace["entries"])


def _answered(c: CheckContext) -> dict[str, str]:
    """Each agent's ``answer_to`` entry."""
    agents = c.data.get("agents") if c.data else None
    return {
        str(name): agent["answer_to"]
        for name, agent in (agents.items() if isinstance(agents, dict) else ())
        if isinstance(agent, dict) and isinstance(agent.get("answer_to"), str)
    }


def _answers(c: CheckContext, entries: dict[str, Any]) -> Iterator[Diagnostic]:
    """An ``answer_to`` that names no entry of the workspace, or a board."""
    for agent, entry in _answered(c).items():
        path: JsonPath = ("agents", agent, "answer_to")
        if entry not in entries:
            known = [str(n) for n, e in entries.items() if not (isinstance(e, dict) and e.get("kind") == "board")]
            yield c.error(
                path,
                f"agents.{agent}.answer_to names workspace entry '{entry}', which the file does not have"
                f"{did_you_mean(entry, known)} (entries: {listing(known)})",
                "reference",
            )
        elif isinstance(entries[entry], dict) and entries[entry].get("kind") == "board":
            yield c.error(
                path, f"agents.{agent}.answer_to names '{entry}', a board: only its board tools change it", "workspace"
            )
        elif isinstance(entries[entry], dict) and _answers_in_text(c, agent):
            takes = _takes_text(entries[entry])
            if takes is not None:
                remote = _why_text(c, agent) == _REMOTE
                fix = "" if remote else f"give {agent} an output_schema of what the entry holds, or "
                yield c.warning(
                    path,
                    f"agents.{agent}.answer_to names '{entry}', which {takes}, but {agent} answers in text (it "
                    f"{_why_text(c, agent)}): its answer can never be written there; {fix}answer to an entry that "
                    "takes text",
                    "workspace",
                )


def _answers_in_text(c: CheckContext, agent: str) -> bool:
    """Whether ``agent``'s answer is its text (no ``output_schema``, or an ``a2a:`` agent's)."""
    raw = (c.data.get("agents") or {}).get(agent) if c.data else None
    return isinstance(raw, dict) and (raw.get("a2a") is not None or raw.get("output_schema") is None)


def _why_text(c: CheckContext, agent: str) -> str:
    raw = (c.data.get("agents") or {}).get(agent) if c.data else None
    return _REMOTE if isinstance(raw, dict) and raw.get("a2a") is not None else "has no output_schema"


_REMOTE = "is an a2a: agent"


def _takes_text(entry: dict[str, Any]) -> str | None:
    """Why the entry cannot take a text answer (``None``: it can, or its schema does not say)."""
    rule = entry.get("merge", "replace")
    if rule in ("max", "min", "sum"):
        return f"combines numbers (merge: {rule})"
    if rule == "merge":
        return "merges objects (merge: merge)"
    schema = entry.get("schema")
    if not isinstance(schema, dict):
        return None
    if rule == "append":  # the answer is appended as one item
        items = schema.get("items")
        kinds = _types(items) if isinstance(items, dict) else None
        return f"holds items of type {listing(sorted(kinds))}" if kinds is not None and "string" not in kinds else None
    kinds = _types(schema)
    return f"holds a value of type {listing(sorted(kinds))}" if kinds is not None and "string" not in kinds else None


def entry_users(c: CheckContext, path: JsonPath, name: str, entry: dict[str, Any]) -> Iterator[Diagnostic]:
    """The agents an entry's (or a board's) ``read`` and ``write`` name that are not defined."""
    for field in ("read", "write"):
        for index, agent in names(entry.get(field)):
            if c.agents and agent not in c.agents:
                yield c.error(
                    (*path, field, index),
                    f"agent '{agent}' in workspace.entries.{name}.{field} is not defined"
                    f"{did_you_mean(agent, list(c.agents))} (defined agents: {listing(list(c.agents))})",
                    "reference",
                )


def entry_schema(c: CheckContext, path: JsonPath, schema: Any) -> Generator[Diagnostic, None, bool]:
    """The problems of an entry's (or a board's) ``schema``; returns whether values can be checked against it
    (there is none, or it is a valid JSON Schema)."""
    if not isinstance(schema, dict):
        return True
    problems = list(sub_schema(c, (*path, "schema"), schema))
    yield from problems
    return not problems


def _entry(
    c: CheckContext, path: JsonPath, name: str, entry: dict[str, Any], step_written: bool = False
) -> Iterator[Diagnostic]:
    yield from entry_users(c, path, name, entry)
    rule = entry.get("merge", "replace")
    schema = entry.get("schema")
    schema_ok = yield from entry_schema(c, path, schema)
    schema = schema if isinstance(schema, dict) else {}
    wanted = _RULE_TYPES.get(rule) if isinstance(rule, str) else None
    types = _types(schema)
    mismatch = wanted is not None and types is not None and not types & wanted[0]
    if wanted is not None and types is not None and mismatch:
        yield c.error(
            (*path, "merge"),
            f"workspace.entries.{name}: merge '{rule}' needs {wanted[1]}, but its schema's type is "
            f"{'/'.join(sorted(types))}; change the rule (replace works on any value) or the schema",
            "workspace",
        )
    has_initial = "initial" in entry and entry["initial"] is not None
    initial = entry["initial"] if has_initial else _EMPTY.get(rule) if isinstance(rule, str) else None
    where: JsonPath = (*path, "initial") if has_initial else path
    if has_initial and isinstance(rule, str) and not _value_fits(rule, initial):
        yield c.error(
            where, f"workspace.entries.{name}.initial must be {_RULE_TYPES[rule][1]} for merge '{rule}'", "workspace"
        )
    elif initial is not None and schema_ok and schema and not mismatch:
        error = first_error(schema, initial)
        if error is not None:
            said = "its initial value" if has_initial else f"its starting value {json.dumps(initial)}"
            yield c.error(
                where,
                f"workspace.entries.{name}: {said} does not satisfy its schema: {error.message}",
                "workspace",
                key=not has_initial,
            )
    max_bytes = entry.get("max_bytes")
    max_bytes = max_bytes if isinstance(max_bytes, int) and not isinstance(max_bytes, bool) else DEFAULT_ENTRY_BYTES
    if has_initial and (size := _size(initial)) > max_bytes:
        cap = "its max_bytes" if "max_bytes" in entry else "the default max_bytes of an entry"
        yield c.error(
            where,
            f"workspace.entries.{name}.initial is {size} bytes, past {cap} ({max_bytes}); "
            "shorten it or raise `max_bytes`",
            "workspace",
        )
    if not entry.get("write") and not has_initial and not step_written:
        yield c.warning(
            path,
            f"nobody writes workspace.entries.{name} and it has no initial value: it stays empty "
            "(list its writers under `write:`)",
            "workspace",
            key=True,
        )


def _size(value: Any) -> int:
    """A value's size as the caps count it: compact JSON, in bytes (as the engine counts it)."""
    return len(json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode())


def _total(c: CheckContext, workspace: dict[str, Any]) -> Iterator[Diagnostic]:
    """Initial values that together pass ``workspace.max_bytes``: no write could ever apply."""
    cap = workspace.get("max_bytes")
    cap = cap if isinstance(cap, int) and not isinstance(cap, bool) else DEFAULT_WORKSPACE_BYTES
    sizes = {
        str(name): _size(raw["initial"])
        for name, raw in workspace["entries"].items()
        if isinstance(raw, dict) and raw.get("initial") is not None
    }
    total = sum(sizes.values())
    if total > cap:
        path: JsonPath = ("workspace", "max_bytes") if "max_bytes" in workspace else ("workspace",)
        largest = ", ".join(f"{n} {b}" for n, b in sorted(sizes.items(), key=lambda kv: -kv[1])[:3])
        yield c.error(
            path,
            f"the workspace's initial values are {total} bytes together ({largest}), past "
            f"{'workspace.max_bytes' if 'max_bytes' in workspace else 'the default workspace.max_bytes'} ({cap})",
            "workspace",
            key="max_bytes" not in workspace,
        )


def _clashes(c: CheckContext, entries: dict[str, Any]) -> Iterator[Diagnostic]:
    """A workspace tool named like one of the agent's own tools (a model cannot tell them apart)."""
    for agent, spec in c.agents.items():
        declared = spec.get("tools")
        own = {t: i for i, t in enumerate(declared if isinstance(declared, list) else []) if isinstance(t, str)}
        if not own:
            continue
        readable = writable = False
        names: list[str] = []
        for entry, raw in entries.items():
            raw = raw if isinstance(raw, dict) else {}
            writers, readers = raw.get("write") or [], raw.get("read")
            if isinstance(writers, list) and agent in writers:
                writable = True
                names.append(workspace_write_tool_name(str(entry)))
            if readers is None or (isinstance(readers, list) and agent in readers) or writable:
                readable = True
        if readable:
            names += [WORKSPACE_READ, WORKSPACE_CHANGES]
        for name in names:
            if name in own:
                yield c.error(
                    ("agents", agent, "tools", own[name]),
                    f"agents.{agent}: the tool '{name}' and the workspace tool '{name}' would both be offered to "
                    "the model; rename the tool (a model cannot tell two functions of one name apart)",
                    "tool_name",
                )


def _instructions(c: CheckContext, entries: dict[str, Any]) -> Iterator[Diagnostic]:
    """Instructions that tell an agent to write an entry that does not exist, or one it may not write."""
    for agent, spec in c.agents.items():
        instructions = spec.get("instructions")
        if not isinstance(instructions, str):
            continue
        for entry in dict.fromkeys(m.group(1) for m in _WRITE_TOOL.finditer(instructions)):
            path: JsonPath = ("agents", agent, "instructions")
            raw = entries.get(entry)
            if raw is None:
                yield c.warning(
                    path,
                    f"agents.{agent}.instructions name {WORKSPACE_WRITE_PREFIX}{entry}, but the workspace has no "
                    f"entry '{entry}'{did_you_mean(entry, [str(e) for e in entries])} "
                    f"(entries: {listing([str(e) for e in entries])})",
                    "workspace",
                )
                continue
            writers = raw.get("write") if isinstance(raw, dict) else None
            writers = writers if isinstance(writers, list) else []
            if agent not in writers:
                yield c.warning(
                    path,
                    f"agents.{agent}.instructions name {WORKSPACE_WRITE_PREFIX}{entry}, but {agent} may not write "
                    f"workspace.entries.{entry} (writers: {listing([str(w) for w in writers])}); add it to `write:`",
                    "workspace",
                )
