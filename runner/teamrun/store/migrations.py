"""Versioned schema migrations.

``schema_version`` holds one row per applied version. A new database gets the
latest tables at once (:data:`teamrun.store.schema.metadata`) and is stamped
with :data:`LATEST`; an older one runs the steps after its version, in order,
each in the same transaction as its stamp. A database newer than this teamrun
knows is refused with a clear message (never half-used).

To change the schema: edit :mod:`teamrun.store.schema` to the new shape AND
append a step here that brings a database of the previous version to it.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Callable

import sqlalchemy as sa

from teamrun.errors import StoreError
from teamrun.store import schema
from teamrun.store.leases import LeaseRepository

Step = Callable[[sa.Connection], None]


def _initial(conn: sa.Connection) -> None:
    """Version 1: threads, thread_messages, runs, journal."""
    schema.metadata.create_all(conn)


def _pending_items(conn: sa.Connection) -> None:
    """Version 2: the items a waiting run waits for (questions, approvals) and their answers."""
    schema.pending_items.create(conn, checkfirst=True)


def _run_events(conn: sa.Connection) -> None:
    """Version 3: served runs' events (the page's timeline of a run an earlier server ran)."""
    schema.run_events.create(conn, checkfirst=True)


def _memory(conn: sa.Connection) -> None:
    """Version 4: long-term memory (facts per resource, their keyword index, working memory)."""
    for table in (schema.memories, schema.memory_generations, schema.memory_working):
        table.create(conn, checkfirst=True)


def _run_leases(conn: sa.Connection) -> None:
    """Version 5: which replica executes each running run (its lease, generation and expiry)."""
    schema.run_leases.create(conn, checkfirst=True)


def _memory_messages(conn: sa.Connection) -> None:
    """Version 6: thread messages indexed for a resource's recall of earlier threads (and their keyword index)."""
    schema.memory_messages.create(conn, checkfirst=True)


def _live_leases(conn: sa.Connection) -> None:
    """Version 7: the leases of live runs only. The rows of ended runs (each run left one behind) go, as the
    takeover pass sweeps them from now on; the renewal and the takeover read live leases through partial indexes
    instead of an index over every lease ever held."""
    for old in ("ix_run_leases_owner", "ix_run_leases_expires"):
        conn.execute(sa.text(f"DROP INDEX IF EXISTS {old}"))
    for index in schema.run_leases.indexes:
        index.create(conn, checkfirst=True)
    while LeaseRepository.sweep_in(conn, now=0.0, limit=10_000) == 10_000:
        pass


def _watched_leases(conn: sa.Connection) -> None:
    """Version 8: a lease says until when another replica streams its run's events from the store (its owner keeps
    them there on every heartbeat while it does, less often otherwise)."""
    if "watched_until" not in {column["name"] for column in sa.inspect(conn).get_columns("run_leases")}:
        conn.execute(sa.text("ALTER TABLE run_leases ADD COLUMN watched_until FLOAT"))  # (version 5 made it new)


MIGRATIONS: list[tuple[int, str, Step]] = [
    (1, "threads, thread messages, runs and the run journal", _initial),
    (2, "pending items of waiting runs", _pending_items),
    (3, "served runs' events", _run_events),
    (4, "long-term memory: facts per resource, their keyword index, working memory", _memory),
    (5, "run leases: which replica executes each running run", _run_leases),
    (6, "thread messages indexed for the recall of a resource's earlier threads", _memory_messages),
    (7, "run leases of live runs only: the rows of ended runs go, partial indexes for the heartbeat", _live_leases),
    (8, "run leases say until when another replica streams their run's events", _watched_leases),
]
"""``(version, what it does, step)`` in order; the last one is the version the tables in :mod:`schema` have."""


def latest_version() -> int:
    return MIGRATIONS[-1][0]


def current_version(conn: sa.Connection) -> int:
    """The database's version: 0 when it has no ``schema_version`` table (a new database)."""
    if not sa.inspect(conn).has_table(schema.schema_version.name):
        return 0
    found = conn.execute(sa.select(sa.func.max(schema.schema_version.c.version))).scalar()
    return int(found or 0)


def upgrade(engine: sa.Engine, *, where: str) -> int:
    """Bring the database to the latest version; returns the version it had before.

    Safe when several processes (or engines) open one new or older database at once: a database already at the
    latest version is only read; else one migrates at a time (SQLite: ``BEGIN IMMEDIATE``, the database's write
    lock, taken before anything is read; PostgreSQL: a transaction-scoped advisory lock) and the version is read
    again inside the lock, so the others find it migrated and change nothing."""
    with engine.connect() as conn:
        before = current_version(conn)
    _check_known(before, where)
    if before == latest_version():
        return before
    with engine.begin() as conn:
        _lock(conn)
        before = current_version(conn)  # another opener may have migrated it meanwhile
        latest = latest_version()
        _check_known(before, where)
        if before == 0:
            schema.metadata.create_all(conn)
            _stamp(conn, latest)
            return before
        for version, _what, step in MIGRATIONS:
            if version > before:
                step(conn)
                _stamp(conn, version)
    return before


def _lock(conn: sa.Connection) -> None:
    """Make ``conn``'s transaction the one migrating: other openers wait here until it ends."""
    if conn.dialect.name == "postgresql":
        conn.execute(sa.text("SELECT pg_advisory_xact_lock(7140014)"))
    elif conn.dialect.name == "sqlite":
        # pysqlite starts no transaction before DDL (each CREATE TABLE would commit on its own, and two openers
        # both create): take the write lock now; the busy timeout makes the others wait for it
        conn.exec_driver_sql("BEGIN IMMEDIATE")


def _check_known(version: int, where: str) -> None:
    latest = latest_version()
    if version > latest:
        raise StoreError(
            f"the store {where} has schema version {version}, newer than this teamrun knows "
            f"({latest}); upgrade teamrun (pip install -U teamrun) or use another --store"
        )


def _stamp(conn: sa.Connection, version: int) -> None:
    conn.execute(schema.schema_version.insert().values(version=version, applied_at=_dt.datetime.now(_dt.UTC)))


__all__ = ["MIGRATIONS", "current_version", "latest_version", "upgrade"]
