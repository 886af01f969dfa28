"""A served run's events in the store, so a later server (or another worker) shows the run's timeline.

``teamrun serve`` keeps a run's events in memory while it runs; when the run ends
or suspends (waiting for a person) they are written here in one batch, already
masked (what ``GET /v1/runs/{id}/events`` served), as one zlib-compressed JSON
array: a *part*. A run continued by the same process rewrites its part (its
events so far are in memory); one continued by another process (after a
restart) adds the next part. :meth:`RunEventRepository.load` gives the parts
joined, in order.

A part over :data:`MAX_PART_BYTES` compressed is kept without its ``llm_io``
events (each model call's messages, ``--trace-content``); one still over it is
not kept at all.

:func:`redact_events_of` is ``teamrun memory forget``'s part here: in the forget's transaction, the kept events of
the resource's runs lose what carries a fact or a working-memory value (:data:`FORGOTTEN_FIELDS`).
"""

from __future__ import annotations

import datetime as _dt
import json
import zlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa

from teamrun.store.schema import run_events, runs

__all__ = ["FORGOTTEN_FIELDS", "MAX_PART_BYTES", "KeptPart", "RunEventRepository", "redact_events_of"]

MAX_PART_BYTES = 16 * 1024 * 1024
"""The largest part kept (compressed): past it, ``llm_io`` events are left out; still past it, nothing is kept."""


FORGOTTEN_FIELDS: Mapping[str, tuple[str, ...]] = {
    "memory_recall": ("query", "facts"),
    "memory_save": ("fact",),
    "workspace_write": ("value_after",),
    "llm_io": ("new_messages", "reply"),
}
"""Per event kind, the fields a forget removes from the kept events of the resource's runs (a recall's query and
facts, a saved fact, a workspace entry's value, a model call's messages: ``--trace-content``); the event stays,
marked ``"forgotten": true``."""


def redact_events_of(conn: sa.Connection, run_ids: Iterable[str]) -> int:
    """In the caller's transaction, remove :data:`FORGOTTEN_FIELDS` from the kept events of ``run_ids``; returns
    how many events changed. A part is rewritten only when one of its events changed."""
    changed_events = 0
    for run_id in run_ids:
        rows = conn.execute(sa.select(run_events.c.part, run_events.c.body).where(run_events.c.run_id == run_id)).all()
        for part, body in rows:
            events = json.loads(zlib.decompress(bytes(body)))
            changed = 0
            for event in events:
                fields = FORGOTTEN_FIELDS.get(str(event.get("kind"))) if isinstance(event, dict) else None
                data = event.get("data") if fields else None
                if isinstance(data, dict) and any(name in data for name in fields or ()):
                    event["data"] = {k: v for k, v in data.items() if k not in (fields or ())} | {"forgotten": True}
                    changed += 1
            if changed:
                packed, raw_bytes = _packed(events)
                conn.execute(
                    run_events.update()
                    .where(run_events.c.run_id == run_id, run_events.c.part == part)
                    .values(body=packed, raw_bytes=raw_bytes)
                )
                changed_events += changed
    return changed_events


@dataclass(frozen=True)
class KeptPart:
    """What :meth:`RunEventRepository.save` wrote."""

    part: int
    count: int
    """Events kept."""
    raw_bytes: int
    """Their JSON, uncompressed."""
    stored_bytes: int
    """The row's body (compressed)."""
    without_content: bool = False
    """``llm_io`` events were left out to fit :data:`MAX_PART_BYTES`."""


def _packed(events: Sequence[Mapping[str, Any]]) -> tuple[bytes, int]:
    raw = json.dumps(list(events), ensure_ascii=False, separators=(",", ":")).encode()
    return zlib.compress(raw, 6), len(raw)


class RunEventRepository:
    """Every method is blocking and runs in its own short transaction."""

    def __init__(self, engine: sa.Engine, *, max_part_bytes: int = MAX_PART_BYTES) -> None:
        self.engine = engine
        self.max_part_bytes = max_part_bytes

    def save(self, run_id: str, events: Sequence[Mapping[str, Any]], *, part: int | None = None) -> KeptPart | None:
        """Keep ``events`` (masked already) as part ``part`` of ``run_id`` (replacing it), or as the next
        part when ``part`` is ``None``. ``None``: nothing kept (the store has no such run, or too large)."""
        body, raw_bytes = _packed(events)
        kept = list(events)
        without_content = False
        if len(body) > self.max_part_bytes:
            kept = [e for e in events if e.get("kind") != "llm_io"]
            body, raw_bytes = _packed(kept)
            without_content = True
            if len(body) > self.max_part_bytes:
                return None
        with self.engine.begin() as conn:
            if conn.execute(sa.select(runs.c.id).where(runs.c.id == run_id)).first() is None:
                return None
            if part is None:
                last = conn.execute(sa.select(sa.func.max(run_events.c.part)).where(run_events.c.run_id == run_id))
                found = last.scalar()
                part = 0 if found is None else int(found) + 1
            else:
                conn.execute(run_events.delete().where(run_events.c.run_id == run_id, run_events.c.part == part))
            conn.execute(
                run_events.insert().values(
                    run_id=run_id,
                    part=part,
                    count=len(kept),
                    raw_bytes=raw_bytes,
                    body=body,
                    saved_at=_dt.datetime.now(_dt.UTC),
                )
            )
        return KeptPart(part, len(kept), raw_bytes, len(body), without_content)

    def load(self, run_id: str, *, before: int | None = None) -> list[dict[str, Any]] | None:
        """The run's kept events, every part (or those before part ``before``) in order; ``None`` when none."""
        query = sa.select(run_events.c.body).where(run_events.c.run_id == run_id).order_by(run_events.c.part)
        if before is not None:
            query = query.where(run_events.c.part < before)
        with self.engine.connect() as conn:
            bodies = [bytes(row[0]) for row in conn.execute(query)]
        if not bodies:
            return None
        events: list[dict[str, Any]] = []
        for body in bodies:
            events.extend(json.loads(zlib.decompress(body)))
        return events

    def kept(self, run_ids: Iterable[str]) -> set[str]:
        """Those of ``run_ids`` whose events are kept."""
        ids = list(run_ids)
        if not ids:
            return set()
        query = sa.select(run_events.c.run_id).where(run_events.c.run_id.in_(ids)).distinct()
        with self.engine.connect() as conn:
            return {str(row[0]) for row in conn.execute(query)}
