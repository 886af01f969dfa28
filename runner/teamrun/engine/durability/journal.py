"""Durable runs: every finished model reply and tool result of a run, written as it completes.

A journaled run writes one :class:`JournalEntry` per finished model call and
per finished tool call, keyed by :class:`EntryKey` — the agent *invocation*
(a stable name: the agent path with the turn and call position each delegation
came from, so concurrent workers finishing in any order never collide), the
model-call number within that invocation, the kind, and the tool call's
position in the reply — plus a hash of the request, so a request that changed
is never answered from the journal. A tool that is not idempotent also gets a
``tool_start`` entry, written (and waited for) before it runs: on resume, a
start without a result means it may have run halfway.

Where entries go is a :class:`JournalBackend` (:class:`MemoryJournal` for
tests, :class:`teamrun.store.journal.StoreJournal` for the SQLite/PostgreSQL
store). Writes never block the event loop: :class:`RunJournal` hands them to
one writer thread, which commits whatever is queued in one small transaction.
How a resumed run uses the entries is :mod:`teamrun.engine.durability.resume`.
"""

from __future__ import annotations

import asyncio
import datetime as _dt
import hashlib
import json
import os
import queue
import socket
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Protocol

from teamrun.config.models import ToolDef
from teamrun.engine.durability.replay import Replay
from teamrun.llm.types import Message, ModelSettings, ToolSchema
from teamrun.logs import get_logger
from teamrun.secrets import Redactor, StoreMask, mask_request
from teamrun.store.records import HEARTBEAT_S, EntryKey, EntryKind, JournaledRun, JournalEntry
from teamrun.tools.base import Tool

__all__ = [
    "EntryKey",
    "EntryKind",
    "JournalBackend",
    "JournalEntry",
    "JournaledRun",
    "MemoryJournal",
    "RunJournal",
    "request_hash",
    "tool_hash",
    "tool_idempotent",
]

_log = get_logger(__name__)
LINGER_S = 0.05
"""How long the writer gathers entries that nobody waits for into one transaction."""
GROUP_COMMIT_S = 0.01
"""How long a write that is waited for waits for company while other model calls of the run are open: the
replies of concurrent workers arriving meanwhile share its transaction (a commit costs the writer more CPU
than the entries in it). With no other call open it is committed at once."""
HOLD_FIRST_S = 0.25
HOLD_MAX_S = 2.0
"""A write the store could not take for a run that must not go on unjournaled (a replica's, under a lease:
``holds_run``) is tried again after these pauses, doubling, until the store takes or refuses it; the run holds
meanwhile at its next write it waits for."""


class JournalBackend(Protocol):
    """Where a run's entries and its record are kept. Called from the journal's writer thread."""

    def load(self, run_id: str) -> list[JournalEntry]:
        """The run's entries, in the order they were written."""
        ...

    def append(self, run_id: str, entries: Sequence[JournalEntry], *, heartbeat: float | None = None) -> None:
        """Write ``entries`` in one transaction (and touch the run's heartbeat when given)."""
        ...

    def save_run(self, run: JournaledRun) -> None:
        """Insert or update the run's record."""
        ...

    def get_run(self, run_id: str) -> JournaledRun | None: ...


class MemoryJournal:
    """A :class:`JournalBackend` in memory (tests, and the benchmark's baseline for the store)."""

    def __init__(self) -> None:
        self.entries: dict[str, list[JournalEntry]] = {}
        self.runs: dict[str, JournaledRun] = {}
        self.transactions = 0
        self._lock = threading.Lock()

    def load(self, run_id: str) -> list[JournalEntry]:
        with self._lock:
            return list(self.entries.get(run_id, ()))

    def append(self, run_id: str, entries: Sequence[JournalEntry], *, heartbeat: float | None = None) -> None:
        with self._lock:
            self.entries.setdefault(run_id, []).extend(entries)
            self.transactions += 1
            if heartbeat is not None and run_id in self.runs:
                self.runs[run_id].heartbeat_at = heartbeat

    def save_run(self, run: JournaledRun) -> None:
        with self._lock:
            self.runs[run.run_id] = run

    def get_run(self, run_id: str) -> JournaledRun | None:
        with self._lock:
            return self.runs.get(run_id)


