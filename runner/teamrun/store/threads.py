"""Threads and their messages: one conversation with the user, and each worker's own memory in it."""

from __future__ import annotations

import builtins
import datetime as _dt
import json
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import sqlalchemy as sa

from teamrun.secrets import Redactor, secret_parts
from teamrun.store.schema import memory_generations, memory_messages, pending_items, thread_messages, threads

CONVERSATION = ""
"""The ``scope`` of the conversation with the user; a worker's memory uses the worker's name."""


@dataclass(frozen=True)
class ThreadRecord:
    id: str
    team: str
    created_at: _dt.datetime
    updated_at: _dt.datetime
    current_agent: str | None
    """Who answers the next user turn (the agent the conversation was last handed to)."""
    meta: dict[str, Any] = field(default_factory=dict)
    turns: int = 0
    """User turns in the conversation."""

    def as_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "team": self.team,
            "created_at": self.created_at.isoformat(),
            "updated_at": self.updated_at.isoformat(),
            "current_agent": self.current_agent,
            "turns": self.turns,
            "meta": self.meta,
        }


@dataclass(frozen=True)
class ThreadMessage:
    seq: int
    scope: str
    turn: int
    role: str
    content: Any
    agent: str | None = None
    run_id: str | None = None
    created_at: _dt.datetime | None = None

    def as_message(self) -> dict[str, Any]:
        """The chat message a model sees."""
        return {"role": self.role, "content": self.content}

    def as_dict(self) -> dict[str, Any]:
        return {
            "seq": self.seq,
            "scope": self.scope,
            "turn": self.turn,
            "role": self.role,
            "content": self.content,
            "agent": self.agent,
            "run_id": self.run_id,
            "created_at": self.created_at.isoformat() if self.created_at else None,
        }


@dataclass(frozen=True)
class NewMessage:
    """A message to append: ``role`` and ``content`` as a model sees them, and who said it."""

    role: str
    content: Any
    agent: str | None = None
    scope: str = CONVERSATION


def _now() -> _dt.datetime:
    return _dt.datetime.now(_dt.UTC)


