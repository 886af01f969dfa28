"""Run leases: which replica (a ``teamrun serve`` process) executes a running run, for how long, under which
generation.

A replica takes a lease when a run starts or continues on it (:meth:`LeaseRepository.acquire`) and renews every
lease it holds on a heartbeat (:meth:`LeaseRepository.renew`). A lease that is not renewed expires; another
replica may then take it (:meth:`LeaseRepository.take`: one compare-and-set on the generation, so of two replicas
that try at once one wins) and continue the run from its journal. Each take raises the generation: the journal
writes of a replica that still believes it owns the run (it was paused, or cut off) carry the generation it had,
and the store refuses them (:meth:`LeaseRepository.check`, inside the writing transaction: fencing). An owner that
stops on purpose releases its leases (``handover``: another replica takes them at once). A run's last record write
on a replica (its outcome, or its suspension to wait for people) releases its lease in the fencing statement
itself (:meth:`LeaseRepository.check`'s ``release``): no round trip of its own. An outcome deletes the lease's
row (the table holds live runs only; why a cancelled run was cancelled is in its record, ``runs.meta``); a
suspension keeps it, released, so the generation keeps rising when the run continues. The rows of runs that
ended otherwise (a waiting run cancelled in the store, an outcome written by another process) are swept by the
takeover pass (:meth:`LeaseRepository.sweep`). A cancel asked on a replica that does not run the run is left on
the lease (:meth:`LeaseRepository.request_cancel`) for the owner's next heartbeat.

Times are epoch seconds of the replicas' clocks (keep them in sync: a clock ahead takes leases early, which the
generation still fences). Every method is blocking and runs in its own short transaction, but :meth:`acquire`
may join the caller's (a new run's record and its lease: one transaction) and :meth:`check` runs in the writer's.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa

from teamrun.errors import StoreError
from teamrun.store.schema import LIVE_LEASE, run_leases, runs

__all__ = [
    "CHANNEL",
    "CONFIRM",
    "HANDOVER",
    "OVER",
    "WAITING",
    "Fence",
    "Fences",
    "Lease",
    "LeaseNotTaken",
    "LeaseRepository",
    "LeasedWriteFailed",
    "Opening",
    "StaleLease",
]

CHANNEL = "teamrun_run_cancel"
"""The PostgreSQL ``NOTIFY`` channel of cancels left on leases."""
HANDOVER = "handover"
"""The release reason of an owner that stops on purpose (SIGTERM): another replica takes the run at once (the
literal of :data:`~teamrun.store.schema.LIVE_LEASE`)."""
OVER = "over"
"""The run ended here: its outcome's write deletes the lease (:meth:`LeaseRepository.check`'s ``release``)."""
CONFIRM = "confirm"
"""A run taken over here could not go on without a person's say (a tool that is not idempotent may have run
halfway): its lease is released with this reason, so no replica takes it again, and its record shows it
``interrupted`` until ``teamrun resume RUN_ID --yes``."""
WAITING = "waiting"
"""The run suspended here to wait for people: its lease is released and kept (the generation of the next one)."""
SWEPT = ("running", "waiting")
"""The statuses of runs whose lease rows the sweep keeps (:meth:`LeaseRepository.sweep`)."""


@dataclass(frozen=True)
class Lease:
    run_id: str
    owner: str
    generation: int
    expires_at: float
    cancel_reason: str | None = None
    """A cancel asked on another replica, for the owner to apply."""
    released: str | None = None
    """Why the owner let it go (``None``: held)."""
    watched_until: float | None = None
    """Until when another replica streams the run's events from the store (:meth:`LeaseRepository.watch`)."""


@dataclass(frozen=True)
class Fence:
    """What a replica's writes for a run must still hold: its own lease, of this generation."""

    owner: str
    generation: int