# -- hashes -------------------------------------------------------------------------------
def request_hash(
    messages: Sequence[Message],
    settings: ModelSettings,
    tools: Sequence[ToolSchema],
    response_format: Mapping[str, Any] | None,
    *,
    today: str | None = None,
    secrets: Redactor | None = None,
) -> str:
    """The model request's hash: model, messages (as sent: an agent's trailing context message too, see
    :func:`teamrun.llm.caching.runner_context`), tools and response format, with what changes between
    attempts of one run masked by :func:`teamrun.secrets.mask_request` — today's date (a run resumed the next
    day), the random fences of referenced results, and ``secrets`` (what the store masks: a replayed reply
    carries the mask where the live one carried the secret). One JSON dump and a few text passes: it is
    computed for every journaled call."""
    day = today or _dt.date.today().isoformat()
    body = json.dumps(
        [settings.model, messages, tools, response_format], ensure_ascii=False, sort_keys=True, default=str
    )
    return hashlib.sha256(mask_request(body, today=day, secrets=secrets).encode()).hexdigest()


def tool_hash(name: str, arguments: str) -> str:
    """What a tool call asked: its name and the model's raw arguments."""
    return hashlib.sha256(json.dumps([name, arguments]).encode()).hexdigest()


def tool_idempotent(tool: Tool, definitions: Mapping[str, ToolDef] | None) -> bool:
    """Whether running ``tool`` twice with the same arguments is harmless (a resume may then run it again).

    The entry's ``idempotent:`` when set; otherwise python tools are, command tools are not, and an MCP
    server's tool is when the server marks it read-only or idempotent. A tool the team file does not
    declare says so with an ``idempotent`` attribute (default: it is).
    """
    source = getattr(tool, "source", None)
    entry = getattr(source, "entry", None) or tool.name
    definition = (definitions or {}).get(entry)
    if definition is None:
        return bool(getattr(tool, "idempotent", True))
    if definition.idempotent is not None:
        return definition.idempotent
    if definition.mcp is not None:
        hints = getattr(tool, "annotations", None)
        return bool(getattr(hints, "read_only_hint", None) or getattr(hints, "idempotent_hint", None))
    return definition.command is None


# -- the writer -------------------------------------------------------------------------------
class _Write:
    __slots__ = ("done", "entry", "loop")

    def __init__(
        self,
        entry: JournalEntry | None,
        loop: asyncio.AbstractEventLoop | None = None,
        done: asyncio.Future[None] | None = None,
    ) -> None:
        self.entry, self.loop, self.done = entry, loop, done