class ThreadRepository:
    def __init__(self, engine: sa.Engine, *, secrets: Redactor | None = None) -> None:
        self.engine = engine
        self.secrets = secrets
        """Masks secrets in what is written (:class:`~teamrun.secrets.StoreMask`)."""

    def _masked(self, value: Any) -> Any:
        return value if self.secrets is None else self.secrets.value(value)

    def get(self, thread_id: str) -> ThreadRecord | None:
        with self.engine.connect() as conn:
            row = conn.execute(sa.select(threads).where(threads.c.id == thread_id)).mappings().first()
            return None if row is None else _record(row, self._turns(conn, thread_id))

    def create(self, thread_id: str, team: str, *, meta: Mapping[str, Any] | None = None) -> ThreadRecord:
        """A new, empty thread; the existing one if another process created it first."""
        now = _now()
        try:
            with self.engine.begin() as conn:
                conn.execute(
                    threads.insert().values(
                        id=thread_id,
                        team=team,
                        created_at=now,
                        updated_at=now,
                        current_agent=None,
                        meta=dict(meta or {}),
                    )
                )
        except sa.exc.IntegrityError:
            pass
        found = self.get(thread_id)
        assert found is not None
        return found

    def list(self, *, team: str | None = None, limit: int | None = None) -> list[ThreadRecord]:
        """Threads, most recently updated first."""
        turns = (
            sa.select(thread_messages.c.thread_id, sa.func.count().label("turns"))
            .where(thread_messages.c.scope == CONVERSATION, thread_messages.c.role == "user")
            .group_by(thread_messages.c.thread_id)
            .subquery()
        )
        query = (
            sa.select(threads, sa.func.coalesce(turns.c.turns, 0).label("turns"))
            .outerjoin(turns, turns.c.thread_id == threads.c.id)
            .order_by(threads.c.updated_at.desc(), threads.c.id)
        )
        if team is not None:
            query = query.where(threads.c.team == team)
        if limit is not None:
            query = query.limit(limit)
        with self.engine.connect() as conn:
            return [_record(row, int(row["turns"])) for row in conn.execute(query).mappings()]

    def messages(self, thread_id: str, *, scope: str | None = CONVERSATION) -> builtins.list[ThreadMessage]:
        """A thread's messages in order: one scope (the conversation by default), or all with ``scope=None``."""
        query = sa.select(thread_messages).where(thread_messages.c.thread_id == thread_id)
        if scope is not None:
            query = query.where(thread_messages.c.scope == scope)
        with self.engine.connect() as conn:
            rows = conn.execute(query.order_by(thread_messages.c.seq)).mappings().all()
        return [
            ThreadMessage(
                seq=r["seq"],
                scope=r["scope"],
                turn=r["turn"],
                role=r["role"],
                content=r["content"],
                agent=r["agent"],
                run_id=r["run_id"],
                created_at=r["created_at"],
            )
            for r in rows
        ]

    def shown_messages(self, thread_id: str, *, scope: str | None = CONVERSATION) -> builtins.list[ThreadMessage]:
        """:meth:`messages` as people are shown them (``teamrun threads show``, ``GET /v1/threads/{id}``): each
        answer a person gave a ``secret: true`` question in one of the thread's runs masked (``***``), as
        ``teamrun runs show`` masks it in the run's answer. The model's own history reads :meth:`messages`."""
        found = self.messages(thread_id, scope=scope)
        mask = self._secret_answers({m.run_id for m in found if m.run_id})
        if mask is None:
            return found
        return [
            ThreadMessage(m.seq, m.scope, m.turn, m.role, mask.value(m.content), m.agent, m.run_id, m.created_at)
            for m in found
        ]

    def _secret_answers(self, run_ids: set[str]) -> Redactor | None:
        """A mask of the answers to the secret questions of these runs (each part of a JSON answer too, as the
        run's events mask them); ``None`` when there is none."""
        if not run_ids:
            return None
        query = sa.select(pending_items.c.spec, pending_items.c.answer).where(
            pending_items.c.run_id.in_(sorted(run_ids)), pending_items.c.answer.is_not(None)
        )
        with self.engine.connect() as conn:
            rows = conn.execute(query).all()
        parts: set[str] = set()
        for spec, answer in rows:
            if isinstance(spec, dict) and spec.get("secret") and answer is not None:
                text = answer if isinstance(answer, str) else json.dumps(answer, ensure_ascii=False)
                parts |= secret_parts(text)
        if not parts:
            return None
        mask = Redactor(include_env=False)
        mask.add(parts, declared=True)
        return mask

    def append(
        self,
        thread_id: str,
        messages: Sequence[NewMessage],
        *,
        run_id: str | None = None,
        current_agent: str | None = None,
        new_turn: bool = True,
        meta: Mapping[str, Any] | None = None,
    ) -> None:
        """Append messages in one transaction (seq numbers follow on; concurrent writers queue on the thread
        row). ``new_turn``: they open the next turn of their scope; else they join its latest turn.
        ``current_agent``: who answers the next user turn; ``meta``: values merged into the thread's ``meta``
        in the same transaction."""
        now = _now()
        with self.engine.begin() as conn:
            if not _lock(conn, thread_id, now):
                raise KeyError(thread_id)
            last_seq = (
                conn.execute(
                    sa.select(sa.func.max(thread_messages.c.seq)).where(thread_messages.c.thread_id == thread_id)
                ).scalar()
                or 0
            )
            turns: dict[str, int] = {}
            rows = []
            for offset, message in enumerate(messages, start=1):
                if message.scope not in turns:
                    latest = conn.execute(
                        sa.select(sa.func.max(thread_messages.c.turn)).where(
                            thread_messages.c.thread_id == thread_id, thread_messages.c.scope == message.scope
                        )
                    ).scalar()
                    turns[message.scope] = (latest or 0) + (1 if new_turn or not latest else 0)
                rows.append(
                    {
                        "thread_id": thread_id,
                        "seq": last_seq + offset,
                        "scope": message.scope,
                        "turn": turns[message.scope],
                        "agent": message.agent,
                        "role": message.role,
                        "content": self._masked(message.content),
                        "run_id": run_id,
                        "created_at": now,
                    }
                )
            if rows:
                conn.execute(thread_messages.insert(), rows)
            values: dict[str, Any] = {"updated_at": now}
            if current_agent is not None:
                values["current_agent"] = current_agent
            if meta:
                old = conn.execute(sa.select(threads.c.meta).where(threads.c.id == thread_id)).scalar()
                values["meta"] = {**(old or {}), **self._masked(dict(meta))}
            conn.execute(threads.update().where(threads.c.id == thread_id).values(**values))

    def update_meta(self, thread_id: str, values: Mapping[str, Any]) -> None:
        """Merge ``values`` into the thread's ``meta``."""
        with self.engine.begin() as conn:
            if not _lock(conn, thread_id, _now()):
                raise KeyError(thread_id)
            old = conn.execute(sa.select(threads.c.meta).where(threads.c.id == thread_id)).scalar()
            conn.execute(
                threads.update()
                .where(threads.c.id == thread_id)
                .values(meta={**(old or {}), **self._masked(dict(values))})
            )

    def delete(self, thread_id: str) -> bool:
        """Delete a thread and its messages (also those indexed for the recall of earlier threads); whether it
        existed."""
        with self.engine.begin() as conn:
            _unindex(conn, thread_id)
            conn.execute(thread_messages.delete().where(thread_messages.c.thread_id == thread_id))
            return conn.execute(threads.delete().where(threads.c.id == thread_id)).rowcount > 0

    @staticmethod
    def _turns(conn: sa.Connection, thread_id: str) -> int:
        return int(
            conn.execute(
                sa.select(sa.func.count()).where(
                    thread_messages.c.thread_id == thread_id,
                    thread_messages.c.scope == CONVERSATION,
                    thread_messages.c.role == "user",
                )
            ).scalar()
            or 0
        )


