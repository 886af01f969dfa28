"""Thread messages indexed for a resource's recall of earlier threads (``memory.recall.<agent>.messages``).

Each thread turn of a run given a resource adds its user message and its answer here as it ends (text with secrets
masked, and its embedding), under that resource: :meth:`MessageIndex.add`. A recall searches them as the facts are
searched (:mod:`teamrun.store.memory`: the same vector, keyword and hybrid scores, ``min_score``), scoped to the
resource in the query and leaving out the asking run's own thread, whose history the agent already has:
:meth:`MessageIndex.search`.

The resource's vectors are cached per process as the facts' are, valid while its generation token (shared with the
facts: changed by every save, index and forget) is unchanged. ``MemoryStore.forget`` removes a resource's rows (and
counts them); ``ThreadRepository.delete`` removes a thread's. Sync like the rest of the store.
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from teamrun.store.memory import (
    _CANDIDATES,
    _STOP_WORDS,
    CACHE_BYTES,
    MemoryRefused,
    _common_words,
    _fts_term,
    _numpy,
    _other_size,
    _pg_term,
    _rounded,
    _scope_token,
    _vector_bytes,
    bump_generation,
    check_resource_id,
    check_search,
    query_words,
    ranked,
)

if TYPE_CHECKING:
    import numpy as np
    import sqlalchemy as sa

    from teamrun.store.db import Store

__all__ = ["FoundMessage", "IndexedMessage", "MessageIndex", "StoredMessage", "message_id"]


@dataclass(frozen=True)
class IndexedMessage:
    """One message of a thread turn to index: its role (``user`` or ``assistant``), text (secrets masked) and
    embedding."""

    role: str
    text: str
    vector: Sequence[float]


@dataclass(frozen=True)
class StoredMessage:
    id: str
    resource: str
    thread_id: str
    run_id: str | None
    role: str
    text: str
    saved_at: float


@dataclass(frozen=True)
class FoundMessage:
    message: StoredMessage
    score: float
    """The hybrid score in [0, 1] used for ranking and ``min_score``."""
    vector_score: float | None
    keyword_score: float | None


def message_id(resource: str, thread_id: str, run_id: str, role: str) -> str:
    """Stable: one turn's message of a role is indexed once however often its run is resumed."""
    return hashlib.sha256(f"{resource}\0{thread_id}\0{run_id}\0{role}".encode()).hexdigest()[:32]


@dataclass
class _Matrix:
    token: str
    ids: list[str]
    threads: np.ndarray  # (n,) object: each row's thread id
    vectors: np.ndarray  # (n, dims) float32, each row L2-normalised
    common: frozenset[str]