class StaleLease(StoreError):
    """A write for a run by a replica whose lease was taken by another (an older generation): refused."""

    stops_run = True
    """The run's journal raises it from then on (:attr:`RunJournal.fenced`): the run stops executing here."""

    def __init__(self, run_id: str, fence: Fence, holder: Lease | None) -> None:
        self.run_id = run_id
        self.fence = fence
        self.holder = holder
        now = f"replica {holder.owner} holds it (generation {holder.generation})" if holder else "nobody holds it"
        super().__init__(
            f"write for run {run_id} refused: replica {fence.owner} no longer owns it (its generation "
            f"{fence.generation} is stale; {now}); this replica stops executing the run"
        )


class LeasedWriteFailed(StoreError):
    """A journal write for a run this process executes under a lease did not reach the store (it is out of reach,
    or its connections all busy), and the lease was not found lost: the run must not go on unjournaled, as another
    replica continues it from its journal once its lease expires. The run holds at its next write it waits for,
    and the write is tried again until the store takes it or refuses it (:class:`StaleLease`: the run stops
    here)."""

    holds_run = True
    """:class:`~teamrun.engine.durability.journal.RunJournal` tries the write again instead of going on unjournaled."""


class LeaseNotTaken(StoreError):
    """A run could not take its lease (the store is out of reach, or its connections all busy): it did not
    start, and has no record anywhere."""

    refuses_run = True
    """Raised by a run's opening record write (:class:`Opening`): the run must not go on (unjournaled, unleased)."""


@dataclass(frozen=True)
class Opening:
    """A new run's lease, taken by its opening record write (:meth:`Fences.opening`): the lease's upsert is that
    write's fencing statement, so a replica's run costs the store no transaction of its own as it starts."""

    owner: str
    ttl_s: float
    clock: Callable[[], float]
    taken: Callable[[int], None]
    """Told the lease's generation once the write committed (from the writing thread)."""


class Fences:
    """A store's fences: the lease each run this process executes must still hold when it writes for the run.

    :class:`~teamrun.store.journal.StoreJournal` checks a run's fence inside each journal write and record save;
    ``on_refused`` hooks hear of each refusal (from the writing thread).
    """

    def __init__(self) -> None:
        self._fences: dict[str, Fence] = {}
        self._said: set[str] = set()
        self._ending: set[str] = set()
        self._let_go: set[str] = set()
        self._cancelled: dict[str, str] = {}
        self._opening: dict[str, Opening] = {}
        self._lock = threading.Lock()
        self.on_refused: list[Callable[[StaleLease], None]] = []

    def set(self, run_id: str, fence: Fence) -> None:
        with self._lock:
            self._fences[run_id] = fence
            self._ending.discard(run_id)  # a new lease: the run's turn here begins
            self._let_go.discard(run_id)
            self._cancelled.pop(run_id, None)

    def drop(self, run_id: str) -> None:
        with self._lock:
            self._fences.pop(run_id, None)
            self._said.discard(run_id)
            self._ending.discard(run_id)
            self._let_go.discard(run_id)
            self._cancelled.pop(run_id, None)
            self._opening.pop(run_id, None)

    def opening(self, run_id: str, opening: Opening) -> None:
        """``run_id`` starts here: its opening record write takes its lease (:meth:`take_opening`)."""
        with self._lock:
            self._opening[run_id] = opening

    def take_opening(self, run_id: str) -> Opening | None:
        """The lease ``run_id``'s opening write is to take, once (``None``: none, or taken already)."""
        with self._lock:
            return self._opening.pop(run_id, None)

    def cancelled(self, run_id: str, reason: str) -> None:
        """``run_id``, executed here under a lease, is being cancelled for ``reason``: its outcome's write records
        it (``runs.meta``, :meth:`cancel_reason`), for every replica to say. Ignored for a run with no fence."""
        with self._lock:
            if run_id in self._fences:
                self._cancelled[run_id] = reason

    def cancel_reason(self, run_id: str) -> str | None:
        """Why ``run_id`` was cancelled here (:meth:`cancelled`), if it was."""
        with self._lock:
            return self._cancelled.get(run_id)

    def ending(self, run_id: str, *, released: bool = False) -> None:
        """The run's last record write (its outcome, or its suspension) releases its lease in its own statement:
        said as it starts (:meth:`is_ending`: the heartbeat does not mistake the lease gone for a lease taken),
        then ``released`` once it committed (:meth:`released_by_write`: its owner need not release it again)."""
        with self._lock:
            self._ending.add(run_id)
            if released:
                self._let_go.add(run_id)

    def is_ending(self, run_id: str) -> bool:
        with self._lock:
            return run_id in self._ending

    def released_by_write(self, run_id: str) -> bool:
        with self._lock:
            return run_id in self._let_go

    def get(self, run_id: str) -> Fence | None:
        with self._lock:
            return self._fences.get(run_id)

    def refused(self, exc: StaleLease) -> None:
        """Tell the hooks of a refusal, once per run (its later writes are refused too, quietly)."""
        with self._lock:
            if exc.run_id in self._said:
                return
            self._said.add(exc.run_id)
        for hook in list(self.on_refused):
            hook(exc)


