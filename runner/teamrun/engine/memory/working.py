"""Working memory: a workspace with ``persist: resource`` is a record per resource that carries across threads.

Not a second state mechanism: the entries are the run's workspace, changed only through
:func:`~teamrun.engine.workspace.changes.apply_change`.

- :func:`load_working_memory`, as the run starts: each entry the resource kept (:meth:`MemoryStore.load_working`,
  per team) is one engine change through ``apply_change`` — checked against the team file as it is now (an entry
  the file no longer has, or whose kept value its rule, ``schema`` or ``max_bytes`` now refuses, starts from its
  initial value, with a warning), given the workspace's next version, journaled and evented (``workspace_write``,
  writer ``working memory``). What it loaded is journaled first (a ``workspace_view`` entry at
  ``@working-memory``): a resumed or answered run loads those values again (the changes answered ``replayed``),
  not the store's record as it is by then, so its changes are still measured from what it loaded.
- :func:`save_working_memory`, as a run ends ``done`` (or out of budget, with an answer): each entry the run
  changed (from what it loaded) is applied to the resource's record as it is *now*, atomically
  (:meth:`MemoryStore.change_working`, secrets masked), by the entry's rule: ``append`` adds the run's items,
  ``sum`` its difference, ``max``/``min`` compare, ``merge`` sets the keys the run changed, ``replace`` puts the
  run's value. So two overlapping runs of one resource both keep their changes (the later does not write its
  snapshot over the earlier's). A failed or cancelled run leaves the resource's working memory as it was. Boards
  are a run's work: never kept.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import json
from typing import Any

from teamrun.engine.durability.journal import tool_hash
from teamrun.engine.durability.workspace_entries import ChangeRecord, view_entry
from teamrun.engine.runtime import AgentFrame, RunContext
from teamrun.engine.workspace.changes import ChangeSite, apply_change
from teamrun.engine.workspace.state import WorkspaceState, initial_value, value_size

__all__ = ["WORKING_MEMORY_WRITER", "load_working_memory", "persists_per_resource", "save_working_memory"]

WORKING_MEMORY_WRITER = "working memory"
"""Who the workspace says wrote an entry loaded from the resource's working memory."""
_INVOCATION = "@working-memory"
"""Where the loads are journaled (no agent's invocation key starts with ``@``)."""
_KEPT_STATUSES = ("done", "budget_exhausted")


def persists_per_resource(ctx: RunContext) -> bool:
    """Whether this run's workspace is the resource's working memory (``persist: resource``)."""
    spec = ctx.config.workspace
    return spec is not None and spec.persist == "resource" and ctx.workspace is not None


async def load_working_memory(ctx: RunContext, frame: AgentFrame) -> list[str]:
    """Start the workspace from the resource's working memory (see the module); returns the warnings."""
    memory, state = ctx.memory, ctx.workspace
    if memory is None or state is None or not persists_per_resource(ctx):
        return []
    kept = await _kept(ctx)
    warnings: list[str] = []
    memory.working_loaded = {
        name: memory.redactor.value(initial_value(spec)) for name, spec in state.spec.entries.items()
    }
    for position, (name, value) in enumerate(sorted(kept.items())):
        fingerprint = hashlib.sha256(json.dumps([name, value], sort_keys=True, default=str).encode()).hexdigest()
        site = ChangeSite(_INVOCATION, 0, position, fingerprint, of_model=False)
        made = await apply_change(ctx, frame, site, functools.partial(_load, ctx, state, name, value, warnings))
        if made is not None and made.record.ok and name in memory.working_loaded:
            memory.working_loaded[name] = memory.redactor.value(value)
    return warnings


async def _kept(ctx: RunContext) -> dict[str, Any]:
    """What the run loads: the values its first attempt loaded (its journal's ``workspace_view`` at
    ``@working-memory``) when it has them — a resumed or answered run measures its changes from what it loaded as
    it first started, whatever other runs of the resource saved since — else the resource's record as it is now,
    journaled before any load (a run killed between the two loads the same values again when resumed)."""
    memory, journal = ctx.memory, ctx.journal
    assert memory is not None
    if journal is not None:
        earlier = journal.replay.step_view(_INVOCATION)
        if earlier is not None:
            return earlier
    stored = await asyncio.to_thread(memory.store.load_working, memory.resource, ctx.config.name)
    kept = {name: value for name, (_version, value) in stored.items()}
    if journal is not None:
        await journal.write_now(view_entry(_INVOCATION, tool_hash("workspace_view", _INVOCATION), kept))
    return kept