class MessageIndex:
    """A store's indexed thread messages, each scoped to one resource in every query."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self._cache: OrderedDict[str, _Matrix] = OrderedDict()
        self._lock = threading.Lock()

    def add(self, resource: str, thread_id: str, run_id: str, messages: Sequence[IndexedMessage], *, at: float) -> int:
        """Index ``messages`` of one turn (run ``run_id``) of ``thread_id`` for ``resource``; a message already
        indexed is kept as it is. How many were added. The texts are masked as everything in the store is."""
        import sqlalchemy as sa

        check_resource_id(resource)
        rows = [self._row(resource, thread_id, run_id, m, at) for m in messages]
        if not rows:
            return 0
        with self.store.errors(f"index the thread messages of {resource!r}"):
            for attempt in range(3):
                try:
                    with self.store.engine.begin() as conn:
                        return self._add_once(conn, resource, rows)
                except sa.exc.IntegrityError:  # another process indexed the same turn, or the resource's first
                    if attempt == 2:
                        raise
        raise AssertionError("unreachable")

    def _row(self, resource: str, thread_id: str, run_id: str, message: IndexedMessage, at: float) -> dict[str, Any]:
        blob, dims = _vector_bytes(message.vector)
        text = self.store.secrets.text(message.text)
        ident = message_id(resource, thread_id, run_id, message.role)
        return {
            "resource": resource,
            "id": ident,
            "thread_id": thread_id,
            "run_id": run_id,
            "role": message.role,
            "text": text,
            "dims": dims,
            "vector": blob,
            "saved_at": at,
        }

    def _add_once(self, conn: sa.Connection, resource: str, rows: list[dict[str, Any]]) -> int:
        import sqlalchemy as sa

        from teamrun.store import schema

        table = schema.memory_messages
        bump_generation(conn, resource)  # first: the resource's write lock, and every cache of it is stale
        kept = conn.execute(sa.select(table.c.dims).where(table.c.resource == resource).limit(1)).scalar()
        for row in rows:
            if kept is not None and row["dims"] != kept:
                raise MemoryRefused(_other_size("the message's embedding", row["dims"], resource, int(kept)))
        known = set(
            conn.execute(
                sa.select(table.c.id).where(table.c.resource == resource, table.c.id.in_([r["id"] for r in rows]))
            ).scalars()
        )
        new = [row for row in rows if row["id"] not in known]
        if new:
            conn.execute(table.insert(), new)
        if new and conn.dialect.name == "sqlite":
            conn.execute(
                sa.text(
                    "INSERT INTO memory_messages_fts (scope, text, message_id, resource, thread_id) "
                    "VALUES (:scope, :text, :id, :resource, :thread_id)"
                ),
                [{**row, "scope": _scope_token(resource)} for row in new],
            )
        return len(new)

    def count(self, resource: str) -> int:
        """How many messages are indexed for ``resource``."""
        import sqlalchemy as sa

        from teamrun.store import schema

        table = schema.memory_messages
        with self.store.errors(f"count the thread messages of {resource!r}"), self.store.engine.connect() as conn:
            return int(conn.execute(sa.select(sa.func.count()).where(table.c.resource == resource)).scalar_one())

    def search(
        self,
        resource: str,
        query: str,
        vector: Sequence[float] | None,
        *,
        k: int = 3,
        min_score: float = 0.0,
        mode: Literal["hybrid", "vector", "keyword"] = "hybrid",
        exclude_thread: str | None = None,
    ) -> list[FoundMessage]:
        """The ``k`` messages of ``resource`` that best match ``query`` (and its embedding ``vector``), best first,
        none of thread ``exclude_thread``. ``vector`` may be None only in ``keyword`` mode."""
        check_search(resource, mode, vector, of="message")
        if k < 1:
            return []
        candidates = max(_CANDIDATES, 4 * k)
        with self.store.errors(f"search the thread messages of {resource!r}"), self.store.engine.connect() as conn:
            matrix = self._matrix(conn, resource)
            if matrix is None:
                return []
            vector_scores: dict[str, float] = {}
            keyword_scores: dict[str, float] = {}
            if vector is not None and mode != "keyword":
                vector_scores = _vector_scores(matrix, resource, vector, exclude_thread, candidates)
            if mode != "vector" and query.strip():
                keyword_scores = _keyword_scores(conn, resource, query, exclude_thread, candidates, matrix.common)
            scored = ranked(vector_scores, keyword_scores, mode, candidates, min_score)[:k]
            found = self._fetch(conn, resource, [ident for ident, *_ in scored], exclude_thread)
        return [
            FoundMessage(found[ident], round(score, 6), _rounded(v), _rounded(kw))
            for ident, score, v, kw in scored
            if ident in found  # a thread deleted since the cache was read
        ]

    def _matrix(self, conn: sa.Connection, resource: str) -> _Matrix | None:
        """The resource's message vectors: cached while its generation token is unchanged (read here, every time);
        None when it has none."""
        import sqlalchemy as sa

        from teamrun.store import schema

        np = _numpy()
        generations, table = schema.memory_generations, schema.memory_messages
        token = conn.execute(sa.select(generations.c.token).where(generations.c.resource == resource)).scalar()
        if token is None:
            return None
        with self._lock:
            cached = self._cache.get(resource)
            if cached is not None:
                self._cache.move_to_end(resource)
        if cached is not None and cached.token == token:
            return cached
        rows = conn.execute(
            sa.select(table.c.id, table.c.thread_id, table.c.text, table.c.vector, table.c.dims).where(
                table.c.resource == resource
            )
        ).all()
        if not rows:
            return None
        dims = rows[0].dims
        kept = [r for r in rows if r.dims == dims]
        blobs = b"".join(r.vector if isinstance(r.vector, bytes) else bytes(r.vector) for r in kept)
        matrix = _Matrix(
            token=str(token),
            ids=[r.id for r in kept],
            threads=np.array([r.thread_id for r in kept], dtype=object),
            vectors=np.frombuffer(blobs, dtype="<f4").reshape(len(kept), dims),
            common=_common_words([r.text for r in rows]),
        )
        with self._lock:
            self._cache[resource] = matrix
            self._cache.move_to_end(resource)
            held = sum(m.vectors.nbytes for m in self._cache.values())
            while held > CACHE_BYTES and len(self._cache) > 1:  # the one just read stays
                _resource, dropped = self._cache.popitem(last=False)
                held -= dropped.vectors.nbytes
        return matrix

    def _fetch(
        self, conn: sa.Connection, resource: str, ids: Sequence[str], exclude_thread: str | None
    ) -> dict[str, StoredMessage]:
        import sqlalchemy as sa

        from teamrun.store import schema

        if not ids:
            return {}
        table = schema.memory_messages
        query = sa.select(table).where(table.c.resource == resource, table.c.id.in_(list(ids)))
        if exclude_thread is not None:
            query = query.where(table.c.thread_id != exclude_thread)
        return {row.id: _message(row) for row in conn.execute(query)}


def _vector_scores(
    matrix: _Matrix, resource: str, vector: Sequence[float], exclude_thread: str | None, take: int
) -> dict[str, float]:
    """The cosines (clamped to [0, 1]) of the ``take`` best messages outside ``exclude_thread``."""
    np = _numpy()
    query = np.asarray(list(vector), dtype=np.float32)
    if query.ndim != 1 or query.shape[0] != matrix.vectors.shape[1]:
        size = int(query.shape[0]) if query.ndim == 1 else 0
        raise MemoryRefused(_other_size("the query's embedding", size, resource, int(matrix.vectors.shape[1])))
    norm = float(np.linalg.norm(query))
    if not np.isfinite(norm) or norm == 0.0:
        return {}
    cosines = matrix.vectors @ (query / norm)
    np.clip(cosines, 0.0, 1.0, out=cosines)
    if exclude_thread is not None:
        cosines[matrix.threads == exclude_thread] = -1.0
    take = min(len(matrix.ids), take)
    best = np.argpartition(cosines, -take)[-take:] if take < len(matrix.ids) else np.arange(len(matrix.ids))
    values = cosines[best].tolist()
    return {matrix.ids[i]: v for i, v in zip(best.tolist(), values, strict=True) if v >= 0.0}


def _keyword_scores(
    conn: sa.Connection, resource: str, query: str, exclude_thread: str | None, limit: int, common: frozenset[str]
) -> dict[str, float]:
    """BM25 (FTS5) or ``ts_rank`` of the query's words, divided by the best one: in [0, 1] (as for facts)."""
    import sqlalchemy as sa

    words = [w for w in query_words(query) if w not in _STOP_WORDS] or query_words(query)
    words = [w for w in words if w not in common] or words
    if not words:
        return {}
    params: dict[str, Any] = {"r": resource, "t": exclude_thread or "", "limit": limit}
    if conn.dialect.name == "sqlite":
        params["match"] = (
            f'scope : "{_scope_token(resource)}" AND text : (' + " OR ".join(_fts_term(w) for w in words) + ")"
        )
        sql = (
            "SELECT message_id AS id, -rank AS score FROM memory_messages_fts "
            "WHERE memory_messages_fts MATCH :match AND resource = :r AND thread_id != :t ORDER BY rank LIMIT :limit"
        )
    else:
        params["q"] = " | ".join(_pg_term(w) for w in words)
        sql = (
            "SELECT id, ts_rank(keywords, to_tsquery('simple', :q)) AS score FROM memory_messages "
            "WHERE resource = :r AND thread_id != :t AND keywords @@ to_tsquery('simple', :q) "
            "ORDER BY score DESC, id LIMIT :limit"
        )
    scores = {row.id: float(row.score) for row in conn.execute(sa.text(sql), params)}
    best = max(scores.values(), default=0.0)
    if best <= 0.0:
        return dict.fromkeys(scores, 1.0)
    return {ident: max(0.0, min(1.0, score / best)) for ident, score in scores.items()}


def _message(row: Any) -> StoredMessage:
    return StoredMessage(
        id=row.id,
        resource=row.resource,
        thread_id=row.thread_id,
        run_id=row.run_id,
        role=row.role,
        text=row.text,
        saved_at=float(row.saved_at),
    )
