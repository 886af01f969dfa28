"""A workspace kept across the turns of a thread (``workspace: {persist: thread}``).

At the end of a turn that is saved to its thread, :func:`kept` is what the
thread keeps of the workspace (in its ``meta``, in the same transaction as the
turn's messages): the workspace's version and each written entry's state. The
next turn starts from it through :func:`carry_over`, which checks every kept
value against the team file as it is now: an entry the file no longer has, or
whose kept value its rule, ``schema`` or ``max_bytes`` now refuses, starts from
its initial value instead, with a warning. The workspace's version goes on from
the kept one, so a later write always takes a higher number.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from teamrun.engine.workspace.state import WorkspaceState, value_size

__all__ = ["THREAD_META_KEY", "carry_over", "kept", "kept_snapshot"]

THREAD_META_KEY = "workspace"
"""Where a thread's ``meta`` keeps the workspace of its latest saved turn."""


def kept(state: WorkspaceState) -> dict[str, Any]:
    """What a thread keeps of ``state`` at the end of a turn: its version and each written entry's state."""
    return {"version": state.version, "entries": [e.as_payload() for e in state.entries.values() if e.version > 0]}


def carry_over(state: WorkspaceState, stored: Any, thread_id: str) -> tuple[int, list[str]]:
    """Start ``state`` (new) from what thread ``thread_id`` kept (:func:`kept`, or ``None``).

    Returns the version it starts at and a warning for each kept entry left out.
    """
    if not isinstance(stored, Mapping):
        return 0, []
    warnings: list[str] = []
    taken: list[Mapping[str, Any]] = []
    for payload in stored.get("entries") or ():
        if not isinstance(payload, Mapping):
            continue
        name = str(payload.get("entry"))
        if name in state.spec.entries and state.spec.entries[name].kind == "board":
            continue  # a board is a run's work: each turn's peers start from a fresh one
        if name not in state.entries:
            warnings.append(
                f"workspace: entry '{name}' kept by thread {thread_id} is no longer in the team file; it is dropped"
            )
            continue
        problem = state.value_problem(name, payload.get("value"))
        if problem is not None:
            warnings.append(
                f"workspace: the value of '{name}' kept by thread {thread_id} is refused by the team file now "
                f"({problem}); '{name}' starts from its initial value"
            )
            continue
        taken.append(payload)
    state.restore(taken)
    total = sum(value_size(e.value) for e in state.entries.values())
    if total > state.spec.max_bytes:
        state.reset()
        warnings.append(
            f"workspace: the entries kept by thread {thread_id} are {total} bytes together, past "
            f"workspace.max_bytes ({state.spec.max_bytes}); every entry starts from its initial value"
        )
        return 0, warnings
    version = stored.get("version")
    if isinstance(version, int) and not isinstance(version, bool):
        state.start_at(version)
    return state.version, warnings


def kept_snapshot(stored: Any) -> dict[str, Any] | None:
    """What a thread kept (:func:`kept`), shaped like a run result's ``workspace`` (written entries only)."""
    if not isinstance(stored, Mapping):
        return None
    entries = {
        str(p.get("entry")): {
            "version": p.get("version", 0),
            "value": p.get("value"),
            "written_by": list(p.get("writers") or ()),
        }
        for p in stored.get("entries") or ()
        if isinstance(p, Mapping)
    }
    return {"version": stored.get("version", 0), "entries": entries}
