"""Run history for the web page: ``GET /v1/runs`` lists runs, ``/view/*`` serves the run view's files.

The list merges the runs this server holds in memory (running or recently
finished: their events can be replayed and followed live) with the runs its
store keeps (those of earlier servers too), newest first, filtered by status,
thread and team. Only runs of teams served here are listed, each masked with
its team's secrets.

With a store, :class:`EventKeeper` writes each run's events there when the run
ends or suspends (one batch per run, off the loop: see
:mod:`teamrun.store.run_events`), and :func:`stored_events` reads them back for
``GET /v1/runs/{id}/events`` of a run this process does not hold, so the page
opens a run of an earlier server (or of another worker) with its timeline. A
served run that another process continues (``teamrun answer``, ``resume``) has
that process's events kept after the server's, as the run's next part
(:class:`ContinuedEvents`); the server that held the run streams them too
(:meth:`EventKeeper.continued_elsewhere`), and follows them from the store
while that process runs it (:meth:`EventKeeper.following`). A server that
continues such a run itself keeps its events as the part after that process's.
"""

from __future__ import annotations

import asyncio
import datetime as _dt
import time
import weakref
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from teamrun.events import LlmIO
from teamrun.logs import get_logger
from teamrun.secrets import Redactor
from teamrun.serve.runs import RunHandle, RunRegistry, line_record, reconciled, stored_record
from teamrun.serve.served import Served

if TYPE_CHECKING:
    from teamrun.events import Event
    from teamrun.store import Store
    from teamrun.store.records import JournaledRun

__all__ = [
    "FOLLOW_POLL_S",
    "RUN_STATUSES",
    "ContinuedEvents",
    "EventKeeper",
    "continued_events",
    "list_runs",
    "list_runs_async",
    "stored_events",
]

_log = get_logger(__name__)

RUN_STATUSES = ("running", "done", "failed", "budget_exhausted", "cancelled", "interrupted", "waiting")
"""What ``?status=`` may ask for (``interrupted``: a stored run whose process is gone)."""

MAX_LISTED = 500

FOLLOW_POLL_S = 0.5
"""How often a stream following a run another process continues reads the store (:meth:`EventKeeper.following`)."""
FOLLOW_SETTLE_S = 5.0
"""How long after such a run's record stopped its stream waits for the continuation's events to be kept."""

StoredRun = Callable[[], Awaitable[tuple[list[dict[str, Any]] | None, dict[str, Any]] | None]]
"""Reads a run's kept events (masked) and its record from the store (:data:`teamrun.serve.sse.Fetch`)."""


def _spent(tokens: int, cost: float, *, known: bool) -> dict[str, Any]:
    """A listed run's tokens and cost: ``None`` and ``usage_known: false`` when some were not reported (a
    provider that sent no usage, a remote agent), never a 0 that would mean nothing was spent."""
    return {"tokens": tokens, "cost": cost} if known else {"tokens": None, "cost": None, "usage_known": False}


def _from_handle(handle: RunHandle) -> dict[str, Any]:
    result = handle.result
    return {
        "id": handle.id,
        "team": handle.team,
        "status": handle.state,
        "thread": handle.thread,
        "created": handle.created,
        "ended": None,
        **(
            _spent(result.usage.total_tokens, result.cost, known=result.usage_known)
            if result is not None
            else _spent(0, 0.0, known=True)
        ),
        "input": handle.input,
        "source": "server",
        "events": True,
    }


def _from_store(run: JournaledRun) -> dict[str, Any]:
    return {
        "id": run.run_id,
        "team": run.team,
        "status": run.shown_status(),
        "thread": run.thread_id,
        "created": run.started_at,
        "ended": run.ended_at,
        **_spent(int(run.usage.get("total_tokens", 0) or 0), run.cost, known=run.usage_known),
        "input": run.input,
        "source": "store",
        "events": False,
    }


