"""Pending items in the store: what a waiting run waits for from a person, and the answers.

An item is named by its run and a short id (``q1``, ``a2``: question or approval, then a
number per run), and is unique per call site (``call_key``: the agent invocation, model-call
number and position of the tool call that asked), so a resumed run asking again finds the
item it asked before. Answering is one conditional ``UPDATE`` (``status = 'pending'``): of
two processes answering at once, one wins and the other is told the item is answered.
Claiming a waiting run for resuming is the same kind of ``UPDATE`` on ``runs``.
"""

from __future__ import annotations

import datetime as _dt
import os
import socket
from dataclasses import dataclass
from typing import Any, Literal

import sqlalchemy as sa

from teamrun.store.db import Store
from teamrun.store.schema import pending_items, runs

__all__ = ["CANCELLED_BY", "WAITING", "ItemStatus", "PendingRecord", "PendingRepository"]

WAITING = "waiting"
"""The status of a run suspended until a person answers."""
ItemStatus = Literal["pending", "answered", "expired"]
CANCELLED_BY = "cancelled"
"""``answered_by`` of the items a cancelled waiting run left unanswered (:meth:`PendingRepository.cancel_waiting`):
they are ``expired`` with no answer, as an item nobody answered in time."""


@dataclass(frozen=True)
class PendingRecord:
    run_id: str
    item_id: str
    kind: str
    call_key: str
    agent: str
    question: str
    spec: dict[str, Any]
    status: str
    answer: Any
    answered_by: str | None
    asked_at: float
    answered_at: float | None
    used: bool

    def view(self) -> dict[str, Any]:
        """As JSON for listings (a secret answer masked)."""
        answer = "***" if self.spec.get("secret") and self.answer is not None else self.answer
        return {
            "run_id": self.run_id,
            "item": self.item_id,
            "kind": self.kind,
            "agent": self.agent,
            "question": self.question,
            "choices": self.spec.get("choices"),
            "status": self.status,
            "answer": answer,
            "answered_by": self.answered_by,
            "asked_at": self.asked_at,
            "answered_at": self.answered_at,
            "tool": self.spec.get("tool"),
        }


def _now() -> _dt.datetime:
    return _dt.datetime.now(_dt.UTC)


def _stamp(when: _dt.datetime | None) -> float | None:
    if when is None:
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=_dt.UTC)
    return when.timestamp()


def _record(row: sa.RowMapping) -> PendingRecord:
    return PendingRecord(
        run_id=row["run_id"],
        item_id=row["item_id"],
        kind=row["kind"],
        call_key=row["call_key"],
        agent=row["agent"],
        question=row["question"],
        spec=dict(row["spec"] or {}),
        status=row["status"],
        answer=row["answer"],
        answered_by=row["answered_by"],
        asked_at=_stamp(row["asked_at"]) or 0.0,
        answered_at=_stamp(row["answered_at"]),
        used=bool(row["used"]),
    )


def _deadline(spec: dict[str, Any] | None, asked: _dt.datetime | None) -> _dt.datetime | None:
    """When a pending item (its ``spec`` and ``asked_at``) expires; ``None``: it waits as long as it takes."""
    wait = (spec or {}).get("max_wait_s")
    if wait is None or asked is None:
        return None
    if asked.tzinfo is None:
        asked = asked.replace(tzinfo=_dt.UTC)
    return asked + _dt.timedelta(seconds=float(wait))


