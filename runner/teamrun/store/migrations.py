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


MIGRATIONS: list[tuple[int, str, Step]] = [
    (1, "threads, thread messages, runs and the run journal", _initial),
    (2, "pending items of waiting runs", _pending_items),
    (3, "served runs' events", _run_events),
    (4, "long-term memory: facts per resource, their keyword index, working memory", _memory),
    (5, "run leases: which replica executes each running run", _run_leases),
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
    """Bring the database to the latest version; returns the version it had before."""
    with engine.begin() as conn:
        if conn.dialect.name == "postgresql":  # replicas opening the same new database at once: one migrates
            conn.execute(sa.text("SELECT pg_advisory_xact_lock(7140014)"))
        before = current_version(conn)
        latest = latest_version()
        if before > latest:
            raise StoreError(
                f"the store {where} has schema version {before}, newer than this teamrun knows "
                f"({latest}); upgrade teamrun (pip install -U teamrun) or use another --store"
            )
        if before == 0:
            schema.metadata.create_all(conn)
            _stamp(conn, latest)
            return before
        for version, _what, step in MIGRATIONS:
            if version > before:
                step(conn)
                _stamp(conn, version)
    return before


def _stamp(conn: sa.Connection, version: int) -> None:
    conn.execute(schema.schema_version.insert().values(version=version, applied_at=_dt.datetime.now(_dt.UTC)))


__all__ = ["MIGRATIONS", "current_version", "latest_version", "upgrade"]
