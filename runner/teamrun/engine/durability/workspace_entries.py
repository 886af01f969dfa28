"""The journal's workspace and board entries: what a change did, as one typed record, and how it is kept.

A workspace or board change — an agent's workspace or board tool call, a workflow step's ``write:``, a board
task the peer driver posts, expires or takes back from a peer that ended — is journaled as one entry whose kind
says what it was: ``workspace_write`` or ``board_op`` (a call that changed nothing and has no event, a read or a
claim answered ``done``: ``tool``). Its payload keeps what the caller was told (``ok``, ``content``), the event
(``workspace.event``) and the entry's state after it (``workspace.state``, which a resume restores the
workspace from). The entries a workflow step read are a ``workspace_view`` entry. Only this module knows the
payloads' shape; :class:`~teamrun.engine.durability.replay.Replay` reads them back through it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from teamrun.store.records import EntryKey, EntryKind, JournalEntry

__all__ = ["ChangeKind", "ChangeRecord", "change_entry", "read_change", "read_state", "read_view", "view_entry"]

ChangeKind = Literal["workspace_write", "board_op"]
"""What a change was: a workspace entry's write, or a board's operation (also the name of its event)."""
CHANGE_KINDS: tuple[EntryKind, ...] = ("workspace_write", "board_op", "tool")
"""The kinds a workspace or board call's entry may have (``tool``: it changed nothing and has no event)."""


@dataclass(frozen=True)
class ChangeRecord:
    """What one workspace or board call did: what its caller was told, its event, the entry's state after it."""

    content: str
    """What the caller reads (a tool call's result)."""
    ok: bool
    kind: ChangeKind | None = None
    """The event's kind; ``None``: no event (a read, a claim answered with the work's ending)."""
    event: Mapping[str, Any] | None = None
    """The event's fields."""
    state: Mapping[str, Any] | None = None
    """The entry after an applied change (:meth:`~teamrun.engine.workspace.state.EntryState.as_payload`)."""


def change_entry(invocation: str, index: int, position: int, fingerprint: str, record: ChangeRecord) -> JournalEntry:
    """The journal entry of ``record``, at the place (invocation, index, position) its caller names."""
    payload: dict[str, Any] = {
        "ok": record.ok,
        "content": record.content,
        "error": None if record.ok else record.content,
    }
    if record.event is not None:
        payload["workspace"] = {"event": dict(record.event), "state": record.state}
    kind: EntryKind = record.kind or "tool"
    return JournalEntry(EntryKey(invocation, index, kind, position), fingerprint, payload)


def read_change(entry: JournalEntry) -> ChangeRecord:
    """The record an entry of :func:`change_entry` keeps."""
    payload = entry.payload
    kept = payload.get("workspace")
    kept = kept if isinstance(kept, Mapping) else {}
    event, state = kept.get("event"), kept.get("state")
    kind = entry.key.kind if entry.key.kind in ("workspace_write", "board_op") else None
    return ChangeRecord(
        str(payload.get("content", "")),
        bool(payload.get("ok")),
        kind,
        event if isinstance(event, Mapping) else None,
        state if isinstance(state, Mapping) else None,
    )


def read_state(entry: JournalEntry) -> Mapping[str, Any] | None:
    """The entry's state an entry keeps after an applied change (``None``: it keeps none). Any kind: a journal
    written before the typed kinds kept it in ``tool`` entries."""
    return read_change(entry).state


def view_entry(invocation: str, fingerprint: str, values: Mapping[str, Any]) -> JournalEntry:
    """The entries' values a workflow step read as it started (``invocation``: the step's key)."""
    return JournalEntry(EntryKey(invocation, 0, "workspace_view"), fingerprint, {"values": dict(values)})


def read_view(entry: JournalEntry) -> dict[str, Any] | None:
    values = entry.payload.get("values")
    return dict(values) if isinstance(values, Mapping) else None