class PendingRepository:
    """Pending items of the runs in one store (every method blocking, one short transaction each)."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.engine = store.engine

    def open_item(
        self, run_id: str, call_key: str, *, kind: str, agent: str, question: str, spec: dict[str, Any]
    ) -> PendingRecord:
        """The item asked at ``call_key`` in ``run_id``: the one asked before, else a new pending one.

        The question and an approval's tool arguments are written masked (the store's
        :class:`~teamrun.secrets.StoreMask`, as run records and journals are): they are shown to people, never
        read back by the run (a resumed run asks from its journal, which finds the item by ``call_key``).
        """
        mask = self.store.secrets
        question = mask.text(question)
        if spec.get("arguments"):
            spec = {**spec, "arguments": mask.value(spec["arguments"])}
        with self.store.errors(f"record a pending item of run {run_id}"):
            for _ in range(5):  # two workers of one run numbering items at once: the loser numbers again
                try:
                    with self.engine.begin() as conn:
                        found = self._by_key(conn, run_id, call_key)
                        if found is not None:
                            return found
                        count = conn.execute(
                            sa.select(sa.func.count())
                            .select_from(pending_items)
                            .where(pending_items.c.run_id == run_id)
                        ).scalar_one()
                        item_id = f"{kind[0]}{int(count) + 1}"
                        conn.execute(
                            pending_items.insert().values(
                                run_id=run_id,
                                item_id=item_id,
                                kind=kind,
                                call_key=call_key,
                                agent=agent,
                                question=question,
                                spec=spec,
                                status="pending",
                                asked_at=_now(),
                                used=False,
                            )
                        )
                        row = self._by_key(conn, run_id, call_key)
                        assert row is not None
                        return row
                except sa.exc.IntegrityError:
                    continue
            raise sa.exc.InvalidRequestError(f"could not number a pending item of run {run_id}")

    @staticmethod
    def _by_key(conn: sa.Connection, run_id: str, call_key: str) -> PendingRecord | None:
        row = (
            conn.execute(
                sa.select(pending_items).where(pending_items.c.run_id == run_id, pending_items.c.call_key == call_key)
            )
            .mappings()
            .first()
        )
        return None if row is None else _record(row)

    def get(self, run_id: str, item_id: str) -> PendingRecord | None:
        with self.store.errors(f"read pending item {item_id} of run {run_id}"), self.engine.connect() as conn:
            row = (
                conn.execute(
                    sa.select(pending_items).where(pending_items.c.run_id == run_id, pending_items.c.item_id == item_id)
                )
                .mappings()
                .first()
            )
        return None if row is None else _record(row)

    def items(self, run_id: str | None = None, *, status: str | None = None) -> list[PendingRecord]:
        """Items of one run (or of every run), oldest first; ``status`` narrows them."""
        query = sa.select(pending_items).order_by(pending_items.c.asked_at, pending_items.c.item_id)
        if run_id is not None:
            query = query.where(pending_items.c.run_id == run_id)
        if status is not None:
            query = query.where(pending_items.c.status == status)
        with self.store.errors("list pending items"), self.engine.connect() as conn:
            return [_record(row) for row in conn.execute(query).mappings().all()]

    def answer(self, run_id: str, item_id: str, value: Any, *, by: str, status: ItemStatus = "answered") -> bool:
        """Record the answer unless the item was answered (or expired) already; whether this call did.

        An answer that comes past the item's ``max_wait_s`` (counted from when it was first asked) is not
        taken: the item is recorded ``expired`` then (as of its deadline), as the run would have found it.
        """
        pending = (
            pending_items.c.run_id == run_id,
            pending_items.c.item_id == item_id,
            pending_items.c.status == "pending",
        )
        with self.store.errors(f"answer item {item_id} of run {run_id}"), self.engine.begin() as conn:
            if status == "answered":
                row = conn.execute(sa.select(pending_items.c.spec, pending_items.c.asked_at).where(*pending)).first()
                deadline = _deadline(row.spec, row.asked_at) if row is not None else None
                if deadline is not None and deadline <= _now():
                    conn.execute(
                        pending_items.update()
                        .where(*pending)
                        .values(status="expired", answer=None, answered_by="nobody", answered_at=deadline)
                    )
                    return False
            done = conn.execute(
                pending_items.update()
                .where(*pending)
                .values(status=status, answer=value, answered_by=by, answered_at=_now())
            )
            return bool(done.rowcount)

    def answer_and_claim(
        self, run_id: str, item_id: str, value: Any, *, by: str
    ) -> Literal["claimed", "answered", "settled"]:
        """Record the answer and, if the run waits, claim it for this process: one transaction, so a cancel of
        the waiting run (:meth:`cancel_waiting`) and this answer cannot both succeed.

        ``"claimed"``: answered, and the run (it waited) is this process's to continue; ``"answered"``: answered,
        the run was not waiting (it runs, and its desk takes the answer); ``"settled"``: nothing answered (the
        item was answered, expired — also past its ``max_wait_s`` — or cancelled with its run first).
        """
        pending = (
            pending_items.c.run_id == run_id,
            pending_items.c.item_id == item_id,
            pending_items.c.status == "pending",
        )
        waiting = (runs.c.id == run_id, runs.c.status == WAITING)
        with self.store.errors(f"answer item {item_id} of run {run_id}"), self.engine.begin() as conn:
            if _end_with_cancelled_run(conn, run_id):  # cancelled while it ran: its items ended with it
                return "settled"
            meta = conn.execute(sa.select(runs.c.meta).where(*waiting)).first()
            claimed = meta is not None and bool(
                conn.execute(
                    runs.update()  # the first write: the run's row (SQLite: the database) is this transaction's now
                    .where(*waiting)
                    .values(
                        status="running", meta={**(meta[0] or {}), "pid": os.getpid(), "host": socket.gethostname()}
                    )
                ).rowcount
            )
            row = conn.execute(sa.select(pending_items.c.spec, pending_items.c.asked_at).where(*pending)).first()
            deadline = _deadline(row.spec, row.asked_at) if row is not None else None
            expired = deadline is not None and deadline <= _now()
            if row is None or expired:
                if expired:
                    conn.execute(
                        pending_items.update()
                        .where(*pending)
                        .values(status="expired", answer=None, answered_by="nobody", answered_at=deadline)
                    )
                if claimed and meta is not None:  # nothing to continue it with: it waits, as it did
                    conn.execute(runs.update().where(runs.c.id == run_id).values(status=WAITING, meta=meta[0]))
                return "settled"
            conn.execute(
                pending_items.update()
                .where(*pending)
                .values(status="answered", answer=value, answered_by=by, answered_at=_now())
            )
            return "claimed" if claimed else "answered"

    def mark_used(self, run_id: str, item_id: str) -> None:
        """The run took the answer (a later ``teamrun answer`` need not continue the run for it)."""
        with self.store.errors(f"update item {item_id} of run {run_id}"), self.engine.begin() as conn:
            conn.execute(
                pending_items.update()
                .where(pending_items.c.run_id == run_id, pending_items.c.item_id == item_id)
                .values(used=True)
            )

    def unused_answers(self, run_id: str) -> int:
        """Answers the run has not taken yet."""
        query = (
            sa.select(sa.func.count())
            .select_from(pending_items)
            .where(
                pending_items.c.run_id == run_id,
                pending_items.c.status != "pending",
                pending_items.c.used == sa.false(),
            )
        )
        with self.store.errors(f"read the pending items of run {run_id}"), self.engine.connect() as conn:
            return int(conn.execute(query).scalar_one())

    def cancel_waiting(self, run_id: str, *, reason: str) -> list[str] | None:
        """Cancel ``run_id`` if it waits for people: the run becomes ``cancelled`` (ended now, ``error`` says
        ``reason``) and each of its pending items ``expired`` with no answer, ``answered_by`` :data:`CANCELLED_BY`
        and taken (no answer continues the run any more; a ``teamrun resume`` of it finds them unanswered, as
        expired). One transaction, on the run's ``waiting`` status: ``None`` when the run was not waiting (an
        answer continued it first), else the ids of the items it ended."""
        now = _now()
        with self.store.errors(f"cancel run {run_id}"), self.engine.begin() as conn:
            done = conn.execute(
                runs.update()
                .where(runs.c.id == run_id, runs.c.status == WAITING)
                .values(status="cancelled", ended_at=now, error=reason)
            )
            if not done.rowcount:
                return None
            ended = [
                str(row[0])
                for row in conn.execute(
                    sa.select(pending_items.c.item_id).where(
                        pending_items.c.run_id == run_id, pending_items.c.status == "pending"
                    )
                )
            ]
            conn.execute(
                pending_items.update()
                .where(pending_items.c.run_id == run_id, pending_items.c.status == "pending")
                .values(status="expired", answer=None, answered_by=CANCELLED_BY, answered_at=now, used=True)
            )
            return ended

    def end_with_run(self, run_id: str) -> list[str]:
        """If ``run_id`` ended cancelled (a cancel while it ran, or of the run an answer continued), record its
        items still pending as :meth:`cancel_waiting` does (``expired``, ``answered_by`` :data:`CANCELLED_BY`):
        they leave ``GET /v1/pending`` and an answer to one is refused saying the run was cancelled. One
        transaction, on the run's ``cancelled`` status; the ids of the items it ended."""
        with self.store.errors(f"end the pending items of run {run_id}"), self.engine.begin() as conn:
            return _end_with_cancelled_run(conn, run_id)

    def claim(self, run_id: str) -> bool:
        """Mark the waiting run ``running`` in this process, unless another process claimed it first."""
        with self.store.errors(f"claim run {run_id}"), self.engine.begin() as conn:
            meta = conn.execute(sa.select(runs.c.meta).where(runs.c.id == run_id, runs.c.status == WAITING)).first()
            if meta is None:
                return False
            claimed = {**(meta[0] or {}), "pid": os.getpid(), "host": socket.gethostname()}
            done = conn.execute(
                runs.update()
                .where(runs.c.id == run_id, runs.c.status == WAITING)
                .values(status="running", meta=claimed)
            )
            return bool(done.rowcount)


def _end_with_cancelled_run(conn: sa.Connection, run_id: str) -> list[str]:
    """In ``conn``'s transaction: the pending items of ``run_id``, if its row says ``cancelled``, recorded as
    ended with it (:meth:`PendingRepository.end_with_run`); their ids."""
    cancelled = conn.execute(
        sa.select(runs.c.ended_at).where(runs.c.id == run_id, runs.c.status == "cancelled")
    ).first()
    if cancelled is None:
        return []
    pending = (pending_items.c.run_id == run_id, pending_items.c.status == "pending")
    ended = [str(row[0]) for row in conn.execute(sa.select(pending_items.c.item_id).where(*pending))]
    if ended:
        conn.execute(
            pending_items.update()
            .where(*pending)
            .values(
                status="expired", answer=None, answered_by=CANCELLED_BY, answered_at=cancelled[0] or _now(), used=True
            )
        )
    return ended