class RunJournal:
    """One run's journal: the record, a writer thread for entries, and the replay of earlier attempts.

    ``record`` is what the run is (its id is the run's id); ``earlier`` are the
    entries of the attempts before this one (empty for a first run). Use
    :meth:`open` before the run and :meth:`close` after it (``Team.run`` does).
    """

    def __init__(
        self,
        backend: JournalBackend,
        record: JournaledRun,
        earlier: Sequence[JournalEntry] = (),
        *,
        confirmed_tools: bool = False,
    ) -> None:
        self.backend = backend
        self.record = record
        self.replay = Replay(earlier, confirmed_tools=confirmed_tools)
        self.secrets = StoreMask()
        """What the store masks (the environment's secret-named variables): also masked in request hashes."""
        self.written = 0
        self._kept = Redactor(include_env=False)
        """The run's own secrets (a ``secret: true`` person's answer): masked in the run's record."""
        self._queue: queue.SimpleQueue[_Write | None] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._closing = False
        self._stopping = threading.Event()
        self._queued = 0
        """Entries queued by :meth:`write` and not committed (nor given up) yet."""
        self._counting = threading.Lock()
        self._open_calls = 0
        """Model calls started and not written yet (one answered from the journal or failed stays counted:
        it only makes a commit wait for company up to :data:`GROUP_COMMIT_S`)."""
        self.failure: str | None = None
        """Why writing failed (the run goes on unjournaled after a failure, reported at its end; a leased run's
        write is held and tried again instead, see :meth:`write_now`)."""
        self.fenced: BaseException | None = None
        """The store refused a write because another process executes the run now (an error with a true
        ``stops_run``: a replica's stale lease): every :meth:`write_now` raises it, so the run stops here."""

    @property
    def run_id(self) -> str:
        return self.record.run_id

    # -- lifecycle ------------------------------------------------------------------------------
    async def open(self) -> None:
        """Save the record as running and start the writer thread."""
        self.record.status, self.record.pid, self.record.host = "running", os.getpid(), socket.gethostname()
        self.record.heartbeat_at = time.time()
        try:
            await asyncio.to_thread(self.backend.save_run, self.record)
        except Exception as exc:  # a read-only or unreachable store: the run goes on unjournaled
            if getattr(exc, "refuses_run", False):  # unless it may not run without its record (a replica's lease)
                raise
            self.failure = f"{type(exc).__name__}: {_first_line(exc)}"  # Team.run says it as a run warning
            return
        self._thread = threading.Thread(target=self._write_loop, name=f"teamrun-journal-{self.run_id}", daemon=True)
        self._thread.start()

    def keep_secrets(self, values: Iterable[str]) -> None:
        """Mask these values in the run's record (its answer and error) as the run's events mask them: the
        record is what `teamrun runs` and a restarted server show. The entries keep them (a resume needs them)."""
        self._kept.add(values, declared=True)

    async def close(
        self, *, status: str, usage: dict[str, int], cost: float, final_text: str, error: str | None
    ) -> None:
        """Write what is queued, then the run's outcome."""
        if self._thread is not None:
            self._closing = True  # a write that comes later (a background worker's) is dropped, never awaited
            self._stopping.set()  # a held write is tried once more, then given up (the run ended meanwhile)
            self._queue.put(None)
            await asyncio.to_thread(self._thread.join)
            self._thread = None
        record = self.record
        record.status, record.usage, record.cost = status, usage, cost
        record.final_text, record.ended_at = self._kept.text(final_text), time.time()
        record.error = None if error is None else self._kept.text(error)
        record.replayed_calls = self.replay.replayed_calls
        try:
            await asyncio.to_thread(self.backend.save_run, record)
        except Exception as exc:
            self.failure = self.failure or f"{type(exc).__name__}: {_first_line(exc)}"

    # -- entries --------------------------------------------------------------------------------
    def request_hash(
        self,
        messages: Sequence[Message],
        settings: ModelSettings,
        tools: Sequence[ToolSchema],
        response_format: Mapping[str, Any] | None,
    ) -> str:
        """:func:`request_hash` with this run's secrets masked (asked as a model call starts: the call counts
        as open until its reply is written)."""
        self._open_calls += 1
        return request_hash(messages, settings, tools, response_format, secrets=self.secrets)

    def write(self, entry: JournalEntry) -> None:
        """Queue ``entry``; the writer thread commits it shortly (the caller does not wait)."""
        if self._thread is not None and not self._closing:  # none when the journal could not be opened
            with self._counting:
                self._queued += 1
            self._queue.put(_Write(entry))

    async def settle(self) -> None:
        """Before a model call of a run that must not go on unjournaled (a replica's, under a lease): until the
        entries queued so far (the tool results the call carries) are committed. A replica that lost the run learns
        it here, by a refused write, before it pays the call (:attr:`fenced` is raised); one cut off from the store
        holds here (:meth:`write_now`). Nothing to wait for otherwise: one process's queued results ride with the
        next reply's commit."""
        if self.fenced is not None:
            raise self.fenced
        if self._queued == 0 or self._thread is None or self._closing:
            return
        holds = getattr(self.backend, "holds_run", None)
        if holds is None or not holds(self.run_id):
            return
        loop = asyncio.get_running_loop()
        done: asyncio.Future[None] = loop.create_future()
        self._queue.put(_Write(None, loop, done))
        await done
        if self.fenced is not None:
            raise self.fenced

    async def write_now(self, entry: JournalEntry) -> None:
        """Write ``entry`` and wait until it is committed: a model reply or tool result before the engine acts
        on it (a kill then re-pays only what was in flight), a non-idempotent tool's start before it runs.

        Writes that wait are committed at once, together with whatever else is queued (group commit: the
        replies of concurrent workers share one transaction). A failed write does not raise: the run goes on
        unjournaled and says so at its end. A run executed under a lease (a replica's) is held instead, here,
        while the store is out of reach (:data:`HOLD_FIRST_S`): another replica would continue it from its
        journal once its lease expired; once the store answers, the write goes through (the run goes on) or is
        refused (the lease went: the run stops here, :attr:`fenced`).
        """
        if entry.key.kind == "model":
            self._open_calls = max(0, self._open_calls - 1)
        if self.fenced is not None:
            raise self.fenced
        if self._thread is None or self._closing:
            return
        loop = asyncio.get_running_loop()
        done: asyncio.Future[None] = loop.create_future()
        self._queue.put(_Write(entry, loop, done))
        await done
        if self.fenced is not None:  # not written: another process executes the run now
            raise self.fenced

    def _write_loop(self) -> None:
        last_beat = time.time()
        stop = False
        while not stop:
            batch: list[_Write] = []
            try:
                item = self._queue.get(timeout=HEARTBEAT_S)
            except queue.Empty:
                item = _Write(None)  # nothing to write: a heartbeat only
            linger_until = time.monotonic() + LINGER_S
            while True:  # gather what comes meanwhile into the same transaction
                if item is None:
                    stop = True
                    break
                if item.entry is not None or item.done is not None:  # an entry, or a waiter (:meth:`settle`)
                    batch.append(item)
                if item.done is not None:  # someone waits: commit soon, with the replies of calls still open
                    company = GROUP_COMMIT_S if self._open_calls > 0 else 0.0
                    linger_until = min(linger_until, time.monotonic() + company)
                left = linger_until - time.monotonic()
                try:
                    item = self._queue.get(timeout=left) if left > 0 else self._queue.get_nowait()
                except queue.Empty:
                    break
            if stop:  # anything queued after the end (it raced with close): written too, its waiters settled
                while True:
                    try:
                        late = self._queue.get_nowait()
                    except queue.Empty:
                        break
                    if late is not None and (late.entry is not None or late.done is not None):
                        batch.append(late)
            now = time.time()
            beat = now if now - last_beat >= HEARTBEAT_S else None
            if beat is not None:
                last_beat = now
            self._commit(batch, beat)
        release = getattr(self.backend, "release", None)  # the store's connection this thread wrote on
        if release is not None:
            try:
                release()
            except Exception as exc:  # closing a lost connection must not crash the run's end
                _log.warning("journal_release_failed", run_id=self.run_id, error=str(exc))

    def _commit(self, batch: list[_Write], beat: float | None) -> None:
        entries = [w.entry for w in batch if w.entry is not None]
        queued = sum(1 for w in batch if w.entry is not None and w.done is None)
        try:
            self._write(entries, batch, beat)
        finally:
            with self._counting:
                self._queued -= queued
        for write in batch:  # a failed write is reported at the end; the run goes on
            if write.loop is not None and write.done is not None:
                write.loop.call_soon_threadsafe(_settle, write.done)

    def _write(self, entries: list[JournalEntry], batch: list[_Write], beat: float | None) -> None:
        if self.failure is None and (batch or beat is not None):
            held_since: float | None = None
            pause = HOLD_FIRST_S
            while True:
                try:
                    self.backend.append(self.run_id, entries, heartbeat=beat)
                    self.written += len(entries)
                    if held_since is not None:
                        held_s = round(time.time() - held_since, 1)
                        _log.info("journal_write_resumed", run_id=self.run_id, held_s=held_s)
                    break
                except Exception as exc:  # a full disk or a lost database must not crash the run
                    if getattr(exc, "holds_run", False) and not self._closing:
                        if held_since is None:  # a leased run: it holds here until the store takes the write
                            held_since = time.time()
                            _log.warning("journal_write_held", run_id=self.run_id, error=str(exc))
                        if not self._stopping.wait(pause):
                            pause = min(pause * 2, HOLD_MAX_S)
                            continue
                    self.failure = f"{type(exc).__name__}: {exc}"
                    if getattr(exc, "stops_run", False):
                        self.fenced = exc
                    _log.warning("journal_write_failed", run_id=self.run_id, error=self.failure)
                    break


def _first_line(exc: BaseException) -> str:
    """A database error's first line (SQLAlchemy appends the statement and its parameters)."""
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def _settle(done: asyncio.Future[None]) -> None:
    if not done.done():
        done.set_result(None)
