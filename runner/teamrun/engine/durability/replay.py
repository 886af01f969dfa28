"""The entries of a run's earlier attempts, looked up by key: what a resumed run does not pay for again.

How a resume opens them is :mod:`teamrun.engine.durability.resume`; they are written by
:mod:`teamrun.engine.durability.journal`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from teamrun.engine.durability.remote_entries import RemoteAnswer, RemoteStarted, read_answer, read_started
from teamrun.llm.types import ModelReply
from teamrun.store.records import EntryKey, EntryKind, JournalEntry
from teamrun.tools.base import ToolOutcome

__all__ = ["Replay"]


class Replay:
    """The entries of earlier attempts, looked up by key; a miss turns the invocation live."""

    def __init__(self, entries: Iterable[JournalEntry] = (), *, confirmed_tools: bool = False) -> None:
        self._entries: dict[EntryKey, JournalEntry] = {}
        for entry in entries:  # a later attempt's entry for the same key wins
            self._entries[entry.key] = entry
        self.confirmed_tools = confirmed_tools
        self._live: set[str] = set()
        self.replayed_calls = 0
        self.replayed_tools = 0

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
