"""Semantic checks of a peer team (``peers:``) and of boards (``kind: board`` workspace entries), located at
``file:line:col``.

What the schema cannot say: a peer that is not an agent (or is named twice), a team with both
``supervisor:`` (or ``workflow:``) and ``peers:``, a peer team without a board, with more than one, or
without a termination bound (``limits.max_tasks``); on a board: users or readers that are not agents, a
``schema`` that is not a JSON Schema, ``initial`` that is not a list of payloads the schema takes, a hook
whose condition or text does not parse or reads an unknown name, a ``merge`` rule (a board has none), and a
board nobody may use; ``lease_s`` or ``max_claims`` on an entry that is not a board (warnings: they do
nothing there). The raw data is read defensively: a value of the wrong type is skipped (the schema has
reported it).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from teamrun.config import templates
from teamrun.config.checks.sub_schemas import first_error
from teamrun.config.checks.templates import template, unknown_names
from teamrun.config.checks.workspace import entry_schema, entry_users
from teamrun.config.diagnostics import Diagnostic, JsonPath, did_you_mean, dotted, listing

if TYPE_CHECKING:
    from teamrun.config.checks.context import CheckContext

__all__ = ["peer_checks"]


def _entries(c: CheckContext) -> dict[str, dict[str, Any]]:
    workspace = c.data.get("workspace") if c.data else None
    entries = workspace.get("entries") if isinstance(workspace, dict) else None
    if not isinstance(entries, dict):
        return {}
    return {str(k): v for k, v in entries.items() if isinstance(v, dict)}


def peer_checks(c: CheckContext) -> Iterator[Diagnostic]:
    """Every problem of ``peers:`` and of the workspace's boards (none when the file has neither)."""
    if not c.data:
        return
    entries = _entries(c)
    boards = [name for name, entry in entries.items() if entry.get("kind") == "board"]
    for name, entry in entries.items():
        path: JsonPath = ("workspace", "entries", name)
        if entry.get("kind") == "board":
            yield from _board(c, path, name, entry)
        else:
            for option in ("lease_s", "max_claims"):
                if option in entry:
                    yield c.warning(
                        (*path, option),
                        f"workspace.entries.{name}.{option} applies to boards only: add `kind: board` or remove it",
                        "board",
                    )
    if "peers" in c.data:
        yield from _peers(c, boards)


def _peers(c: CheckContext, boards: list[str]) -> Iterator[Diagnostic]:
    data, peers = c.data, c.data.get("peers")
    for key, what in (("supervisor", "a supervisor"), ("workflow", "a workflow")):
        if key in data:
            yield c.error(
                (key,),
                f"a team has peers or {what}, not both: peers work around their board with no one directing "
                f"them; remove '{key}:' or 'peers:'",
                "peers",
                key=True,
            )
    seen: set[str] = set()
    for index, peer in enumerate(peers if isinstance(peers, list) else []):
        if not isinstance(peer, str):
            continue
        if c.agents and peer not in c.agents:
            yield c.error(
                ("peers", index),
                f"peer '{peer}' is not an agent{did_you_mean(peer, list(c.agents))} "
                f"(defined agents: {listing(list(c.agents))})",
                "reference",
            )
        elif peer in seen:
            yield c.error(("peers", index), f"peer '{peer}' is listed twice", "peers")
        seen.add(peer)
    if not boards:
        yield c.error(
            ("peers",),
            "a peer team needs a board: add a workspace entry with `kind: board` (its tasks are what the peers "
            "claim, post and complete)",
            "peers",
            key=True,
        )
    for extra in boards[1:]:
        yield c.error(
            ("workspace", "entries", extra, "kind"),
            f"a peer team works around one board, and '{boards[0]}' is already one: make '{extra}' a plain entry",
            "peers",
        )
    limits = data.get("limits")
    if not (isinstance(limits, dict) and limits.get("max_tasks") is not None):
        yield c.error(
            ("limits",) if isinstance(limits, dict) else ("peers",),
            "a peer team needs a termination bound: set limits.max_tasks (tasks whose follow-ups keep "
            "spawning tasks would otherwise never end), e.g. `limits: {max_tasks: 50}`",
            "peers",
            key=True,
        )


def _board(c: CheckContext, path: JsonPath, name: str, entry: dict[str, Any]) -> Iterator[Diagnostic]:
    yield from entry_users(c, path, name, entry)
    if "merge" in entry:
        yield c.error(
            (*path, "merge"),
            f"workspace.entries.{name} is a board: its tasks change through the board tools (post, claim, "
            "complete, release), not a merge rule; remove 'merge:'",
            "board",
            key=True,
        )
    if entry.get("write") is None and "peers" not in c.data:
        yield c.warning(
            path,
            f"nobody may use the board workspace.entries.{name}: list its users under `write:` "
            "(in a peer team they default to the peers)",
            "board",
            key=True,
        )
    yield from _hooks(c, (*path, "hooks"), entry.get("hooks"))
    schema = entry.get("schema")
    schema_ok = yield from entry_schema(c, path, schema)
    initial = entry.get("initial")
    if initial is None:
        return
    if not isinstance(initial, list):
        yield c.error(
            (*path, "initial"),
            f"workspace.entries.{name}.initial must be a list of task payloads (each posted as a task when the "
            "run starts)",
            "board",
        )
        return
    if not (schema_ok and isinstance(schema, dict) and schema):
        return
    for index, payload in enumerate(initial):
        error = first_error(schema, payload)
        if error is not None:
            yield c.error(
                (*path, "initial", index),
                f"workspace.entries.{name}.initial[{index}] ({json.dumps(payload)[:60]}) does not satisfy the "
                f"board's task schema: {error.message}",
                "board",
            )


BOARD_HOOK_NAMES = ("agent", "task", "result", "board", "vars")
"""The names a board hook's ``when`` and ``reject`` may read."""


def _hooks(c: CheckContext, path: JsonPath, hooks: Any) -> Iterator[Diagnostic]:
    """Each board hook's condition and text: their syntax and the names they read."""
    if not isinstance(hooks, dict):
        return
    for point in ("on_claim", "on_complete"):
        rules = hooks.get(point)
        for index, rule in enumerate(rules if isinstance(rules, list) else []):
            if not isinstance(rule, dict):
                continue
            where: JsonPath = (*path, point, index)
            when = rule.get("when")
            if isinstance(when, str):
                try:
                    templates.compile_condition(when)
                    uses = templates.names_used(when, expression=True)
                except templates.TemplateSyntaxError as exc:
                    yield c.error(
                        (*where, "when"), f"invalid condition in {dotted((*where, 'when'))}: {exc.message}", "template"
                    )
                else:
                    yield from unknown_names(c, (*where, "when"), when, uses, BOARD_HOOK_NAMES, kind="condition")
            yield from template(c, (*where, "reject"), rule.get("reject"), BOARD_HOOK_NAMES)
