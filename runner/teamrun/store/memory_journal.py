"""What forgetting a resource does to the journals of its runs: every entry that carries a fact is redacted.

A run knows its resource by its ``memory_resource`` journal entry (written as it starts; a resume keeps it).
:func:`redact_runs_of` finds the runs of a resource that way and, in the caller's transaction (the forget's),
replaces what carries a fact by a marker ``{"forgotten": true, "at": <unix seconds>}``:

- ``memory_recall`` entries (the query and the facts recalled): a resume recalls nothing there;
- ``embedding`` entries (vectors of a fact or a query): a resume pays that embedding again if it needs it;
- ``workspace_write`` and ``workspace_view`` entries (working memory loaded and written, what a step read): a
  resume makes those changes again from the workspace as it then is;
- the arguments of the memory tools' calls (``memory_save``, ``memory_search``) and of the workspace tools' calls
  (``workspace_write_<entry>``, ``workspace_read``, ``workspace_changes``: a run of a resource may have its
  working memory in its workspace) in the journaled model replies (replaced by ``{"forgotten": true}``; the
  reply's text and its other tool calls are kept, so the model call still replays), and the outcome of those
  calls (``tool`` entries at the same place, e.g. a ``workspace_read`` result with a loaded value): a resume tells
  the model the call was forgotten, and a forgotten write is refused (its arguments are gone).

The request hashes (fingerprints of masked texts, not the texts) are kept. What the conversation itself said (a
run's input and answer, thread messages) is not journal data about memory and is kept: see docs/memory.md.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from teamrun.conventions import MEMORY_TOOLS, is_workspace_tool

if TYPE_CHECKING:
    import sqlalchemy as sa

__all__ = ["FORGOTTEN", "REDACTED_KINDS", "is_forgotten", "redact_runs_of", "runs_of"]

FORGOTTEN = "forgotten"
"""The key of a redacted payload (``{"forgotten": true, "at": ...}``)."""
REDACTED_KINDS = ("memory_recall", "embedding", "workspace_write", "workspace_view")
"""The journal entry kinds whose whole payload is a fact's (or a working-memory value's) carrier."""
_FORGOTTEN_ARGUMENTS = json.dumps({FORGOTTEN: True})
_FORGOTTEN_TOOL = "this call's data was forgotten (teamrun memory forget): nothing of it is kept"


def is_forgotten(payload: Mapping[str, Any]) -> bool:
    """Whether a journal payload was redacted by a forget."""
    return payload.get(FORGOTTEN) is True


def runs_of(conn: sa.Connection, resource: str) -> list[str]:
    """The ids of the journaled runs given ``resource`` (their ``memory_resource`` entry names it)."""
    import sqlalchemy as sa

    from teamrun.store.schema import journal

    rows = conn.execute(sa.select(journal.c.run_id, journal.c.payload).where(journal.c.kind == "memory_resource"))
    return sorted({str(run_id) for run_id, payload in rows if _payload(payload).get("resource") == resource})


def redact_runs_of(conn: sa.Connection, resource: str, at: float) -> tuple[list[str], int]:
    """Redact the fact-carrying journal entries of ``resource``'s runs (see the module); returns (the runs' ids,
    entries redacted)."""
    import sqlalchemy as sa

    from teamrun.store.schema import journal

    runs = runs_of(conn, resource)
    marker = {FORGOTTEN: True, "at": at}
    redacted = 0
    for run_id in runs:
        rows = conn.execute(
            sa.select(journal.c.seq, journal.c.agent_path, journal.c.kind, journal.c.call_key, journal.c.payload).where(
                journal.c.run_id == run_id, journal.c.kind.in_((*REDACTED_KINDS, "model", "tool"))
            )
        ).all()
        memory_calls: set[tuple[str, str]] = set()  # (invocation, "<call>.<position>") of redacted tool calls
        updates: dict[int, dict[str, Any]] = {}
        for seq, invocation, kind, call_key, raw in rows:
            payload = _payload(raw)
            if kind in REDACTED_KINDS:
                if not is_forgotten(payload):
                    updates[int(seq)] = marker
            elif kind == "model":
                changed = _without_memory_arguments(payload)
                index = str(call_key).partition(".")[0]
                for position, call in enumerate(payload.get("tool_calls") or ()):
                    if isinstance(call, Mapping) and _carries_memory(call.get("name")):
                        memory_calls.add((str(invocation), f"{index}.{position}"))
                if changed is not None:
                    updates[int(seq)] = changed
        for seq, invocation, kind, call_key, raw in rows:
            if kind == "tool" and (str(invocation), str(call_key)) in memory_calls and not is_forgotten(_payload(raw)):
                updates[int(seq)] = {"ok": False, "content": "", "error": _FORGOTTEN_TOOL, **marker}
        for seq, payload in updates.items():
            conn.execute(
                journal.update().where(journal.c.run_id == run_id, journal.c.seq == seq).values(payload=payload)
            )
        redacted += len(updates)
    return runs, redacted


def _without_memory_arguments(payload: Mapping[str, Any]) -> dict[str, Any] | None:
    """The model reply with its memory and workspace tool calls' arguments forgotten, or ``None`` when it has none
    to forget."""
    calls = payload.get("tool_calls")
    if not isinstance(calls, list):
        return None
    kept: list[Any] = []
    changed = False
    for call in calls:
        if (
            isinstance(call, Mapping)
            and _carries_memory(call.get("name"))
            and call.get("arguments") != _FORGOTTEN_ARGUMENTS
        ):
            call = {**call, "arguments": _FORGOTTEN_ARGUMENTS}
            changed = True
        kept.append(call)
    return {**payload, "tool_calls": kept} if changed else None


def _carries_memory(name: object) -> bool:
    """Whether a tool call's arguments and outcome may carry a fact or a working-memory value."""
    return isinstance(name, str) and (name in MEMORY_TOOLS or is_workspace_tool(name))


def _payload(raw: Any) -> Mapping[str, Any]:
    if isinstance(raw, str):
        try:
            raw = json.loads(raw)
        except ValueError:
            return {}
    return raw if isinstance(raw, Mapping) else {}
