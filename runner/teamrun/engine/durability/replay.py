"""The entries of a run's earlier attempts, looked up by key: what a resumed run does not pay for again.

How a resume opens them is :mod:`teamrun.engine.durability.resume`; they are written by
:mod:`teamrun.engine.durability.journal`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from teamrun.engine.durability.memory_entries import (
    RESOURCE_INVOCATION,
    EmbeddingRecord,
    RecallRecord,
    read_embedding,
    read_recall,
    read_resource,
)
from teamrun.engine.durability.remote_entries import RemoteAnswer, RemoteStarted, read_answer, read_started
from teamrun.engine.durability.workspace_entries import CHANGE_KINDS, ChangeRecord, read_change, read_state, read_view
from teamrun.llm.types import ModelReply
from teamrun.store.records import EntryKey, EntryKind, JournalEntry
from teamrun.tools.base import ToolOutcome

__all__ = ["Replay"]


class Replay:
    """The entries of earlier attempts, looked up by key; a miss turns the invocation live."""

    def __init__(self, entries: Iterable[JournalEntry] = (), *, confirmed_tools: bool = False) -> None:
        self._entries: dict[EntryKey, JournalEntry] = {}
        self._states: list[Mapping[str, Any]] = []
        self._models: list[JournalEntry] = []
        """The model entries in the order they were written (every attempt's)."""
        for entry in entries:  # a later attempt's entry for the same key wins
            self._entries[entry.key] = entry
            if entry.key.kind == "model":
                self._models.append(entry)
            state = read_state(entry)
            if state is not None:
                self._states.append(state)
        self.confirmed_tools = confirmed_tools
        self._live: set[str] = set()
        self.replayed_calls = 0
        self.replayed_tools = 0
        self._embeddings: dict[str, JournalEntry] | None = None
        """The ``embedding`` entries by fingerprint (built on first use)."""

    @property
    def entries(self) -> Mapping[EntryKey, JournalEntry]:
        """The earlier attempts' entries by key (a later attempt's entry for a key wins)."""
        return self._entries

    def __bool__(self) -> bool:
        return bool(self._entries)

    def model(self, invocation: str, index: int, request_hash: str) -> ModelReply | None:
        """The journaled reply of this call, or ``None`` (a miss: the invocation runs live from here)."""
        if not self._entries or invocation in self._live:
            return None
        entry = self._entries.get(EntryKey(invocation, index, "model"))
        if entry is None or entry.request_hash != request_hash:
            self._live.add(invocation)
            return None
        from teamrun.llm.cassette import reply_from_dict

        self.replayed_calls += 1
        return reply_from_dict(entry.payload)

    def model_replies(self) -> list[ModelReply]:
        """Every journaled model reply of the earlier attempts, in the order they were written (what a resumed
        run's circuit breakers learn from: :func:`teamrun.llm.fallbacks.hold_open_from_journal`)."""
        from teamrun.llm.cassette import reply_from_dict

        return [reply_from_dict(entry.payload) for entry in self._models]

    def tool(self, invocation: str, index: int, position: int, request_hash: str) -> ToolOutcome | None:
        """The journaled outcome of this tool call, or ``None`` (run it)."""
        if not self._entries or invocation in self._live:
            return None
        entry = self._entries.get(EntryKey(invocation, index, "tool", position))
        if entry is None or entry.request_hash != request_hash:
            return None
        self.replayed_tools += 1
        payload = entry.payload
        return ToolOutcome(
            ok=bool(payload.get("ok")), content=str(payload.get("content", "")), error=payload.get("error")
        )

    # -- the workspace and its boards ---------------------------------------------------------
    def workspace_states(self) -> list[Mapping[str, Any]]:
        """Every workspace entry's state after each change the earlier attempts applied, in the journal's order
        (what a resumed run restores its workspace from)."""
        return list(self._states)

    def changes(self) -> list[tuple[str, ChangeRecord]]:
        """Every workspace or board change the earlier attempts made (those with an event), in the journal's order,
        each with the invocation that made it: what a run's stored workspace lists as its writes."""
        return [
            (key.invocation, read_change(entry))
            for key, entry in self._entries.items()
            if key.kind in ("workspace_write", "board_op")
        ]

    def change(
        self, invocation: str, index: int, position: int, fingerprint: str, *, of_model: bool = True
    ) -> ChangeRecord | None:
        """What the workspace or board change at this place did in an earlier attempt, or ``None`` (make it now).

        ``of_model``: the change is a tool call of a model reply; an invocation that went live (a model call
        missed) answers nothing more from the journal. A change the engine makes (a workflow step's write, the
        peer driver's) is answered whenever the journal has it."""
        if not self._entries or (of_model and invocation in self._live):
            return None
        for kind in CHANGE_KINDS:
            entry = self._entries.get(EntryKey(invocation, index, kind, position))
            if entry is not None and entry.request_hash == fingerprint and entry.payload.get("forgotten") is not True:
                self.replayed_tools += 1  # a change ``teamrun memory forget`` redacted is made again
                return read_change(entry)
        return None

    def step_view(self, invocation: str) -> dict[str, Any] | None:
        """The entries' values the workflow step ``invocation`` read as it started in an earlier attempt."""
        entry = self._entries.get(EntryKey(invocation, 0, "workspace_view"))
        return read_view(entry) if entry is not None else None

    # -- remote (a2a:) tasks ------------------------------------------------------------------
    def remote_answer(self, invocation: str, fingerprint: str) -> RemoteAnswer | None:
        """The answer the remote task of ``invocation`` completed with in an earlier attempt, or ``None``."""
        entry = self._latest_remote(invocation, "remote", fingerprint)
        return read_answer(entry) if entry is not None else None

    def remote_started(self, invocation: str, fingerprint: str) -> RemoteStarted | None:
        """The remote task of ``invocation`` an earlier attempt started, as last journaled (most messages sent)."""
        entry = self._latest_remote(invocation, "remote_start", fingerprint)
        return read_started(entry) if entry is not None else None

    def _latest_remote(self, invocation: str, kind: EntryKind, fingerprint: str) -> JournalEntry | None:
        found = [
            entry
            for key, entry in self._entries.items()
            if key.invocation == invocation and key.kind == kind and entry.request_hash == fingerprint
        ]
        return max(found, key=lambda entry: entry.key.index, default=None)

    # -- long-term memory ---------------------------------------------------------------------
    def memory_resource(self) -> str | None:
        """The resource the run was given as it first started (``None``: none, or no earlier attempt)."""
        entry = self._entries.get(EntryKey(RESOURCE_INVOCATION, 0, "memory_resource"))
        return read_resource(entry) if entry is not None else None

    def embedding(self, fingerprint: str) -> EmbeddingRecord | None:
        """The embedding call an earlier attempt paid for the same model and texts (an embedding depends on
        nothing else), wherever it was made, or ``None`` (pay it)."""
        if self._embeddings is None:
            self._embeddings = {
                entry.request_hash: entry for key, entry in self._entries.items() if key.kind == "embedding"
            }
        entry = self._embeddings.get(fingerprint)
        return read_embedding(entry) if entry is not None else None

    def recall(self, invocation: str, index: int, fingerprint: str) -> RecallRecord | None:
        """What ``invocation`` recalled before its model call ``index`` in an earlier attempt, for the same query,
        or ``None`` (recall now)."""
        entry = self._entries.get(EntryKey(invocation, index, "memory_recall"))
        if entry is None or entry.request_hash != fingerprint:
            return None
        return read_recall(entry)