def _stored_runs(
    store: Store, *, status: str | None, thread: str | None, team: str | None, teams: Sequence[str], limit: int
) -> list[JournaledRun]:
    """The store's newest runs matching the filters (blocking)."""
    import sqlalchemy as sa

    from teamrun.store.journal import StoreJournal
    from teamrun.store.schema import runs

    query = sa.select(runs.c.id).where(runs.c.team.in_(list(teams)))
    if team is not None:
        query = query.where(runs.c.team == team)
    if thread is not None:
        query = query.where(runs.c.thread_id == thread)
    if status is not None:  # interrupted is a running row whose process is gone
        query = query.where(runs.c.status == ("running" if status == "interrupted" else status))
    query = query.order_by(runs.c.started_at.desc(), runs.c.id).limit(limit)
    journal = StoreJournal(store)
    with store.errors("list runs"), store.engine.connect() as conn:
        ids = [str(row[0]) for row in conn.execute(query)]
    found = [run for run in (journal.get_run(run_id) for run_id in ids) if run is not None]
    return [run for run in found if status is None or run.shown_status() == status]


def list_runs(
    registry: RunRegistry,
    served: Mapping[str, Served],
    *,
    status: str | None = None,
    thread: str | None = None,
    team: str | None = None,
    limit: int = 100,
) -> list[dict[str, Any]]:
    """The runs to list, newest first: the server's, then the store's (call it on the server's loop)."""
    teams = [name for name in served if team is None or name == team]
    held = [_from_handle(h) | {"reconciled": reconciled(h), "attempt": h.attempt} for h in registry.held()]
    return _merged(held, registry.store, served, teams, status=status, thread=thread, team=team, limit=limit)


async def list_runs_async(
    registry: RunRegistry,
    served: Mapping[str, Served],
    *,
    status: str | None = None,
    thread: str | None = None,
    team: str | None = None,
    limit: int = 100,
) -> list[dict[str, Any]]:
    """:func:`list_runs` with the store's part in a thread (the server's handles are read on the loop)."""
    teams = [name for name in served if team is None or name == team]
    held = [_from_handle(h) | {"reconciled": reconciled(h), "attempt": h.attempt} for h in registry.held()]
    return await asyncio.to_thread(
        _merged, held, registry.store, served, teams, status=status, thread=thread, team=team, limit=limit
    )


def _merged(
    held: list[dict[str, Any]],
    store: Store | None,
    served: Mapping[str, Served],
    teams: Sequence[str],
    *,
    status: str | None,
    thread: str | None,
    team: str | None,
    limit: int,
) -> list[dict[str, Any]]:
    rows: dict[str, dict[str, Any]] = {}
    checked = [row for row in held if row.pop("reconciled")]
    attempts = {row["id"]: row.pop("attempt") for row in held}
    truth = _continued_elsewhere(store, checked, attempts) if store else {}
    for row in held:
        row = truth.get(row["id"], row)
        if (
            row["team"] in teams
            and (status is None or row["status"] == status)
            and (thread is None or row["thread"] == thread)
        ):
            rows[row["id"]] = row
    if store is not None and teams:
        for run in _stored_runs(store, status=status, thread=thread, team=team, teams=teams, limit=limit):
            rows.setdefault(run.run_id, _from_store(run))
        from_store = [row for row in rows.values() if row["source"] == "store"]
        with store.errors("list runs"):
            kept = store.run_events.kept(row["id"] for row in from_store)
        for row in from_store:
            row["events"] = row["id"] in kept
    ordered = sorted(rows.values(), key=lambda r: (-float(r["created"] or 0), r["id"]))[:limit]
    shown = []
    for row in ordered:
        row["started_at"] = _dt.datetime.fromtimestamp(float(row["created"] or 0), _dt.UTC).isoformat()
        shown.append(served[row["team"]].redactor.value(row))
    return shown


