"""Run records: one row per run (status, input, answer, usage and cost, timings, error)."""

from __future__ import annotations

import datetime as _dt
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import sqlalchemy as sa

from teamrun.secrets import Redactor
from teamrun.store.schema import runs

RUNNING = "running"
"""The status of a run that has started and not (yet) ended; one that crashed stays so."""


@dataclass(frozen=True)
class RunRecord:
    id: str
    team: str
    status: str
    input: str
    started_at: _dt.datetime
    thread_id: str | None = None
    final_output: str | None = None
    usage: dict[str, Any] = field(default_factory=dict)
    cost: float = 0.0
    ended_at: _dt.datetime | None = None
    error: str | None = None
    meta: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "team": self.team,
            "thread_id": self.thread_id,
            "status": self.status,
            "input": self.input,
            "final_output": self.final_output,
            "usage": self.usage,
            "cost": self.cost,
            "started_at": self.started_at.isoformat(),
            "ended_at": self.ended_at.isoformat() if self.ended_at else None,
            "error": self.error,
            "meta": self.meta,
        }


def _now() -> _dt.datetime:
    return _dt.datetime.now(_dt.UTC)


class RunRepository:
    def __init__(self, engine: sa.Engine, *, secrets: Redactor | None = None) -> None:
        self.engine = engine
        self.secrets = secrets if secrets is not None else Redactor(include_env=False)
        """Masks secrets in the input, answer and error written (:class:`~teamrun.secrets.StoreMask`)."""

    def start(
        self,
        run_id: str,
        team: str,
        input: str,
        *,
        thread_id: str | None = None,
        meta: Mapping[str, Any] | None = None,
        conn: sa.Connection | None = None,
        unless_recorded: bool = False,
    ) -> None:
        """Record a run as ``running`` (in ``conn``'s transaction when given). ``unless_recorded``: a run that has
        a record already keeps it as it is (one statement on SQLite and PostgreSQL, no read first)."""
        if conn is None:
            with self.engine.begin() as own:
                self.start(
                    run_id, team, input, thread_id=thread_id, meta=meta, conn=own, unless_recorded=unless_recorded
                )
            return
        values = {
            "id": run_id,
            "team": team,
            "thread_id": thread_id,
            "status": RUNNING,
            "input": self.secrets.text(input),
            "usage": {},
            "cost": 0.0,
            "started_at": _now(),
            "meta": dict(meta or {}),
        }
        dialect = conn.dialect.name
        if not unless_recorded:
            conn.execute(runs.insert().values(**values))
        elif dialect in ("postgresql", "sqlite"):
            from sqlalchemy.dialects import postgresql, sqlite

            insert = postgresql.insert if dialect == "postgresql" else sqlite.insert
            conn.execute(insert(runs).values(**values).on_conflict_do_nothing(index_elements=[runs.c.id]))
        elif conn.execute(sa.select(runs.c.id).where(runs.c.id == run_id)).first() is None:
            conn.execute(runs.insert().values(**values))

    def finish(
        self,
        run_id: str,
        *,
        status: str,
        final_output: str | None,
        usage: Mapping[str, Any],
        cost: float,
        error: str | None = None,
        meta: Mapping[str, Any] | None = None,
    ) -> None:
        """Record how a run ended (``meta``, when given, is merged into the run's)."""
        with self.engine.begin() as conn:
            mask = self.secrets
            values: dict[str, Any] = {
                "status": status,
                "usage": dict(usage),
                "cost": cost,
                "ended_at": _now(),
                "final_output": None if final_output is None else mask.text(final_output),
                "error": None if error is None else mask.text(error),
            }
            if meta:
                old = conn.execute(sa.select(runs.c.meta).where(runs.c.id == run_id)).scalar() or {}
                values["meta"] = {**old, **meta}
            conn.execute(runs.update().where(runs.c.id == run_id).values(**values))

    def let_go(self, run_id: str, why: str) -> None:
        """A running run that no process runs any more until a person says so (``teamrun resume RUN_ID --yes``): its
        record stays ``running``, with no process, so every view shows it ``interrupted``, and says ``why``."""
        with self.engine.begin() as conn:
            old = conn.execute(sa.select(runs.c.meta).where(runs.c.id == run_id)).scalar() or {}
            gone = {"pid": 0, "host": "", "heartbeat_at": 1.0}  # no process, none touched it since 1970
            conn.execute(
                runs.update()
                .where(runs.c.id == run_id, runs.c.status == "running")
                .values(error=self.secrets.text(why), meta={**old, **gone})
            )

    def set_status(self, run_id: str, status: str) -> None:
        with self.engine.begin() as conn:
            conn.execute(runs.update().where(runs.c.id == run_id).values(status=status))

    def get(self, run_id: str) -> RunRecord | None:
        with self.engine.connect() as conn:
            row = conn.execute(sa.select(runs).where(runs.c.id == run_id)).mappings().first()
        return None if row is None else record_of(row)


def record_of(row: sa.RowMapping) -> RunRecord:
    """A :class:`RunRecord` from a ``runs`` row."""
    return RunRecord(
        id=row["id"],
        team=row["team"],
        status=row["status"],
        input=row["input"],
        started_at=row["started_at"],
        thread_id=row["thread_id"],
        final_output=row["final_output"],
        usage=dict(row["usage"] or {}),
        cost=float(row["cost"] or 0.0),
        ended_at=row["ended_at"],
        error=row["error"],
        meta=dict(row["meta"] or {}),
    )


__all__ = ["RUNNING", "RunRecord", "RunRepository", "record_of"]