def _apply(rule: str, loaded: Any, final: Any, found: bool, current: Any) -> Any:
    """The record's new value: the run's change (from ``loaded`` to ``final``) applied by ``rule`` to the record
    as it is now (``current``; ``found`` False: none yet, so the run's value). A record of another shape (a team
    file changed since) takes the run's value."""
    if not found:
        return final
    if rule == "append" and isinstance(current, list) and isinstance(final, list):
        items = loaded if isinstance(loaded, list) else []
        added = final[len(items) :] if final[: len(items)] == items else final
        return [*current, *added]
    numbers = all(isinstance(v, int | float) and not isinstance(v, bool) for v in (current, final))
    if rule == "sum" and numbers:
        start = loaded if isinstance(loaded, int | float) and not isinstance(loaded, bool) else 0
        return current + (final - start)
    if rule in ("max", "min") and numbers:
        return max(current, final) if rule == "max" else min(current, final)
    if rule == "merge" and isinstance(current, dict) and isinstance(final, dict):
        keys: dict[str, Any] = loaded if isinstance(loaded, dict) else {}
        missing = object()
        return {**current, **{k: v for k, v in final.items() if keys.get(k, missing) != v}}
    return final


def _load(ctx: RunContext, state: WorkspaceState, name: str, value: Any, warnings: list[str]) -> ChangeRecord:
    resource = ctx.memory.resource if ctx.memory is not None else ""
    spec = state.spec.entries.get(name)
    problem = None
    if spec is None:
        problem = "the team file no longer has it"
    elif spec.kind == "board":
        problem = "a board is a run's work"
    else:
        problem = state.value_problem(name, value)
        total = value_size(value) + sum(value_size(e.value) for n, e in state.entries.items() if n != name)
        if problem is None and total > state.spec.max_bytes:
            problem = f"the workspace would grow to {total} bytes, past workspace.max_bytes ({state.spec.max_bytes})"
    if problem is not None:
        warnings.append(
            f"workspace: the working memory of {resource!r} keeps '{name}', which is not loaded ({problem}); "
            "it starts from its initial value"
        )
        return ChangeRecord(f"not loaded: {problem}", False)
    assert spec is not None
    before = state.entries[name].version
    version, payload = state.commit(name, WORKING_MEMORY_WRITER, value)
    event = {
        "entry": name,
        "rule": spec.merge,
        "status": "applied",
        "version_before": before,
        "version_after": version,
        "message": f"'{name}' loaded from the working memory of {resource!r} (version {version})",
        "value_after": value,
    }
    return ChangeRecord(f"loaded '{name}'", True, "workspace_write", event, payload)


async def save_working_memory(ctx: RunContext) -> str | None:
    """Keep the workspace's written entries as the resource's working memory; a warning when it could not."""
    memory, state = ctx.memory, ctx.workspace
    if memory is None or state is None or not persists_per_resource(ctx):
        return None
    if ctx.result.status not in _KEPT_STATUSES:
        return None
    changed = []
    for name, entry in state.entries.items():
        spec = state.spec.entries[name]
        if entry.version == 0 or spec.kind == "board":
            continue
        loaded, now = memory.working_loaded.get(name), memory.redactor.value(entry.value)
        if name in memory.working_loaded and now == loaded:
            continue  # loaded, not changed: another run's newer record stays
        changed.append((name, functools.partial(_apply, spec.merge, loaded, now)))

    def save() -> None:
        for name, change in changed:
            memory.store.change_working(memory.resource, ctx.config.name, name, change)

    try:
        await asyncio.to_thread(save)
    except Exception as exc:  # the run's answer stands; the working memory stays as it was
        return f"the working memory of {memory.resource!r} could not be saved: {exc}"
    return None