def _lease(row: Any) -> Lease:
    run_id, owner, generation, expires_at, cancel_reason, released, watched_until = row
    watched = None if watched_until is None else float(watched_until)
    return Lease(run_id, owner, int(generation), float(expires_at), cancel_reason, released, watched)


_COLUMNS = (
    run_leases.c.run_id,
    run_leases.c.owner,
    run_leases.c.generation,
    run_leases.c.expires_at,
    run_leases.c.cancel_reason,
    run_leases.c.released,
    run_leases.c.watched_until,
)


class LeaseRepository:
    def __init__(self, engine: sa.Engine, *, clock: Callable[[], float] = time.time) -> None:
        self.engine = engine
        self.clock = clock

    def acquire(self, run_id: str, owner: str, ttl_s: float, *, conn: sa.Connection | None = None) -> int:
        """Take ``run_id`` for ``owner`` now (it starts or continues here: whoever decided that decided alone,
        a waiting run's claim or a new run's id); returns the lease's generation, one above any before.

        One statement (an insert that raises the generation of a lease already there), in ``conn``'s transaction
        when given (a new run's record is written in the same one), else in a transaction of its own."""
        if conn is None:
            with self.engine.begin() as own:
                return self.acquire(run_id, owner, ttl_s, conn=own)
        expires = self.clock() + ttl_s
        dialect = conn.dialect.name
        if dialect in ("postgresql", "sqlite"):
            from sqlalchemy.dialects import postgresql, sqlite

            insert = postgresql.insert if dialect == "postgresql" else sqlite.insert
            new = insert(run_leases).values(run_id=run_id, owner=owner, generation=1, expires_at=expires)
            upsert = new.on_conflict_do_update(
                index_elements=[run_leases.c.run_id],
                set_={
                    "owner": owner,
                    "generation": run_leases.c.generation + 1,
                    "expires_at": expires,
                    "cancel_reason": None,
                    "released": None,
                },
            ).returning(run_leases.c.generation)
            return int(conn.execute(upsert).scalar_one())
        found = conn.execute(  # another database: read, then write, the row locked
            sa.select(run_leases.c.generation).where(run_leases.c.run_id == run_id).with_for_update()
        ).scalar()
        if found is None:
            conn.execute(run_leases.insert().values(run_id=run_id, owner=owner, generation=1, expires_at=expires))
            return 1
        generation = int(found) + 1
        conn.execute(
            run_leases.update()
            .where(run_leases.c.run_id == run_id)
            .values(owner=owner, generation=generation, expires_at=expires, cancel_reason=None, released=None)
        )
        return generation

    @staticmethod
    def acquire_in(
        conn: sa.Connection, run_id: str, opening: Opening, *also: sa.ScalarSelect[Any]
    ) -> tuple[int, tuple[Any, ...]]:
        """:meth:`acquire` as a write's fencing statement (:class:`Opening`): the lease's generation, and ``also``
        read by the same statement (SQLite and PostgreSQL; another database reads them apart)."""
        expires = opening.clock() + opening.ttl_s
        dialect = conn.dialect.name
        if dialect not in ("postgresql", "sqlite"):
            generation = LeaseRepository(conn.engine, clock=opening.clock).acquire(
                run_id, opening.owner, opening.ttl_s, conn=conn
            )
            return generation, tuple(conn.execute(sa.select(*also)).one()) if also else ()
        from sqlalchemy.dialects import postgresql, sqlite

        insert = postgresql.insert if dialect == "postgresql" else sqlite.insert
        new = insert(run_leases).values(run_id=run_id, owner=opening.owner, generation=1, expires_at=expires)
        upsert = new.on_conflict_do_update(
            index_elements=[run_leases.c.run_id],
            set_={
                "owner": opening.owner,
                "generation": run_leases.c.generation + 1,
                "expires_at": expires,
                "cancel_reason": None,
                "released": None,
            },
        ).returning(run_leases.c.generation, *also)
        row = conn.execute(upsert).one()
        return int(row[0]), tuple(row[1:])

    def renew(self, owner: str, ttl_s: float) -> dict[str, Lease]:
        """Extend every lease ``owner`` holds by ``ttl_s`` from now; the leases it holds, by run id (a cancel asked
        elsewhere shows as the lease's :attr:`Lease.cancel_reason`)."""
        held = sa.and_(run_leases.c.owner == owner, run_leases.c.released.is_(None))
        renewed = run_leases.update().where(held).values(expires_at=self.clock() + ttl_s).returning(*_COLUMNS)
        with self.engine.begin() as conn:
            rows = conn.execute(renewed).all()
        return {row[0]: _lease(row) for row in rows}

    def watch(self, run_id: str, until: float) -> None:
        """A replica that does not run ``run_id`` streams its events from the store until ``until`` (epoch seconds,
        renewed while it streams): the run's owner keeps them there on every heartbeat meanwhile."""
        later = sa.or_(run_leases.c.watched_until.is_(None), run_leases.c.watched_until < until)
        with self.engine.begin() as conn:
            conn.execute(run_leases.update().where(run_leases.c.run_id == run_id, later).values(watched_until=until))

    def release(self, run_id: str, owner: str, generation: int, reason: str) -> bool:
        """``owner`` lets ``run_id`` go (``reason``: :data:`OVER`, :data:`WAITING`, :data:`HANDOVER`...); whether it
        still held it. The row stays (released): a run over whose outcome was not written shows ``interrupted``,
        not taken; :meth:`sweep` deletes it once the run's record says it ended."""
        with self.engine.begin() as conn:
            done = conn.execute(
                run_leases.update()
                .where(
                    run_leases.c.run_id == run_id,
                    run_leases.c.owner == owner,
                    run_leases.c.generation == generation,
                    run_leases.c.released.is_(None),
                )
                .values(released=reason, expires_at=0.0)
            )
        return done.rowcount == 1

    def cancel_reason(self, run_id: str) -> str | None:
        """The cancel left on ``run_id``'s lease for its owner (:meth:`request_cancel`), if any (a cancelled run's
        reason is in its record: :attr:`JournaledRun.cancel_reason <teamrun.store.records.JournaledRun>`)."""
        with self.engine.connect() as conn:
            found = conn.execute(sa.select(run_leases.c.cancel_reason).where(run_leases.c.run_id == run_id)).scalar()
        return None if found is None else str(found)

    def takeable(self, *, limit: int = 50) -> list[Lease]:
        """Leases of runs still ``running`` in the store that nobody renews any more (expired) or that their owner
        handed over (it expires at 0), oldest expiry first. Read from the live leases' index, each run's status by
        its key (never a scan of ``runs``)."""
        # a scalar subquery, not a join nor EXISTS: PostgreSQL would hash-join them over a scan of ``runs``
        status = sa.select(runs.c.status).where(runs.c.id == run_leases.c.run_id).scalar_subquery()
        query = (
            sa.select(*_COLUMNS)
            .where(LIVE_LEASE, run_leases.c.expires_at < self.clock(), status == "running")
            .order_by(run_leases.c.expires_at)
            .limit(limit)
        )
        with self.engine.connect() as conn:
            return [_lease(row) for row in conn.execute(query).all()]

    def sweep(self, *, limit: int = 500) -> int:
        """Delete up to ``limit`` lease rows of runs no replica runs nor will continue: released or expired, of a
        run whose record is neither ``running`` nor ``waiting`` (it ended: cancelled while it waited, or its outcome
        written by another process) or of no run at all; how many. (The takeover pass calls it now and then.)"""
        with self.engine.begin() as conn:
            return self.sweep_in(conn, now=self.clock(), limit=limit)

    @staticmethod
    def sweep_in(conn: sa.Connection, *, now: float, limit: int) -> int:
        """:meth:`sweep` in ``conn``'s transaction (``now``: leases expired before it count as let go; 0: only the
        released ones, as the migration to version 6 purges them)."""
        live = sa.exists().where(runs.c.id == run_leases.c.run_id, runs.c.status.in_(SWEPT))
        let_go = sa.or_(run_leases.c.released.is_not(None), run_leases.c.expires_at < now)
        doomed = (  # rows another transaction holds (another replica sweeping): skipped, no deadlock
            sa.select(run_leases.c.run_id).where(let_go, ~live).limit(limit).with_for_update(skip_locked=True)
        )
        done = conn.execute(run_leases.delete().where(run_leases.c.run_id.in_(doomed.scalar_subquery())))
        return int(done.rowcount)

    def take(self, lease: Lease, owner: str, ttl_s: float) -> int | None:
        """Take the expired or handed-over ``lease`` for ``owner``: its new generation, or ``None`` when another
        replica took it first or its owner renewed it meanwhile (one compare-and-set on the generation)."""
        now = self.clock()
        free = sa.and_(LIVE_LEASE, run_leases.c.expires_at < now)
        generation = lease.generation + 1
        with self.engine.begin() as conn:
            locked = conn.execute(  # a row another transaction holds (a paused owner's last write): not now
                sa.select(run_leases.c.generation)
                .where(run_leases.c.run_id == lease.run_id, run_leases.c.generation == lease.generation, free)
                .with_for_update(skip_locked=True)
            ).first()
            if locked is None:
                return None
            done = conn.execute(
                run_leases.update()
                .where(run_leases.c.run_id == lease.run_id, run_leases.c.generation == lease.generation, free)
                .values(owner=owner, generation=generation, expires_at=now + ttl_s, released=None)
            )
        return generation if done.rowcount == 1 else None

    def request_cancel(self, run_id: str, reason: str) -> bool:
        """Leave a cancel for the replica that runs ``run_id`` (its next heartbeat applies it; on PostgreSQL a
        ``NOTIFY`` on :data:`CHANNEL` at the commit tells it at once, :meth:`listen`); whether a replica holds the
        run."""
        with self.engine.begin() as conn:
            done = conn.execute(
                run_leases.update()
                .where(run_leases.c.run_id == run_id, run_leases.c.released.is_(None))
                .values(cancel_reason=reason)
            )
            if done.rowcount == 1 and conn.dialect.name == "postgresql":
                payload = json.dumps({"run": run_id, "reason": reason})[:7000]
                conn.execute(sa.select(sa.func.pg_notify(CHANNEL, payload)))
        return done.rowcount == 1

    def listen(self, on_cancel: Callable[[str, str], None], stop: threading.Event, *, wait_s: float = 1.0) -> None:
        """On PostgreSQL, until ``stop`` is set: call ``on_cancel(run_id, reason)`` for each cancel
        :meth:`request_cancel` notifies (blocking: run it in a thread of its own). A lost connection ends it (the
        heartbeat's polling still applies cancels). Returns at once on another database (nothing notifies)."""
        if self.engine.dialect.name != "postgresql":
            return
        raw = self.engine.raw_connection()
        try:
            connection: Any = raw.driver_connection
            connection.autocommit = True
            connection.execute(f"LISTEN {CHANNEL}")
            while not stop.is_set():
                for _channel, text, _pid in connection.notifies(timeout=wait_s):  # psycopg's Notify tuples
                    try:
                        said = json.loads(text)
                        on_cancel(str(said["run"]), str(said["reason"]))
                    except (ValueError, KeyError, TypeError):
                        continue
        finally:
            raw.invalidate()  # not back to the pool: it listened

    @staticmethod
    def end_idle_transactions(engine: sa.Engine, after_s: float) -> None:
        """On PostgreSQL: a transaction of ``engine``'s connections left idle ``after_s`` seconds is ended by the
        server (``idle_in_transaction_session_timeout``), so a replica paused or cut off mid-write (its lease row
        locked by a fencing check) does not keep the replica that takes its runs waiting past the lease.
        Connections opened from now on (the pool's current ones are closed)."""
        if engine.dialect.name != "postgresql":
            return
        timeout_ms = max(1000, int(after_s * 1000))

        def on_connect(dbapi_connection: Any, _record: Any) -> None:
            autocommit = dbapi_connection.autocommit
            dbapi_connection.autocommit = True
            try:
                dbapi_connection.execute(f"SET idle_in_transaction_session_timeout = {timeout_ms}")
            finally:
                dbapi_connection.autocommit = autocommit

        sa.event.listen(engine, "connect", on_connect)
        engine.dispose()

    def get(self, run_id: str) -> Lease | None:
        with self.engine.connect() as conn:
            row = conn.execute(sa.select(*_COLUMNS).where(run_leases.c.run_id == run_id)).first()
        return None if row is None else _lease(row)

    @staticmethod
    def check(
        conn: sa.Connection, run_id: str, fence: Fence, *also: sa.ScalarSelect[Any], release: str | None = None
    ) -> tuple[Any, ...]:
        """Inside a writing transaction: raise :class:`StaleLease` unless ``fence`` still holds ``run_id``'s lease
        and not released (the row is locked until the transaction ends on PostgreSQL; SQLite has one writer at a
        time). ``also``: scalar subqueries read in the same statement (what the write needs to know first: no
        round trip of its own), their values returned in order. ``release``: the write is the run's last here (its
        outcome, or its suspension): the same statement releases the lease, for this reason (:meth:`release`);
        :data:`OVER` deletes its row (``DELETE ... RETURNING``: the run ended, its lease has nothing more to say)."""
        mine = sa.and_(
            run_leases.c.run_id == run_id,
            run_leases.c.owner == fence.owner,
            run_leases.c.generation == fence.generation,
            run_leases.c.released.is_(None),
        )
        if release is not None:
            if release == OVER:
                released: sa.Delete | sa.Update = run_leases.delete().where(mine)
            else:
                released = run_leases.update().where(mine).values(released=release, expires_at=0.0)
            row = conn.execute(released.returning(run_leases.c.run_id, *also)).first()
            if row is not None:
                return tuple(row[1:])
            holder_row = conn.execute(sa.select(*_COLUMNS).where(run_leases.c.run_id == run_id)).first()
            raise StaleLease(run_id, fence, None if holder_row is None else _lease(holder_row))
        query = sa.select(*_COLUMNS, *also).where(run_leases.c.run_id == run_id).with_for_update(of=run_leases)
        found = conn.execute(query).first()
        holder = None if found is None else _lease(found[: len(_COLUMNS)])
        held = holder is not None and (holder.owner, holder.generation) == (fence.owner, fence.generation)
        if not held or holder is None or holder.released is not None or found is None:
            raise StaleLease(run_id, fence, holder)
        return tuple(found[len(_COLUMNS) :])