def _continued_elsewhere(
    store: Store, held: list[dict[str, Any]], attempts: Mapping[str, int | None]
) -> dict[str, dict[str, Any]]:
    """The store's row of each held run (stopped here) that another process continued since (``teamrun answer``,
    ``resume``): its stored status is not what this server holds, or its attempt is a later one (it may wait
    again, as it did here); the store is the truth (blocking)."""
    import sqlalchemy as sa

    from teamrun.store.journal import StoreJournal
    from teamrun.store.schema import runs

    said = {row["id"]: row["status"] for row in held}
    ids = list(said)

    def later(run_id: str, meta: Any) -> bool:
        attempt = attempts.get(run_id)
        return attempt is not None and int((meta or {}).get("attempts") or 1) != attempt

    changed: list[str] = []
    with store.errors("list runs"), store.engine.connect() as conn:
        for start in range(0, len(ids), 500):
            query = sa.select(runs.c.id, runs.c.status, runs.c.meta).where(runs.c.id.in_(ids[start : start + 500]))
            changed.extend(
                str(row[0]) for row in conn.execute(query) if row[1] != said[str(row[0])] or later(str(row[0]), row[2])
            )
    journal = StoreJournal(store)
    found = (journal.get_run(run_id) for run_id in changed)
    return {
        run.run_id: _from_store(run)
        for run in found
        if run is not None and (run.shown_status() != said[run.run_id] or later(run.run_id, {"attempts": run.attempts}))
    }


