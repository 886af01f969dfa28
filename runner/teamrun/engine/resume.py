"""Resuming a run: earlier attempts' journal entries answer the calls that finished, the rest runs live.

Resume is a partial replay. For each model call the engine asks
:meth:`Replay.model` with the invocation, the call number and the request's
hash: an entry with the same key *and* hash is returned (not paid again, but
still charged to the run's limits, so a resumed run cannot spend past them);
anything else is a miss, and from its first miss on that invocation runs live
(its later entries belong to a conversation that no longer happens). Tool
results replay the same way, keyed by the call that asked for them.

A tool that is not idempotent and was started but never finished (the run was
killed while it ran) is not run again unless the person resuming confirms it:
:func:`open_resume` raises :class:`ResumeNeedsConfirmation` listing those calls.
"""

from __future__ import annotations

import dataclasses
import os
import socket
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from teamrun.engine.journal import EntryKey, JournalBackend, JournaledRun, JournalEntry, RunJournal
from teamrun.errors import UsageError
from teamrun.llm.types import ModelReply
from teamrun.secrets import unmask
from teamrun.tools.base import ToolOutcome

__all__ = ["PendingTool", "Replay", "ResumeNeedsConfirmation", "open_resume"]


class ResumeNeedsConfirmation(UsageError):
    """Resuming would run again a tool that is not idempotent and may have run halfway."""

    def __init__(self, run_id: str, pending: Sequence[PendingTool], *, confirm_with: str | None = None) -> None:
        self.run_id = run_id
        self.pending = list(pending)
        lines = "\n".join(f"  - {p.describe()}" for p in pending)
        command = confirm_with or f"teamrun resume {run_id} --yes"
        super().__init__(
            f"run {run_id} was stopped while {len(pending)} tool call(s) that are not idempotent were running:\n"
            f"{lines}\nResuming runs them again. Confirm with `{command}` (or answer the "
            f"prompt on a terminal); mark a tool `idempotent: true` in the team file if running it twice is safe.")


@dataclass(frozen=True)
class PendingTool:
    """A non-idempotent tool call that was started and has no result in the journal."""

    key: EntryKey
    tool: str
    arguments: str

    def describe(self) -> str:
        arguments = self.arguments if len(self.arguments) <= 120 else self.arguments[:117] + "..."
        return f"{self.tool}({arguments}) by {self.key.invocation}"


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
        return ToolOutcome(ok=bool(payload.get("ok")), content=str(payload.get("content", "")),
                           error=payload.get("error"))

    def pending_tools(self) -> list[PendingTool]:
        """Non-idempotent tool calls started and never finished, in the order they were started."""
        pending: list[PendingTool] = []
        for key, entry in self._entries.items():
            if key.kind != "tool_start":
                continue
            done = self._entries.get(EntryKey(key.invocation, key.index, "tool", key.position))
            if done is None or done.request_hash != entry.request_hash:
                pending.append(PendingTool(key, str(entry.payload.get("tool", "?")),
                                           str(entry.payload.get("arguments", ""))))
        return pending


def open_resume(backend: JournalBackend, run_id: str, *, confirmed: bool = False,
                confirm_with: str | None = None) -> RunJournal:
    """The journal that continues run ``run_id``: its record (one attempt more) and its entries to replay.

    Raises :class:`~teamrun.errors.UsageError` for an unknown run or one still running, and
    :class:`ResumeNeedsConfirmation` when a non-idempotent tool would run again and ``confirmed`` is false
    (``confirm_with``: the command it tells to run, ``teamrun resume RUN_ID --yes`` by default).
    """
    record = backend.get_run(run_id)
    if record is None:
        raise UsageError(f"no run {run_id!r} in the store; `teamrun runs list` shows the runs it holds")
    if record.shown_status() == "running":
        raise UsageError(f"run {run_id} is still running (pid {record.pid} on {record.host}); "
                         "wait for it to end or stop it first")
    entries = [_unmasked(entry) for entry in backend.load(run_id)]
    journal = RunJournal(backend, _next_attempt(record), entries, confirmed_tools=confirmed)
    pending = journal.replay.pending_tools()
    if pending and not confirmed:
        raise ResumeNeedsConfirmation(run_id, pending, confirm_with=confirm_with)
    claim = getattr(backend, "claim_run", None)  # the store's lock on the run (an in-memory journal has none)
    if claim is not None and not claim(journal.record):
        holder = backend.get_run(run_id)
        who = f" (pid {holder.pid} on {holder.host})" if holder is not None else ""
        raise UsageError(f"run {run_id} is being resumed by another process{who}; wait for it to end")
    return journal


def _unmasked(entry: JournalEntry) -> JournalEntry:
    """The entry with the secrets the store masked put back from the environment (the replayed reply then is
    the one the provider gave, and the requests that follow are the same)."""
    payload = unmask(entry.payload)
    return entry if payload == entry.payload else dataclasses.replace(entry, payload=payload)


def _next_attempt(earlier: JournaledRun) -> JournaledRun:
    record = dataclasses.replace(earlier, vars=dict(earlier.vars), usage=dict(earlier.usage))  # the store's is kept
    record.attempts += 1
    record.status, record.ended_at, record.error, record.final_text = "running", None, None, ""
    record.pid, record.host, record.heartbeat_at = os.getpid(), socket.gethostname(), time.time()
    return record
