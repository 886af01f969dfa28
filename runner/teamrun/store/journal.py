"""Run journals in the store: the :class:`~teamrun.engine.durability.journal.JournalBackend` over ``runs``/``journal``.

A journaled run's row in ``runs`` carries its status, input, answer, usage and
cost; what resuming needs besides (the team file, ``--var`` values, ``--model``)
and how to tell a crashed run from a running one (pid, host, heartbeat) are in
its ``meta``. Each batch of entries is one transaction: rows appended to
``journal`` with the next ``seq``; ``agent_path`` holds the invocation key and
``call_key`` ``<call number>.<tool position>``.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import threading
from collections.abc import Iterator, Sequence
from typing import Any

import sqlalchemy as sa

from teamrun.secrets import unmask
from teamrun.store.db import Store, first_line
from teamrun.store.leases import (
    OVER,
    WAITING,
    Fence,
    LeasedWriteFailed,
    LeaseNotTaken,
    LeaseRepository,
    Opening,
    StaleLease,
)
from teamrun.store.records import USAGE_UNKNOWN_KEY, EntryKey, JournaledRun, JournalEntry
from teamrun.store.schema import journal, runs

__all__ = ["StoreJournal"]

_INSERT = journal.insert()
_UNREACHED = (sa.exc.OperationalError, sa.exc.InterfaceError, sa.exc.DisconnectionError, sa.exc.TimeoutError)
"""A write that did not reach the store (down, cut off, its connections all busy): worth trying again. Any other
error (a constraint, a payload the database refuses) would fail the same way again."""

_META_FIELDS = (
    "team_file",
    "vars",
    "limits",
    "model",
    "api_base",
    "pid",
    "host",
    "heartbeat_at",
    "attempts",
    "replayed_calls",
)
"""The :class:`JournaledRun` fields kept in ``runs.meta``."""


def _when(stamp: float | None) -> _dt.datetime | None:
    return None if stamp is None else _dt.datetime.fromtimestamp(stamp, _dt.UTC)


def _stamp(when: _dt.datetime | None) -> float | None:
    if when is None:
        return None
    if when.tzinfo is None:  # SQLite hands back naive datetimes (stored as UTC)
        when = when.replace(tzinfo=_dt.UTC)
    return when.timestamp()


class StoreJournal:
    """Journals and journaled runs in a :class:`~teamrun.store.Store` (SQLite or PostgreSQL)."""

    def __init__(self, store: Store, *, location: str | None = None) -> None:
        self.store = store
        self.location = location
        """Where the store is, as the user gave it (``None``: the default store), for commands to paste."""
        self.engine = store.engine
        self._seq: dict[str, int] = {}
        self._lock = threading.Lock()
        self._local = threading.local()

    # -- entries --------------------------------------------------------------------------------
    def load(self, run_id: str) -> list[JournalEntry]:
        """The run's entries, in order. A run continued from them (:func:`~teamrun.engine.durability.resume.
        open_resume`) numbers its next entry after the store's last, never after one this object wrote before:
        another process (a replica) may have continued the run and journaled entries since (issue 46)."""
        with self._lock:
            self._seq.pop(run_id, None)
        query = (
            sa.select(
                journal.c.agent_path, journal.c.kind, journal.c.call_key, journal.c.request_hash, journal.c.payload
            )
            .where(journal.c.run_id == run_id)
            .order_by(journal.c.seq)
        )
        with self.store.errors(f"read the journal of run {run_id}"), self.engine.connect() as conn:
            rows = conn.execute(query).all()
        entries = []
        for invocation, kind, call_key, fingerprint, payload in rows:
            index, _, position = str(call_key).partition(".")
            entries.append(
                JournalEntry(
                    EntryKey(invocation, int(index), kind, int(position or 0)), fingerprint or "", dict(payload or {})
                )
            )
        return entries

    def append(self, run_id: str, entries: Sequence[JournalEntry], *, heartbeat: float | None = None) -> None:
        """One transaction, on the calling thread's own connection (a run's writer thread keeps one until
        :meth:`release`: a commit per batch of replies is then all a write costs).

        A write that fails for a run this process executes under a lease (a replica's) is checked against the
        lease on a fresh connection: a replica paused mid-write, whose transaction the database ended meanwhile,
        learns that another replica took the run (:class:`~teamrun.store.leases.StaleLease`: the run stops here)
        instead of going on unjournaled and paying its calls again."""
        try:
            self._append(run_id, entries, heartbeat)
        except StaleLease:
            raise
        except Exception as exc:
            if self.store.fences.get(run_id) is None:
                raise
            with contextlib.suppress(sa.exc.SQLAlchemyError), self.engine.begin() as conn:
                self._fenced(conn, run_id)  # raises StaleLease when the lease went meanwhile
            if not isinstance(exc, _UNREACHED):
                raise
            raise LeasedWriteFailed(
                f"cannot journal run {run_id} in the store {self.store.display}: {first_line(exc)}"
            ) from exc

    def holds_run(self, run_id: str) -> bool:
        """Whether ``run_id`` is executed here under a lease (a replica's): it must not go on unjournaled, and its
        model calls wait for the entries they carry (:meth:`RunJournal.settle
        <teamrun.engine.durability.journal.RunJournal.settle>`)."""
        return self.store.fences.get(run_id) is not None

    def _append(self, run_id: str, entries: Sequence[JournalEntry], heartbeat: float | None) -> None:
        now = _dt.datetime.now(_dt.UTC)
        with self._lock, self._writer_connection() as conn, conn.begin():
            known = self._seq.get(run_id)
            last = sa.select(sa.func.coalesce(sa.func.max(journal.c.seq), 0)).where(journal.c.run_id == run_id)
            if known is None and entries:  # the fencing check reads it too, when there is one: one round trip
                fenced = self._fenced(conn, run_id, last.scalar_subquery())
                known = int(fenced[0] if fenced is not None else conn.execute(last).scalar_one())
            else:
                self._fenced(conn, run_id)
            if entries:
                seq = known or 0
                rows = []
                for entry in entries:
                    seq += 1
                    key = entry.key
                    rows.append(
                        {
                            "run_id": run_id,
                            "seq": seq,
                            "agent_path": key.invocation,
                            "kind": key.kind,
                            "call_key": f"{key.index}.{key.position}",
                            "request_hash": entry.request_hash,
                            "payload": self.store.secrets.value(entry.payload),
                            "created_at": now,
                        }
                    )
                conn.execute(_INSERT, rows)
                self._seq[run_id] = seq
            if heartbeat is not None:
                meta = conn.execute(sa.select(runs.c.meta).where(runs.c.id == run_id)).scalar()
                if meta is not None:
                    conn.execute(
                        runs.update().where(runs.c.id == run_id).values(meta={**meta, "heartbeat_at": heartbeat})
                    )

    def _fenced(
        self, conn: sa.Connection, run_id: str, *also: sa.ScalarSelect[Any], release: str | None = None
    ) -> tuple[Any, ...] | None:
        """Refuse a write for ``run_id`` (:class:`~teamrun.store.leases.StaleLease`) when this process executes it
        under a lease that another replica has taken since (its fence's generation is stale). ``also``: what the
        write reads first, read by the check's own statement (:meth:`LeaseRepository.check`); ``None`` when the
        run is not fenced (nothing was checked nor read). ``release``: the write releases the lease too."""
        fence = self.store.fences.get(run_id)
        if fence is None:
            return None
        try:
            return LeaseRepository.check(conn, run_id, fence, *also, release=release)
        except StaleLease as exc:
            self.store.fences.refused(exc)
            raise

    @contextlib.contextmanager
    def _writer_connection(self) -> Iterator[sa.Connection]:
        conn: sa.Connection | None = getattr(self._local, "conn", None)
        if conn is None or conn.closed or conn.invalidated:
            conn = self._local.conn = self.engine.connect()
        try:
            yield conn
        except BaseException:  # a failed write: start the next one on a fresh connection
            self.release()
            raise

    def release(self) -> None:
        """Close the calling thread's writing connection (the journal's writer thread, when it ends)."""
        conn: sa.Connection | None = getattr(self._local, "conn", None)
        self._local.conn = None
        if conn is not None:
            conn.close()

    # -- runs ---------------------------------------------------------------------------------
    def save_run(self, run: JournaledRun) -> None:
        """Insert or update the run's row (a run that is resumed keeps its id and row).

        A run executed here under a lease (a replica's, :class:`~teamrun.store.leases.Fences`) is fenced by the
        write; its last one here releases the lease (a suspension) or deletes it (an outcome), and a cancelled
        run's outcome keeps why it was cancelled in its ``meta`` (``cancel_reason``)."""
        mask = self.store.secrets
        values: dict[str, Any] = {
            "team": run.team,
            "thread_id": run.thread_id,
            "status": run.status,
            "input": mask.text(run.input),
            "final_output": mask.text(run.final_text),
            "usage": dict(run.usage),
            "cost": run.cost,
            "started_at": _when(run.started_at),
            "ended_at": _when(run.ended_at),
            "error": None if run.error is None else mask.text(run.error),
        }
        meta = {name: getattr(run, name) for name in _META_FIELDS}
        meta["vars"] = mask.value(meta["vars"])
        fences = self.store.fences
        reason = fences.cancel_reason(run.run_id) if run.status == "cancelled" else None
        if reason is not None:  # cancelled by a replica: every replica says its words (the lease row goes now)
            meta["cancel_reason"] = mask.text(reason)
        last = None if run.status == "running" else WAITING if run.status == "waiting" else OVER
        if last is not None and fences.get(run.run_id) is not None:  # its last write here: it releases the lease
            fences.ending(run.run_id)
        opening = fences.take_opening(run.run_id) if last is None else None
        if opening is not None:  # a replica's new run: this write takes its lease, or the run does not start
            try:
                self._save_run(run, values, meta, None, opening)
            except Exception as exc:
                raise LeaseNotTaken(
                    f"run {run.run_id} could not take its lease in the store, so it did not start: {exc}; "
                    "retry the request"
                ) from exc
            return
        self._save_run(run, values, meta, last, None)

    def _save_run(
        self, run: JournaledRun, values: dict[str, Any], meta: dict[str, Any], last: str | None, opening: Opening | None
    ) -> None:
        fences = self.store.fences
        generation = 0
        fenced: tuple[Any, ...] | None
        with self._lock, self.engine.begin() as conn:
            stored = sa.select(runs.c.meta).where(runs.c.id == run.run_id)  # checked and read: one round trip
            if opening is not None:  # the lease's upsert reads it
                generation, fenced = LeaseRepository.acquire_in(conn, run.run_id, opening, stored.scalar_subquery())
            else:
                fenced = self._fenced(conn, run.run_id, stored.scalar_subquery(), release=last)
            if fenced is not None:
                old = fenced[0]  # (``meta`` is never null: a null is no row)
            else:
                row = conn.execute(stored).first()
                old = None if row is None else row[0] or {}
            if old is None:
                conn.execute(runs.insert().values(id=run.run_id, meta=meta, **values))
            else:
                merged = {name: value for name, value in old.items() if name != "cancel_reason"} | meta
                conn.execute(runs.update().where(runs.c.id == run.run_id).values(meta=merged, **values))
        if opening is not None:
            fences.set(run.run_id, Fence(opening.owner, generation))
            opening.taken(generation)
        if last is not None and fenced is not None:
            fences.ending(run.run_id, released=True)

    def claim_run(self, run: JournaledRun) -> bool:
        """Take run ``run.run_id`` for this attempt, unless another process holds it: whether it was taken.

        The run's row is its lock. It is free when its stored status is not ``running``, or when the process
        that holds it is gone (:meth:`JournaledRun.shown_status`: pid dead on this host, heartbeat silent
        from another). Taking it is one compare-and-set on the row as it was read (its status and the text of
        its ``meta``, where the holder's pid, host and heartbeat live), so of two processes that read it free
        at once exactly one takes it, on SQLite (one writer at a time) as on PostgreSQL (the second UPDATE
        waits for the first and finds the row changed). ``run``'s status, pid, host and heartbeat are written.
        """
        meta_text = sa.cast(runs.c.meta, sa.Text)
        with self.store.errors(f"take run {run.run_id}"):
            with self.engine.connect() as conn:
                row = (
                    conn.execute(sa.select(runs, meta_text.label("meta_text")).where(runs.c.id == run.run_id))
                    .mappings()
                    .first()
                )
            if row is None or _run_of(row).shown_status() == "running":
                return False
            meta = {**(row["meta"] or {}), **{name: getattr(run, name) for name in _META_FIELDS}}
            meta["vars"] = self.store.secrets.value(meta["vars"])
            with self.engine.begin() as conn:
                taken = conn.execute(
                    runs.update()
                    .where(runs.c.id == run.run_id, runs.c.status == row["status"], meta_text == row["meta_text"])
                    .values(status=run.status, meta=meta, ended_at=None, error=None)
                )
            return taken.rowcount == 1

    def get_run(self, run_id: str, *, unmasked: bool = False) -> JournaledRun | None:
        """The run's record; ``unmasked``: with the secrets the store masked in its input and vars put back
        from the environment (what resuming it needs)."""
        with self.store.errors(f"read run {run_id}"), self.engine.connect() as conn:
            row = conn.execute(sa.select(runs).where(runs.c.id == run_id)).mappings().first()
            run = None if row is None else _with_spending(conn, _run_of(row))
        if run is not None and unmasked:
            run.input, run.vars = unmask(run.input), unmask(run.vars)
        return run

    def list_runs(self, *, limit: int | None = 50, team: str | None = None) -> list[JournaledRun]:
        """The newest runs first (every run in the store, journaled or not)."""
        query = sa.select(runs).order_by(runs.c.started_at.desc(), runs.c.id)
        if team is not None:
            query = query.where(runs.c.team == team)
        if limit is not None:
            query = query.limit(limit)
        with self.store.errors("list the runs"), self.engine.connect() as conn:
            return [_with_spending(conn, _run_of(row)) for row in conn.execute(query).mappings().all()]

    def counts(self, run_id: str) -> dict[str, int]:
        """How many journal entries of each kind the run has."""
        query = sa.select(journal.c.kind, sa.func.count()).where(journal.c.run_id == run_id).group_by(journal.c.kind)
        with self.store.errors(f"read the journal of run {run_id}"), self.engine.connect() as conn:
            return {str(kind): int(count) for kind, count in conn.execute(query).all()}


def _with_spending(conn: sa.Connection, run: JournaledRun) -> JournaledRun:
    """A run whose outcome was never written (it runs, or was killed) with what its journaled replies spent:
    the usage and cost of each model call (the latest entry of each), as a finished run counts them."""
    if run.status != "running":
        return run
    query = (
        sa.select(journal.c.agent_path, journal.c.call_key, journal.c.payload)
        .where(journal.c.run_id == run.run_id, journal.c.kind == "model")
        .order_by(journal.c.seq)
    )
    replies = {(invocation, key): payload or {} for invocation, key, payload in conn.execute(query).all()}
    if not replies:
        return run
    tokens = {"input_tokens": 0, "output_tokens": 0, "requests": 0}
    cost = 0.0
    known = True
    for payload in replies.values():
        usage = payload.get("usage") or {}
        for name in tokens:
            tokens[name] += int(usage.get(name, 1 if name == "requests" else 0))
        cost += float(payload.get("cost_usd") or 0.0)
        known = known and payload.get("usage_known") is not False  # a reply that reported no usage
    if tokens["requests"] > int(run.usage.get("requests", 0)):
        run.usage = {**tokens, "total_tokens": tokens["input_tokens"] + tokens["output_tokens"]}
        run.cost = max(cost, run.cost)
        if not known or not run.usage_known:
            run.usage[USAGE_UNKNOWN_KEY] = 0
    return run


def _run_of(row: sa.RowMapping) -> JournaledRun:
    meta = dict(row["meta"] or {})
    started = _stamp(row["started_at"]) or 0.0
    return JournaledRun(
        run_id=row["id"],
        team=row["team"],
        team_file=str(meta.get("team_file") or ""),
        input=row["input"],
        vars=dict(meta.get("vars") or {}),
        limits=dict(meta.get("limits") or {}),
        model=meta.get("model"),
        api_base=meta.get("api_base"),
        status=row["status"],
        pid=int(meta.get("pid") or 0),
        host=str(meta.get("host") or ""),
        started_at=started,
        heartbeat_at=float(meta.get("heartbeat_at") or started),
        ended_at=_stamp(row["ended_at"]),
        usage=dict(row["usage"] or {}),
        cost=float(row["cost"] or 0.0),
        final_text=row["final_output"] or "",
        error=row["error"],
        attempts=int(meta.get("attempts") or 1),
        replayed_calls=int(meta.get("replayed_calls") or 0),
        thread_id=row["thread_id"],
        cancel_reason=meta.get("cancel_reason") if row["status"] == "cancelled" else None,
    )