class EventKeeper:
    """Keeps each served run's events in the store as it ends or suspends: one batch, written off the loop.

    On the loop :meth:`run_over` only copies the list of the run's event lines;
    masking what the server has not masked yet (lines are masked on first read),
    JSON, zlib and the write happen in a thread. A handle continued in this
    process rewrites its own part; a new handle of a run (continued after a
    restart) adds the next one.
    """

    def __init__(self, store: Store) -> None:
        self.store = store
        self._parts: dict[str, tuple[weakref.ref[RunHandle], int]] = {}
        """The part each handle of this process wrote, by run id (dropped with the handle)."""
        self._writes: dict[str, asyncio.Task[None]] = {}
        """The latest write of each run still in progress (a run's writes follow each other)."""
        self._begun: dict[str, int] = {}
        """How many writes of each run began here, while its handle lives (:meth:`earlier` reads again when one
        began as it read)."""

    def run_over(self, handle: RunHandle) -> None:
        """The registry's ``when_over`` hook (on the loop): write the run's events so far, in the background.
        Not for a run that moved to another replica (its record of events is that replica's from then on), nor for
        one without events (it never started: refused, or its lease not taken)."""
        if handle.moved or not handle._lines:  # nothing to keep (a run refused before it started: no lease)
            return
        lines, masked = list(handle._lines), handle._masked  # the lines before ``masked`` are masked already
        task = asyncio.get_running_loop().create_task(
            self._write(handle, lines, masked, self._writes.get(handle.id)), name=f"teamrun-keep-events:{handle.id}"
        )
        self._writes[handle.id] = task
        if handle.id not in self._begun:
            weakref.finalize(handle, self._begun.pop, handle.id, None)
        self._begun[handle.id] = self._begun.get(handle.id, 0) + 1
        task.add_done_callback(lambda done: self._forget(handle.id, done))

    async def flush(self) -> None:
        """Until every write started is over (the server's shutdown)."""
        while self._writes:
            await asyncio.wait(list(self._writes.values()))

    def _forget(self, run_id: str, task: asyncio.Task[None]) -> None:
        if self._writes.get(run_id) is task:
            del self._writes[run_id]

    async def _write(
        self,
        handle: RunHandle,
        lines: list[Event | dict[str, Any]],
        masked: int,
        after: asyncio.Task[None] | None,
    ) -> None:
        if after is not None:
            await asyncio.wait([after])
        known = self._parts.get(handle.id)
        part = known[1] if known is not None and known[0]() is handle else None
        try:
            kept = await asyncio.to_thread(self._save, handle.id, lines, masked, handle.redactor, part, handle.content)
        except Exception as exc:  # the run itself is over and recorded; only its timeline is not kept
            _log.warning("serve_events_not_kept", run=handle.id, error=str(exc), error_type=type(exc).__name__)
            return
        if kept is None:
            _log.info("serve_events_not_kept", run=handle.id, events=len(lines))
            return
        if kept.without_content:
            _log.warning("serve_events_kept_without_content", run=handle.id, bytes=kept.raw_bytes)
        run_id = handle.id
        self._parts[run_id] = (weakref.ref(handle, lambda ref: self._drop(run_id, ref)), kept.part)

    async def earlier(self, handle: RunHandle) -> list[dict[str, Any]] | None:
        """The events other processes kept of ``handle``'s run, before this handle's own: a run continued here
        after a restart shows them first. ``None``: there are none.

        Never this handle's own part: a write of it in progress (a replica keeps a running run's events on its
        heartbeat) is awaited first, since its part is known only once it is written, and a read during which
        one began is read again (it would show the run's first events twice, numbered as another process's)."""
        while True:
            pending = self._writes.get(handle.id)
            if pending is not None:
                await asyncio.wait([pending])
                continue
            known = self._parts.get(handle.id)
            before = known[1] if known is not None and known[0]() is handle else None
            if before == 0:
                return None
            begun = self._begun.get(handle.id, 0)
            events = await asyncio.to_thread(self._load, handle.id, before)
            if before is None and (self._begun.get(handle.id, 0) != begun or handle.id in self._writes):
                continue  # this handle's first part may be among them: read again once it is written
            return None if events is None else [handle.redactor.value(event) for event in events]

    def _load(self, run_id: str, before: int | None) -> list[dict[str, Any]] | None:
        with self.store.errors("read a run's events"):
            return self.store.run_events.load(run_id, before=before)

    def continued_elsewhere(self, handle: RunHandle) -> list[dict[str, Any]] | None:
        """Every kept event of ``handle``'s run when another process (``teamrun answer``, ``resume``) kept its
        own after this handle's (blocking): the whole run, masked with the handle's redactor. ``None``: this
        handle's events are not kept yet, or nothing came after them."""
        known = self._parts.get(handle.id)
        if known is None or known[0]() is not handle:
            return None
        with self.store.errors("read a run's events"):
            upto = self.store.run_events.load(handle.id, before=known[1] + 1)
            every = self.store.run_events.load(handle.id)
        if upto is None or every is None or len(every) <= len(upto):
            return None
        return [handle.redactor.value(event) for event in every]

    def following(self, handle: RunHandle, *, settle_s: float = FOLLOW_SETTLE_S) -> StoredRun | None:
        """For ``handle``'s run, stopped here and running in another process now (``teamrun answer``, ``resume``):
        what :func:`~teamrun.serve.sse.store_stream` polls to follow it, every kept event of the run and its
        record, masked with the handle's redactor. That process keeps its events as the run's next part just
        after it records the run's end, so until that part is there the run is still said running to the
        stream (at most ``settle_s`` after its record stopped: a process that could not keep them). ``None``:
        this handle's events are not kept yet (nothing to number the continuation's after)."""
        known = self._parts.get(handle.id)
        if known is None or known[0]() is not handle:
            return None
        run_id, part, store = handle.id, known[1], self.store
        stopped: list[float] = []

        def read() -> tuple[JournaledRun | None, list[dict[str, Any]] | None, bool]:
            from teamrun.store.journal import StoreJournal

            with store.errors("read a run's events"):
                run = StoreJournal(store).get_run(run_id)
                return run, store.run_events.load(run_id), _has_part_after(store, run_id, part)

        async def fetch() -> tuple[list[dict[str, Any]] | None, dict[str, Any]] | None:
            run, events, continued = await asyncio.to_thread(read)
            if run is None:
                return None
            redactor = handle.redactor
            record: dict[str, Any] = redactor.value(stored_record(run, events=events is not None))
            if record["status"] != "running" and not continued:  # its continuation's events are about to be kept
                stopped.append(time.monotonic())
                if stopped[-1] - stopped[0] < settle_s:
                    record["status"] = "running"  # never sent: the stream goes on polling
            return [redactor.value(event) for event in events or []], record

        return fetch

    def _drop(self, run_id: str, ref: weakref.ref[RunHandle]) -> None:
        known = self._parts.get(run_id)
        if known is not None and known[0] is ref:
            del self._parts[run_id]

    def _save(
        self,
        run_id: str,
        lines: list[Event | dict[str, Any]],
        masked: int,
        redactor: Redactor,
        part: int | None,
        content: bool,
    ) -> Any:

        events: list[dict[str, Any]] = []
        for index, line in enumerate(lines):
            record = line_record(line, run_id, content=content)
            events.append(record if index < masked else redactor.value(record))
        with self.store.errors("keep a run's events"):
            return self.store.run_events.save(run_id, events, part=part)