def _unindex(conn: sa.Connection, thread_id: str) -> None:
    """Remove the thread's messages indexed for recall (:mod:`teamrun.store.memory_messages`, any resource's) and
    their keyword rows; each such resource's cached vectors are stale from now (a new generation token)."""
    found = conn.execute(
        sa.select(memory_messages.c.resource).where(memory_messages.c.thread_id == thread_id).distinct()
    ).scalars()
    resources = sorted(found)
    if not resources:
        return
    if conn.dialect.name == "sqlite":
        conn.execute(sa.text("DELETE FROM memory_messages_fts WHERE thread_id = :t"), {"t": thread_id})
    conn.execute(memory_messages.delete().where(memory_messages.c.thread_id == thread_id))
    for resource in resources:
        conn.execute(
            memory_generations.update().where(memory_generations.c.resource == resource).values(token=uuid.uuid4().hex)
        )


def _lock(conn: sa.Connection, thread_id: str, now: _dt.datetime) -> bool:
    """Lock the thread's row for this transaction by writing to it first: PostgreSQL locks the row, SQLite
    takes its write lock (a later writer waits), so reads that follow see every earlier append.
    Whether the thread exists."""
    touched = conn.execute(threads.update().where(threads.c.id == thread_id).values(updated_at=now))
    return touched.rowcount > 0


def _record(row: sa.RowMapping, turns: int) -> ThreadRecord:
    return ThreadRecord(
        id=row["id"],
        team=row["team"],
        created_at=row["created_at"],
        updated_at=row["updated_at"],
        current_agent=row["current_agent"],
        meta=dict(row["meta"] or {}),
        turns=turns,
    )


__all__ = ["CONVERSATION", "NewMessage", "ThreadMessage", "ThreadRecord", "ThreadRepository"]