class ContinuedEvents:
    """A run subscriber in a process that continues a served run (``teamrun answer``, ``resume``): its events,
    kept in the store after those of the server that ran it so far, as the run's next part (what a server
    continuing it after a restart adds), so ``GET /v1/runs/{id}/events`` on any server shows the whole run.
    Made by :func:`continued_events`, only for a run whose events the store keeps already."""

    def __init__(self, store: Store, run_id: str, redactor: Redactor) -> None:
        self.store = store
        self.run_id = run_id
        self.redactor = redactor
        now = time.time()
        self._lines: list[Event | dict[str, Any]] = [
            {"kind": "run_continued", "run_id": run_id, "ts": round(now, 6), "data": {"ts": now}}
        ]

    def __call__(self, event: Event) -> None:
        if not isinstance(event, LlmIO):  # the model calls' messages are kept only under serve's --trace-content
            self._lines.append(event)

    def keep(self) -> None:
        """Keep the events so far as the run's next part (blocking); a failure is logged, never raised: the run
        itself is over and recorded, only its timeline is not kept."""
        events = [self.redactor.value(line_record(line, self.run_id)) for line in self._lines]
        try:
            with self.store.errors("keep a run's events"):
                self.store.run_events.save(self.run_id, events)
        except Exception as exc:
            _log.warning("run_events_not_kept", run=self.run_id, error=str(exc), error_type=type(exc).__name__)


def continued_events(store: Store, run_id: str, redactor: Redactor) -> ContinuedEvents | None:
    """A :class:`ContinuedEvents` for run ``run_id``, continued by this process, when the store keeps the events
    of the server that ran it so far (blocking); ``None`` for a run no server kept events of (a command's own
    run: its timeline would start in the middle)."""
    try:
        with store.errors("read a run's events"):
            kept = run_id in store.run_events.kept([run_id])
    except Exception as exc:
        _log.warning("run_events_not_read", run=run_id, error=str(exc), error_type=type(exc).__name__)
        return None
    return ContinuedEvents(store, run_id, redactor) if kept else None


def _has_part_after(store: Store, run_id: str, part: int) -> bool:
    """Whether the store keeps a part of ``run_id``'s events after part ``part`` (blocking)."""
    import sqlalchemy as sa

    from teamrun.store.schema import run_events

    query = sa.select(run_events.c.part).where(run_events.c.run_id == run_id, run_events.c.part > part).limit(1)
    with store.engine.connect() as conn:
        return conn.execute(query).first() is not None


def _stored_events(
    store: Store, served: Mapping[str, Served], run_id: str
) -> tuple[list[dict[str, Any]] | None, dict[str, Any]] | None:
    from teamrun.store.journal import StoreJournal

    with store.errors("read a run"):
        run = StoreJournal(store).get_run(run_id)
        if run is None or run.team not in served:  # the store's runs of teams served here only
            return None
        events = store.run_events.load(run_id)
    redactor = served[run.team].redactor
    record: dict[str, Any] = redactor.value(stored_record(run, events=events is not None))
    if events is None:
        return None, record
    return [redactor.value(event) for event in events], record


async def stored_events(
    store: Store, served: Mapping[str, Served], run_id: str
) -> tuple[list[dict[str, Any]] | None, dict[str, Any]] | None:
    """A stored run's kept events (``None`` if none are kept) and its record, both masked with its team's
    secrets; ``None`` when the store has no such run of a team served here."""
    return await asyncio.to_thread(_stored_events, store, served, run_id)
