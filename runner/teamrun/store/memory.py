"""Long-term memory: facts a team learned about a resource (a user, an organisation), recalled in later threads.

Sync like the rest of the store (SQLAlchemy Core); the engine calls it through ``asyncio.to_thread``.

Every query names the resource (``WHERE resource = :r``, and on SQLite the FTS5 match itself is scoped by a
per-resource token), so recall is scoped in the query, never filtered afterwards.

Scoring (:meth:`MemoryStore.search`):

- ``vector_score``: the cosine of the query's and the memory's embeddings, clamped to [0, 1]. Vectors are
  float32 bytes read with one query per resource and kept in an in-process matrix (numpy), valid while the
  resource's generation token (changed by every save and forget, read by each search) is unchanged, so another
  process's save is seen at the next search. On PostgreSQL with the ``vector`` extension (pgvector) in the database
  (or created by this role), each memory's embedding is also kept in a dimension-less ``embedding vector`` column
  and a search ranks them in SQL (``ORDER BY embedding <=> :query`` under ``WHERE resource = :r``): exact cosine
  ranking, the same as numpy's (no approximate index: a dimension-less column can have none, and a resource holds
  at most ``max_memories_per_resource``). :attr:`MemoryStore.vector_backend` says which one a store uses. Without
  the extension (never there, or removed since) the float32 bytes, always kept, are scored in process: nothing is
  lost and nothing fails; memories saved meanwhile get their ``embedding`` at the next search once it is back.
- ``keyword_score``: BM25 (FTS5 on SQLite; ``ts_rank`` of a stored ``to_tsvector('simple', fact)`` on
  PostgreSQL) of any of the query's words, divided by the best one of this query: in [0, 1], 1 for the best
  keyword match (so ``min_score`` judges the vector part mostly: an off-topic query's best keyword match still
  gets 1). Stop words and the words of more than a fifth of a large resource's facts are left out; a longer
  word matches as a prefix without its plural or -ed/-ing ending.
- ``score`` (``hybrid``): ``VECTOR_WEIGHT * vector_score + (1 - VECTOR_WEIGHT) * keyword_score`` over the union
  of the best vector and the best keyword candidates; ``vector`` and ``keyword`` modes use one part alone.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import threading
import time
import unicodedata
import uuid
from collections import Counter, OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from teamrun.bounds import json_kind
from teamrun.errors import UserError

if TYPE_CHECKING:
    import numpy as np
    import sqlalchemy as sa

    from teamrun.store.db import Store

MAX_RESOURCE_CHARS = 200
VECTOR_WEIGHT = 0.6
"""The vector part of the hybrid score; the keyword part weighs the rest."""
_List = list  # ``MemoryStore.list`` hides the builtin inside the class
CACHE_BYTES = 256 * 2**20
"""The most vector bytes a :class:`MemoryStore` keeps in memory (10,000 memories of 1,536 dimensions are 61 MB);
the least recently searched resources are dropped first and read again when searched."""
_CANDIDATES = 50
"""Each part of a hybrid search brings at least this many candidates (``4 * k`` when more)."""
_COMMON_SHARE = 0.2
_COMMON_FROM = 500
"""A resource with fewer memories keeps every query word (ranking all its matches is cheap)."""
_PGVECTOR_LOCK = 7140015
"""The PostgreSQL advisory lock under which one opener creates the extension and the ``embedding`` column."""
_STATES = 4096
"""The most resources whose :class:`_State` a pgvector :class:`MemoryStore` keeps."""


class MemoryRefused(UserError):
    """A memory operation refused for a reason the user can act on: a bad resource id, a fact past the cap,
    a resource past its cap, a vector whose size differs from the resource's other vectors."""


@dataclass(frozen=True)
class Provenance:
    """Where a memory came from."""

    run_id: str | None
    thread_id: str | None
    agent: str | None
    saved_at: float
    """Unix seconds."""


@dataclass(frozen=True)
class Memory:
    id: str
    """Stable: a hash of (resource, normalised fact), so the same fact saved twice is one memory."""
    resource: str
    fact: str
    provenance: Provenance
    expires_at: float | None

    def as_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "resource": self.resource,
            "fact": self.fact,
            "run_id": self.provenance.run_id,
            "thread_id": self.provenance.thread_id,
            "agent": self.provenance.agent,
            "saved_at": self.provenance.saved_at,
            "expires_at": self.expires_at,
        }


@dataclass(frozen=True)
class Recalled:
    memory: Memory
    score: float
    """The hybrid score in [0, 1] used for ranking and ``min_score``."""
    vector_score: float | None
    keyword_score: float | None


@dataclass(frozen=True)
class Saved:
    memory: Memory
    created: bool
    """False: this fact was already saved for this resource (the provenance kept is the first one's)."""


@dataclass(frozen=True)
class Forgotten:
    resource: str
    memories: int
    """Memories removed."""
    working_memory: int
    """Working-memory records removed (workspace entries with ``persist: resource``)."""
    runs: int = 0
    """Journaled runs of the resource whose journals were redacted (:mod:`teamrun.store.memory_journal`)."""
    journal_entries: int = 0
    """Journal entries redacted in them (recalls, embeddings, workspace changes, memory and workspace tool calls)."""
    run_ids: tuple[str, ...] = ()
    """Those runs' ids."""
    events: int = 0
    """Kept events of those runs (a served run's, :mod:`teamrun.store.run_events`) whose facts or values were
    removed."""
    indexed_messages: int = 0
    """Thread messages indexed for the recall of earlier threads (:mod:`teamrun.store.memory_messages`) removed
    from the index (the threads keep the messages themselves)."""

    def as_dict(self) -> dict[str, Any]:
        return {
            "resource": self.resource,
            "memories": self.memories,
            "working_memory": self.working_memory,
            "indexed_messages": self.indexed_messages,
            "runs": self.runs,
            "journal_entries": self.journal_entries,
            "events": self.events,
        }


@dataclass(frozen=True)
class MemoryLimits:
    max_fact_chars: int = 2000
    max_memories_per_resource: int = 10000


def check_search(resource: str, mode: str, vector: Sequence[float] | None, *, of: str) -> None:
    """Refuse a search (of memories, or of earlier threads' messages: ``of``) that cannot be made: a bad resource
    id, an unknown mode, or a mode that ranks by embedding without the query's ``vector``."""
    check_resource_id(resource)
    if mode not in ("hybrid", "vector", "keyword"):
        raise MemoryRefused(f"unknown memory search mode {mode!r}: hybrid, vector or keyword")
    if mode != "keyword" and vector is None:
        raise MemoryRefused(f"a {mode} {of} search needs the query's embedding")


def check_resource_id(resource: object) -> str:
    """The one check of a resource id (CLI, serve, engine): non-empty printable text of at most 200 characters.

    Returns it unchanged; raises :class:`MemoryRefused` saying what is wrong.
    """
    if not isinstance(resource, str):
        raise MemoryRefused(f"a resource id is text (e.g. a user id like 'customer-42'), not {json_kind(resource)}")
    if not resource.strip():
        raise MemoryRefused("the resource id is empty: give the user's or organisation's id, e.g. 'customer-42'")
    if len(resource) > MAX_RESOURCE_CHARS:
        raise MemoryRefused(
            f"the resource id is {len(resource)} characters long; at most {MAX_RESOURCE_CHARS} "
            "(use a stable id, e.g. 'customer-42', not a description)"
        )
    if not resource.isprintable():
        bad = next(c for c in resource if not c.isprintable())
        raise MemoryRefused(
            f"the resource id contains a character that is not printable text (U+{ord(bad):04X}); "
            "use printable text, e.g. 'customer-42'"
        )
    return resource


def normalise_fact(fact: str) -> str:
    """What makes two facts "the same": Unicode-normalised, case-folded, whitespace collapsed, final dots dropped."""
    text = unicodedata.normalize("NFKC", fact).casefold()
    return " ".join(text.split()).rstrip(" .!")


def memory_id(resource: str, fact: str) -> str:
    return hashlib.sha256(f"{resource}\0{normalise_fact(fact)}".encode()).hexdigest()[:32]


_WORD = re.compile(r"\w+", re.UNICODE)
_STOP_WORDS_TEXT = (
    "a an the and or but if of to in on at by for with from as is are was were be been being am do does did "
    "has have had i me my we our you your he him his she her it its they them their this that these those "
    "what which who whom whose when where why how there here not no so than then too very can could will "
    "would shall should may might must about into over under again just also s t"
)
_STOP_WORDS = frozenset(_STOP_WORDS_TEXT.split())
"""Words a keyword search leaves out of a query (unless it has no other): they match nearly every fact."""


def query_words(text: str, *, limit: int = 32) -> list[str]:
    """The distinct words of a query, lower-cased, in order (at most ``limit``)."""
    seen: dict[str, None] = {}
    for word in _WORD.findall(unicodedata.normalize("NFKC", text).casefold()):
        if len(seen) >= limit:
            break
        seen.setdefault(word, None)
    return list(seen)


def _scope_token(resource: str) -> str:
    """The one FTS5 token that scopes a match to a resource (any resource id becomes a plain word)."""
    return "r" + hashlib.sha256(resource.encode()).hexdigest()[:24]


@dataclass
class _Matrix:
    token: str
    ids: list[str]
    vectors: np.ndarray  # (n, dims) float32, each row L2-normalised
    expires: np.ndarray  # (n,) float64, +inf when it never expires
    expiring: bool  # whether any of them expires
    common: frozenset[str]
    """Words in more than :data:`_COMMON_SHARE` of a large resource's facts: a keyword search leaves them out
    (they add little to BM25 and make it rank most of the resource)."""


@dataclass(frozen=True)
class _State:
    """What a pgvector search needs of a resource besides the ranking query, valid while its token is unchanged."""

    token: str
    dims: int
    common: frozenset[str]


class MemoryStore:
    """A store's long-term memories and working-memory records, each scoped to one resource in every query."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self._cache: OrderedDict[str, _Matrix] = OrderedDict()
        """Resources' matrices, the least recently searched first; at most :data:`CACHE_BYTES` of vectors."""
        self._states: OrderedDict[str, _State] = OrderedDict()
        """pgvector only: resources' sizes and common words, the least recently searched first."""
        self._lock = threading.Lock()
        self._backend: Literal["numpy", "pgvector"] | None = None

    @property
    def vector_backend(self) -> Literal["numpy", "pgvector"]:
        """How vectors are scored: ``pgvector`` (in SQL, on PostgreSQL when the database has the ``vector``
        extension or this role may create it) or ``numpy`` (in process, over the resource's vectors read in one
        query). Decided at this object's first use of the store."""
        if self._backend is None:
            self._backend = self._open_vectors()
        return self._backend

    def _vectors_lost(self) -> None:
        """The ``vector`` extension (or the ``embedding`` column) went while this process used it: forget what was
        decided and cached, so the next use looks again (and scores the kept bytes in process if it is gone)."""
        with self._lock:
            self._backend = None
            self._states.clear()

    def _open_vectors(self) -> Literal["numpy", "pgvector"]:
        """``pgvector`` when the store is a PostgreSQL database whose server has the extension and the
        ``memories.embedding`` column exists or could be made now (``CREATE EXTENSION IF NOT EXISTS vector``
        needs a superuser the first time in a database; the column, the table's owner). Anything less: ``numpy``,
        never an error (the float32 bytes every memory keeps are scored in process)."""
        import sqlalchemy as sa

        if self.store.dialect != "postgresql":
            return "numpy"
        with self.store.errors("look for the pgvector extension"), self.store.engine.connect() as conn:
            available = conn.execute(sa.text("SELECT 1 FROM pg_available_extensions WHERE name = 'vector'")).first()
            installed = conn.execute(sa.text("SELECT 1 FROM pg_extension WHERE extname = 'vector'")).first()
            column = conn.execute(
                sa.text(
                    "SELECT 1 FROM information_schema.columns WHERE table_schema = current_schema() "
                    "AND table_name = 'memories' AND column_name = 'embedding'"
                )
            ).first()
        if available is None:  # not on this server (or its files removed since the extension was created)
            return "numpy"
        if installed is not None and column is not None:
            return "pgvector"
        try:
            with self.store.engine.begin() as conn:
                conn.execute(sa.text("SELECT pg_advisory_xact_lock(:key)"), {"key": _PGVECTOR_LOCK})
                if installed is None:
                    conn.exec_driver_sql("CREATE EXTENSION IF NOT EXISTS vector")
                conn.exec_driver_sql("ALTER TABLE memories ADD COLUMN IF NOT EXISTS embedding vector")
        except sa.exc.DBAPIError:  # not a superuser (pgvector is not a trusted extension), not the table's owner
            return "numpy"
        return "pgvector"

    # -- saving ------------------------------------------------------------------------------------------

    def save(
        self,
        resource: str,
        fact: str,
        vector: Sequence[float],
        provenance: Provenance,
        *,
        ttl_s: float | None = None,
        limits: MemoryLimits = MemoryLimits(),
    ) -> Saved:
        """Save ``fact`` for ``resource`` (once: the same normalised fact again returns the first one).

        Secrets in the fact are masked as everywhere in the store (:attr:`Store.secrets`) before it is written; the
        caller masks them before embedding too. Expired memories of the resource are removed first."""
        import sqlalchemy as sa

        check_resource_id(resource)
        fact = self.store.secrets.text(fact).strip() if isinstance(fact, str) else fact
        if not isinstance(fact, str) or not fact:
            raise MemoryRefused("a memory's fact is empty: give the fact to remember as text")
        if len(fact) > limits.max_fact_chars:
            raise MemoryRefused(
                f"the fact is {len(fact)} characters long; a memory holds at most {limits.max_fact_chars} "
                "(save one short fact per memory)"
            )
        if ttl_s is not None and not ttl_s > 0:
            raise MemoryRefused(f"a memory's time to live is a positive number of seconds, not {ttl_s!r}")
        blob, dims = _vector_bytes(vector)
        ident = memory_id(resource, fact)
        expires_at = provenance.saved_at + ttl_s if ttl_s is not None else None
        now = time.time()
        with self.store.errors(f"save a memory of {resource!r}"):
            pgvector = self.vector_backend == "pgvector"
            for attempt in range(3):
                try:
                    with self.store.engine.begin() as conn:
                        return self._save_once(
                            conn, resource, ident, fact, blob, dims, provenance, expires_at, limits, now, pgvector
                        )
                except sa.exc.IntegrityError:  # another process saved the same fact, or the resource's first
                    if attempt == 2:
                        raise
                except sa.exc.DBAPIError as exc:
                    if not (pgvector and _vectors_gone(exc)) or attempt == 2:
                        raise
                    self._vectors_lost()  # the extension was dropped while this process ran: look again
                    pgvector = self.vector_backend == "pgvector"
        raise AssertionError("unreachable")

    def _save_once(
        self,
        conn: sa.Connection,
        resource: str,
        ident: str,
        fact: str,
        blob: bytes,
        dims: int,
        provenance: Provenance,
        expires_at: float | None,
        limits: MemoryLimits,
        now: float,
        pgvector: bool,
    ) -> Saved:
        import sqlalchemy as sa

        from teamrun.store import schema

        table = schema.memories
        self._lock_resource(conn, resource)  # first: the count below and the insert are one step for the cap
        self._drop_expired(conn, resource, now)
        found = conn.execute(sa.select(table).where(table.c.id == ident, table.c.resource == resource)).first()
        if found is not None:
            return Saved(_memory(found), created=False)
        existing = conn.execute(
            sa.select(table.c.dims, sa.func.count()).where(table.c.resource == resource).group_by(table.c.dims)
        ).all()
        if existing and existing[0][0] != dims:
            raise MemoryRefused(_other_size("the fact's embedding", dims, resource, int(existing[0][0])))
        count = sum(int(n) for _d, n in existing)
        if count >= limits.max_memories_per_resource:
            raise _full(resource, count, limits)
        embedding = {"embedding": _vector_text(blob)} if pgvector else {}
        conn.execute(
            _memories_insert(pgvector).values(
                **embedding,
                id=ident,
                resource=resource,
                fact=fact,
                dims=dims,
                vector=blob,
                run_id=provenance.run_id,
                thread_id=provenance.thread_id,
                agent=provenance.agent,
                saved_at=provenance.saved_at,
                expires_at=expires_at,
            )
        )
        if conn.dialect.name == "sqlite":
            conn.execute(
                sa.text("INSERT INTO memories_fts (scope, fact, memory_id, resource) VALUES (:scope, :fact, :id, :r)"),
                {"scope": _scope_token(resource), "fact": fact, "id": ident, "r": resource},
            )
        self._bump(conn, resource)
        return Saved(Memory(ident, resource, fact, provenance, expires_at), created=True)

    # -- reading -----------------------------------------------------------------------------------------

    def list(self, resource: str, *, limit: int | None = None) -> list[Memory]:
        """The resource's memories that have not expired, the most recently saved first."""
        import sqlalchemy as sa

        from teamrun.store import schema

        check_resource_id(resource)
        table = schema.memories
        query = (
            sa.select(table)
            .where(table.c.resource == resource, _alive(table, time.time()))
            .order_by(table.c.saved_at.desc(), table.c.id)
        )
        if limit is not None:
            query = query.limit(limit)
        with self.store.errors(f"list the memories of {resource!r}"), self.store.engine.connect() as conn:
            return [_memory(row) for row in conn.execute(query)]

    def search(
        self,
        resource: str,
        query: str,
        vector: Sequence[float] | None,
        *,
        k: int = 5,
        min_score: float = 0.0,
        mode: Literal["hybrid", "vector", "keyword"] = "hybrid",
        now: float | None = None,
    ) -> _List[Recalled]:
        """The ``k`` memories of ``resource`` that best match ``query`` (and its embedding ``vector``), best first.

        ``vector`` may be None only in ``keyword`` mode. Expired memories are never recalled.
        """
        check_search(resource, mode, vector, of="memory")
        if k < 1:
            return []
        now = time.time() if now is None else now
        candidates = max(_CANDIDATES, 4 * k)
        import sqlalchemy as sa

        with self.store.errors(f"search the memories of {resource!r}"):
            pgvector = self.vector_backend == "pgvector"
            try:
                return self._search(resource, query, vector, k, min_score, mode, now, candidates, pgvector)
            except sa.exc.DBAPIError as exc:
                if not (pgvector and _vectors_gone(exc)):
                    raise
                self._vectors_lost()  # the extension was dropped while this process ran: look again, once
                return self._search(
                    resource, query, vector, k, min_score, mode, now, candidates, self.vector_backend == "pgvector"
                )

    def _search(
        self,
        resource: str,
        query: str,
        vector: Sequence[float] | None,
        k: int,
        min_score: float,
        mode: Literal["hybrid", "vector", "keyword"],
        now: float,
        candidates: int,
        pgvector: bool,
    ) -> _List[Recalled]:
        """:meth:`search` with the scoring ``pgvector`` says (database errors are the caller's to say)."""
        vector_scores: dict[str, float] = {}
        keyword_scores: dict[str, float] = {}
        with self.store.engine.connect() as conn:
            common: frozenset[str]
            if pgvector:
                state = self._state(conn, resource)
                if state is None:
                    return []
                if vector is not None and mode != "keyword":
                    vector_scores = _sql_vector_scores(conn, state, resource, vector, now, candidates)
                common = state.common
            else:
                matrix = self._matrix(conn, resource)
                if matrix is None:
                    return []
                if vector is not None and mode != "keyword":
                    vector_scores = self._vector_scores(matrix, resource, vector, now, candidates)
                common = matrix.common
            if mode != "vector" and query.strip():
                keyword_scores = self._keyword_scores(conn, resource, query, now, candidates, common)
            scored = ranked(vector_scores, keyword_scores, mode, candidates, min_score)
            memories = self._fetch(conn, resource, [item[0] for item in scored[: 2 * k]], now)
        found = [
            Recalled(memories[ident], round(score, 6), _rounded(v), _rounded(kw))
            for ident, score, v, kw in scored[: 2 * k]
            if ident in memories  # not expired (the keyword index does not know expiry)
        ]
        return found[:k]

    def _vector_scores(
        self, matrix: _Matrix, resource: str, vector: Sequence[float], now: float, take: int
    ) -> dict[str, float]:
        """The cosines (clamped to [0, 1]) of the ``take`` best memories that have not expired."""
        np = _numpy()
        if not matrix.ids:
            return {}
        query = np.asarray(list(vector), dtype=np.float32)
        if query.ndim != 1 or query.shape[0] != matrix.vectors.shape[1]:
            size = int(query.shape[0]) if query.ndim == 1 else 0
            raise MemoryRefused(_other_size("the query's embedding", size, resource, int(matrix.vectors.shape[1])))
        norm = float(np.linalg.norm(query))
        if not np.isfinite(norm) or norm == 0.0:
            return {}
        cosines = matrix.vectors @ (query / norm)
        np.clip(cosines, 0.0, 1.0, out=cosines)
        if matrix.expiring:
            cosines[matrix.expires <= now] = -1.0
        take = min(len(matrix.ids), take)
        best = np.argpartition(cosines, -take)[-take:] if take < len(matrix.ids) else np.arange(len(matrix.ids))
        values = cosines[best].tolist()
        return {matrix.ids[i]: v for i, v in zip(best.tolist(), values, strict=True) if v >= 0.0}

    def _matrix(self, conn: sa.Connection, resource: str) -> _Matrix | None:
        """The resource's vectors (and its common words): cached while its generation token is unchanged (read
        here, every time); None when the resource has no memories."""
        import sqlalchemy as sa

        np = _numpy()

        from teamrun.store import schema

        generations = schema.memory_generations
        token = conn.execute(sa.select(generations.c.token).where(generations.c.resource == resource)).scalar()
        if token is None:
            return None
        with self._lock:
            cached = self._cache.get(resource)
            if cached is not None:
                self._cache.move_to_end(resource)
        if cached is not None and cached.token == token:
            return cached
        table = schema.memories
        rows = conn.execute(
            sa.select(table.c.id, table.c.fact, table.c.vector, table.c.dims, table.c.expires_at, generations.c.token)
            .join(generations, generations.c.resource == table.c.resource)
            .where(table.c.resource == resource)
        ).all()
        if not rows:
            return None
        dims = rows[0].dims
        kept = [r for r in rows if r.dims == dims]
        blobs = b"".join(r.vector if isinstance(r.vector, bytes) else bytes(r.vector) for r in kept)
        vectors = np.frombuffer(blobs, dtype="<f4")
        matrix = _Matrix(
            token=rows[0].token,
            ids=[r.id for r in kept],
            vectors=vectors.reshape(len(kept), dims),
            expires=np.array([np.inf if r.expires_at is None else r.expires_at for r in kept], dtype=np.float64),
            expiring=any(r.expires_at is not None for r in kept),
            common=_common_words([r.fact for r in rows]),
        )
        with self._lock:
            self._cache[resource] = matrix
            self._cache.move_to_end(resource)
            held = sum(m.vectors.nbytes for m in self._cache.values())
            while held > CACHE_BYTES and len(self._cache) > 1:  # the one just read stays
                _resource, dropped = self._cache.popitem(last=False)
                held -= dropped.vectors.nbytes
        return matrix

    def _state(self, conn: sa.Connection, resource: str) -> _State | None:
        """pgvector: the resource's vector size and common words, kept while its generation token is unchanged
        (read here, every time); None when it has no memories. A new token first gives the memories saved without
        an ``embedding`` (by a process that found no extension, or an older teamrun) theirs, so the ranking in SQL
        sees every memory."""
        import sqlalchemy as sa

        from teamrun.store import schema

        generations = schema.memory_generations
        token = conn.execute(sa.select(generations.c.token).where(generations.c.resource == resource)).scalar()
        if token is None:
            return None
        with self._lock:
            cached = self._states.get(resource)
            if cached is not None:
                self._states.move_to_end(resource)
        if cached is not None and cached.token == token:
            return cached
        missing = conn.execute(
            sa.text("SELECT id, vector FROM memories WHERE resource = :r AND embedding IS NULL"), {"r": resource}
        ).all()
        if missing:
            _set_embeddings(conn, resource, [(row.id, bytes(row.vector)) for row in missing])
            conn.commit()
        table = schema.memories
        sizes = conn.execute(
            sa.select(table.c.dims, sa.func.count()).where(table.c.resource == resource).group_by(table.c.dims)
        ).all()
        if not sizes:
            return None
        common = frozenset[str]()
        if sum(int(n) for _d, n in sizes) >= _COMMON_FROM:
            common = _common_words(
                conn.execute(sa.select(table.c.fact).where(table.c.resource == resource)).scalars().all()
            )
        state = _State(token=token, dims=int(sizes[0][0]), common=common)
        with self._lock:
            self._states[resource] = state
            self._states.move_to_end(resource)
            while len(self._states) > _STATES:
                self._states.popitem(last=False)
        return state

    def _keyword_scores(
        self, conn: sa.Connection, resource: str, query: str, now: float, limit: int, common: frozenset[str]
    ) -> dict[str, float]:
        import sqlalchemy as sa

        words = [w for w in query_words(query) if w not in _STOP_WORDS] or query_words(query)
        words = [w for w in words if w not in common] or words
        if not words:
            return {}
        if conn.dialect.name == "sqlite":
            match = f'scope : "{_scope_token(resource)}" AND fact : (' + " OR ".join(_fts_term(w) for w in words) + ")"
            rows = conn.execute(
                sa.text(
                    "SELECT memory_id AS id, -rank AS score FROM memories_fts "
                    "WHERE memories_fts MATCH :match AND resource = :r ORDER BY rank LIMIT :limit"
                ),
                {"match": match, "r": resource, "limit": limit},
            ).all()
        else:
            tsquery = " | ".join(_pg_term(w) for w in words)
            rows = conn.execute(
                sa.text(
                    "SELECT id, ts_rank(keywords, to_tsquery('simple', :q)) AS score "
                    "FROM memories WHERE resource = :r AND keywords @@ to_tsquery('simple', :q) "
                    "AND (expires_at IS NULL OR expires_at > :now) ORDER BY score DESC, id LIMIT :limit"
                ),
                {"q": tsquery, "r": resource, "now": now, "limit": limit},
            ).all()
        scores = {row.id: float(row.score) for row in rows}
        best = max(scores.values(), default=0.0)
        if best <= 0.0:
            return {ident: 1.0 for ident in scores}
        return {ident: max(0.0, min(1.0, score / best)) for ident, score in scores.items()}

    def _fetch(self, conn: sa.Connection, resource: str, ids: Sequence[str], now: float) -> dict[str, Memory]:
        """The memories ``ids`` of ``resource`` that have not expired at ``now``."""
        import sqlalchemy as sa

        from teamrun.store import schema

        if not ids:
            return {}
        table = schema.memories
        rows = conn.execute(
            sa.select(table).where(table.c.resource == resource, table.c.id.in_(list(ids)), _alive(table, now))
        )
        return {row.id: _memory(row) for row in rows}

    # -- forgetting --------------------------------------------------------------------------------------

    def forget(self, resource: str) -> Forgotten:
        """Remove everything of ``resource`` in one transaction: its memories, their keyword-index rows, its
        working memory, the thread messages indexed for its recall of earlier threads (and their keyword rows; the
        threads keep the messages themselves). On SQLite the deleted bytes are overwritten (``secure_delete``, the
        FTS5 indexes merged, the WAL checkpointed), so the file no longer holds the facts; merging rewrites the
        whole keyword indexes, so a forget takes longer as the store grows. On PostgreSQL the rows are gone for
        every query at once; their bytes leave the data files when (auto)vacuum reclaims the space.

        The journals of the resource's runs are redacted in the same transaction: every entry that carries a fact
        (recalls, embeddings, workspace changes, memory and workspace tool calls' arguments and outcomes) becomes a
        ``{"forgotten": true, "at": ...}`` marker (:mod:`teamrun.store.memory_journal`), so a resume of such a run
        recalls nothing of it; their kept events lose their facts and values (:func:`redact_events_of`). What the
        conversation itself said (a run's input and answer, thread messages) is kept."""
        import sqlalchemy as sa

        from teamrun.store import schema
        from teamrun.store.memory_journal import redact_runs_of
        from teamrun.store.run_events import redact_events_of

        check_resource_id(resource)
        with self.store.errors(f"forget the memories of {resource!r}"):
            with self.store.engine.begin() as conn:
                sqlite = conn.dialect.name == "sqlite"
                if sqlite:
                    conn.exec_driver_sql("PRAGMA secure_delete=ON")
                memories = conn.execute(schema.memories.delete().where(schema.memories.c.resource == resource)).rowcount
                working = conn.execute(
                    schema.memory_working.delete().where(schema.memory_working.c.resource == resource)
                ).rowcount
                messages = conn.execute(
                    schema.memory_messages.delete().where(schema.memory_messages.c.resource == resource)
                ).rowcount
                conn.execute(schema.memory_generations.delete().where(schema.memory_generations.c.resource == resource))
                runs, entries = redact_runs_of(conn, resource, time.time())
                events = redact_events_of(conn, runs)
                if sqlite:
                    for fts in ("memories_fts", "memory_messages_fts"):
                        conn.execute(sa.text(f"DELETE FROM {fts} WHERE resource = :r"), {"r": resource})
                        conn.execute(sa.text(f"INSERT INTO {fts} ({fts}) VALUES ('optimize')"))
            if self.store.dialect == "sqlite":
                self._checkpoint()
        with self._lock:
            self._cache.pop(resource, None)
            self._states.pop(resource, None)
        return Forgotten(
            resource,
            int(memories or 0),
            int(working or 0),
            runs=len(runs),
            journal_entries=entries,
            run_ids=tuple(runs),
            events=events,
            indexed_messages=int(messages or 0),
        )

    def _checkpoint(self) -> None:
        """Copy the WAL into the file and empty it, so deleted facts are in neither (best effort: a reader
        still holding an old snapshot delays it to the next checkpoint)."""
        with self.store.engine.connect() as conn:
            conn.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)")

    def _drop_expired(self, conn: sa.Connection, resource: str, now: float) -> None:
        import sqlalchemy as sa

        from teamrun.store import schema

        table = schema.memories
        expired = [
            row.id
            for row in conn.execute(
                sa.select(table.c.id).where(
                    table.c.resource == resource, table.c.expires_at.is_not(None), table.c.expires_at <= now
                )
            )
        ]
        if not expired:
            return
        if conn.dialect.name == "sqlite":
            conn.exec_driver_sql("PRAGMA secure_delete=ON")
        conn.execute(table.delete().where(table.c.resource == resource, table.c.id.in_(expired)))
        if conn.dialect.name == "sqlite":
            for ident in expired:
                conn.execute(
                    sa.text("DELETE FROM memories_fts WHERE resource = :r AND memory_id = :id"),
                    {"r": resource, "id": ident},
                )
        self._bump(conn, resource)

    def _lock_resource(self, conn: sa.Connection, resource: str) -> None:
        """Hold ``resource``'s write lock until the transaction ends: a write to its generation row, as the
        transaction's first statement (SQLite: the store's write lock, taken before anything is read, so the
        transaction reads the newest data; PostgreSQL: the row's lock). Concurrent saves of one resource, in
        this process or another, count and insert one after the other, so ``max_memories_per_resource`` holds.
        A resource without a row yet gets one; two first saves at once: one fails the key and is retried."""
        from teamrun.store import schema

        generations = schema.memory_generations
        locked = conn.execute(
            generations.update().where(generations.c.resource == resource).values(token=generations.c.token)
        ).rowcount
        if not locked:
            conn.execute(generations.insert().values(resource=resource, token=uuid.uuid4().hex))

    def check_room(self, resource: str, fact: str, limits: MemoryLimits) -> None:
        """Refuse (:class:`MemoryRefused`, as :meth:`save` would) a new ``fact`` for a ``resource`` already at
        ``max_memories_per_resource``; a fact already saved passes. A cheap check before paying for an
        embedding; the save's transaction is the real one."""
        import sqlalchemy as sa

        from teamrun.store import schema

        check_resource_id(resource)
        fact = self.store.secrets.text(fact).strip()
        table = schema.memories
        now = time.time()
        ident = memory_id(resource, fact)
        with self.store.errors(f"count the memories of {resource!r}"), self.store.engine.connect() as conn:
            if conn.execute(sa.select(table.c.id).where(table.c.resource == resource, table.c.id == ident)).first():
                return
            count = conn.execute(
                sa.select(sa.func.count()).where(table.c.resource == resource, _alive(table, now))
            ).scalar_one()
        if int(count) >= limits.max_memories_per_resource:
            raise _full(resource, int(count), limits)

    def _bump(self, conn: sa.Connection, resource: str) -> None:
        """A new generation token for ``resource``: every process's cached matrix of it is stale from now."""
        bump_generation(conn, resource)

    # -- working memory ----------------------------------------------------------------------------------

    def load_working(self, resource: str, team: str) -> dict[str, tuple[int, Any]]:
        """The resource's working-memory records of ``team``: entry -> (version, value)."""
        import sqlalchemy as sa

        from teamrun.store import schema

        check_resource_id(resource)
        table = schema.memory_working
        with self.store.errors(f"read the working memory of {resource!r}"), self.store.engine.connect() as conn:
            rows = conn.execute(
                sa.select(table.c.entry, table.c.version, table.c.value).where(
                    table.c.resource == resource, table.c.team == team
                )
            )
            return {row.entry: (int(row.version), row.value) for row in rows}

    def save_working(self, resource: str, team: str, entry: str, version: int, value: Any) -> None:
        """Keep ``value`` (JSON, secrets masked like the rest of the store) as the working-memory record ``entry``
        of ``team`` for ``resource``."""
        import sqlalchemy as sa

        from teamrun.store import schema

        check_resource_id(resource)
        value = self.store.secrets.value(value)
        try:
            json.dumps(value)
        except (TypeError, ValueError) as exc:
            raise MemoryRefused(f"working memory {entry!r} is not JSON data: {exc}") from None
        table = schema.memory_working
        key = (table.c.resource == resource, table.c.team == team, table.c.entry == entry)
        now = time.time()
        with self.store.errors(f"save the working memory of {resource!r}"):
            for _attempt in range(2):
                try:
                    with self.store.engine.begin() as conn:
                        updated = conn.execute(
                            table.update().where(*key).values(version=version, value=value, updated_at=now)
                        ).rowcount
                        if not updated:
                            conn.execute(
                                table.insert().values(
                                    resource=resource,
                                    team=team,
                                    entry=entry,
                                    version=version,
                                    value=value,
                                    updated_at=now,
                                )
                            )
                    return
                except sa.exc.IntegrityError:  # another process inserted it first: update it
                    continue

    def change_working(self, resource: str, team: str, entry: str, change: Callable[[bool, Any], Any]) -> None:
        """Apply one run's change to the working-memory record ``entry`` of ``team`` for ``resource`` atomically:
        under the resource's lock, ``change(found, value)`` gets the record as it is now (``found`` False: none
        yet) and returns the new value (JSON, secrets masked like the rest of the store). Two runs of one resource
        that end at once apply their changes one after the other (an ``append`` keeps both runs' items), never
        the later one's snapshot over the earlier one's."""
        import sqlalchemy as sa

        from teamrun.store import schema

        check_resource_id(resource)
        table = schema.memory_working
        key = (table.c.resource == resource, table.c.team == team, table.c.entry == entry)
        with self.store.errors(f"save the working memory of {resource!r}"):
            for attempt in range(3):
                try:
                    with self.store.engine.begin() as conn:
                        self._lock_resource(conn, resource)
                        row = conn.execute(sa.select(table.c.version, table.c.value).where(*key)).first()
                        value = self.store.secrets.value(change(row is not None, None if row is None else row.value))
                        try:
                            json.dumps(value)
                        except (TypeError, ValueError) as exc:
                            raise MemoryRefused(f"working memory {entry!r} is not JSON data: {exc}") from None
                        now = time.time()
                        if row is not None:
                            conn.execute(
                                table.update()
                                .where(*key)
                                .values(version=int(row.version) + 1, value=value, updated_at=now)
                            )
                        else:
                            conn.execute(
                                table.insert().values(
                                    resource=resource, team=team, entry=entry, version=1, value=value, updated_at=now
                                )
                            )
                    return
                except sa.exc.IntegrityError:  # two first writes of the resource at once: the other one won
                    if attempt == 2:
                        raise


Scored = tuple[str, float, float | None, float | None]
"""``(id, score, vector score, keyword score)`` of one search candidate."""


def ranked(
    vector_scores: dict[str, float], keyword_scores: dict[str, float], mode: str, take: int, min_score: float
) -> list[Scored]:
    """The ``take`` best candidates of a search in ``mode`` (see the module: the hybrid score), best first, each
    scoring at least ``min_score`` (and more than 0)."""
    scored: list[Scored]
    if mode == "vector":
        by_score = sorted(vector_scores.items(), key=lambda kv: (-kv[1], kv[0]))
        scored = [(i, s, s, None) for i, s in by_score[:take]]
    elif mode == "keyword":
        by_score = sorted(keyword_scores.items(), key=lambda kv: (-kv[1], kv[0]))
        scored = [(i, s, None, s) for i, s in by_score[:take]]
    else:
        combined = []
        for ident in set(vector_scores) | set(keyword_scores):
            v = vector_scores.get(ident, 0.0)
            kw = keyword_scores.get(ident, 0.0)
            combined.append((ident, VECTOR_WEIGHT * v + (1 - VECTOR_WEIGHT) * kw, v, kw))
        combined.sort(key=lambda item: (-item[1], item[0]))
        scored = [(i, s, v, kw) for i, s, v, kw in combined[:take]]
    return [item for item in scored if item[1] >= min_score and item[1] > 0.0]


def bump_generation(conn: sa.Connection, resource: str) -> None:
    """A new generation token for ``resource``: every process's cached vectors of it (facts and indexed messages)
    are stale from now. As a transaction's first statement it also takes the resource's write lock (SQLite: the
    store's; PostgreSQL: the row's)."""
    from teamrun.store import schema

    generations = schema.memory_generations
    token = uuid.uuid4().hex
    updated = conn.execute(generations.update().where(generations.c.resource == resource).values(token=token)).rowcount
    if not updated:
        conn.execute(generations.insert().values(resource=resource, token=token))


def _stem(word: str) -> tuple[str, bool]:
    """A query word without its plural or -ed/-ing ending, and whether to match it as a prefix (a word of 4
    letters or more): 'invoice' finds 'invoices', 'shipped' finds 'shipping'."""
    for ending in ("ing", "ed", "es", "s"):
        if len(word) >= len(ending) + 4 and word.endswith(ending):
            word = word[: -len(ending)]
            break
    return word, len(word) >= 4


def _fts_term(word: str) -> str:
    """An FTS5 term for a query word: quoted (any text is safe), a prefix when long enough."""
    stem, prefix = _stem(word)
    return '"' + stem.replace('"', '""') + '"' + ("*" if prefix else "")


def _pg_term(word: str) -> str:
    """A ``to_tsquery`` term for a query word: quoted (any text is safe), a prefix when long enough."""
    stem, prefix = _stem(word)
    return "'" + stem.replace("'", "''").replace("\\", "\\\\") + "'" + (":*" if prefix else "")


def _common_words(facts: Sequence[str]) -> frozenset[str]:
    """The words in more than :data:`_COMMON_SHARE` of ``facts`` (none when there are few facts)."""
    if len(facts) < _COMMON_FROM:
        return frozenset()
    counts = Counter(word for fact in facts for word in set(_WORD.findall(fact.casefold())))
    limit = _COMMON_SHARE * len(facts)
    return frozenset(word for word, count in counts.items() if count > limit)


def _numpy() -> Any:
    """numpy, imported on first use with one BLAS thread unless the process chose otherwise: a search is one
    small matrix-vector product, where BLAS threads only spin (on a busy machine they made a search ~5x slower)."""
    import sys

    if "numpy" not in sys.modules:
        for name in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
            os.environ.setdefault(name, "1")
    import numpy

    return numpy


def _other_size(what: str, size: int, resource: str, kept: int) -> str:
    """Why a vector of another size than the resource's memories is refused: the store cannot tell which model made
    them, so both causes are named (another model or ``dimensions``, or an endpoint answering a wrong size)."""
    return (
        f"{what} has {size} dimensions but the memories of {resource!r} have {kept}: either they were saved with "
        "another embedding model or `dimensions` (keep one per store), or the embedding endpoint answered vectors "
        f"of the wrong size (set memory.embedding.dimensions: {kept} to have such an answer refused when it "
        f"comes); `teamrun memory forget --resource {resource}` starts the resource afresh"
    )


def _full(resource: str, count: int, limits: MemoryLimits) -> MemoryRefused:
    return MemoryRefused(
        f"{resource!r} already has {count} memories, the most a resource may keep "
        f"({limits.max_memories_per_resource}); forget some or raise the cap"
    )


def _alive(table: sa.Table, now: float) -> Any:
    import sqlalchemy as sa

    return sa.or_(table.c.expires_at.is_(None), table.c.expires_at > now)


def _memory(row: Any) -> Memory:
    return Memory(
        id=row.id,
        resource=row.resource,
        fact=row.fact,
        provenance=Provenance(row.run_id, row.thread_id, row.agent, float(row.saved_at)),
        expires_at=None if row.expires_at is None else float(row.expires_at),
    )


def _vector_bytes(vector: Sequence[float]) -> tuple[bytes, int]:
    """The vector L2-normalised, as little-endian float32 bytes, and its size; refused when not a usable vector."""
    np = _numpy()

    try:
        array = np.asarray(list(vector), dtype=np.float32)
    except (TypeError, ValueError):
        raise MemoryRefused("a memory's embedding is a list of numbers") from None
    if array.ndim != 1 or array.shape[0] == 0:
        raise MemoryRefused("a memory's embedding is a non-empty list of numbers")
    norm = float(np.linalg.norm(array))
    if not np.isfinite(norm) or norm == 0.0:
        raise MemoryRefused("a memory's embedding has no direction (all zeros, or not finite numbers)")
    return (array / norm).astype("<f4").tobytes(), int(array.shape[0])


def _vector_text(blob: bytes) -> str:
    """A vector kept as float32 bytes, as pgvector's text form (each float32 exactly)."""
    np = _numpy()
    return "[" + ",".join(repr(x) for x in np.frombuffer(blob, dtype="<f4").tolist()) + "]"


_INSERTS: dict[bool, Any] = {}


def _memories_insert(pgvector: bool) -> Any:
    """The insert of a memory row: with pgvector, into the ``memories`` table with its ``embedding`` column too
    (given as pgvector's text form), so a save writes the row once."""
    found = _INSERTS.get(pgvector)
    if found is None:
        import sqlalchemy as sa

        from teamrun.store import schema

        table: Any = schema.memories
        if pgvector:

            class Vector(sa.types.UserDefinedType[str]):
                cache_ok = True

                def get_col_spec(self, **_kw: Any) -> str:
                    return "vector"

                def bind_expression(self, bindvalue: Any) -> Any:
                    return sa.cast(sa.type_coerce(bindvalue, sa.Text()), self)

            columns = [sa.column(c.name, c.type) for c in table.c]
            table = sa.table(table.name, *columns, sa.column("embedding", Vector()))
        found = _INSERTS[pgvector] = table.insert()
    return found


def _set_embeddings(conn: sa.Connection, resource: str, rows: Sequence[tuple[str, bytes]]) -> None:
    """pgvector: give the memories ``(id, float32 bytes)`` of ``resource`` their ``embedding``."""
    import sqlalchemy as sa

    conn.execute(
        sa.text("UPDATE memories SET embedding = CAST(:e AS vector) WHERE resource = :r AND id = :id"),
        [{"e": _vector_text(blob), "r": resource, "id": ident} for ident, blob in rows],
    )


_VECTORS_GONE = {"42703", "42704", "42883"}
"""PostgreSQL's undefined column, undefined object (a type) and undefined function: what a query of the
``embedding`` column meets once ``DROP EXTENSION vector CASCADE`` ran."""


def _vectors_gone(exc: BaseException) -> bool:
    """Whether a database error says the pgvector column, type or operator is no longer there."""
    orig = getattr(exc, "orig", None)
    return getattr(orig, "sqlstate", None) in _VECTORS_GONE


def _sql_vector_scores(
    conn: sa.Connection, state: _State, resource: str, vector: Sequence[float], now: float, take: int
) -> dict[str, float]:
    """pgvector: the cosines (clamped to [0, 1]) of the ``take`` best memories of ``resource`` that have not
    expired, ranked in SQL with the resource in the WHERE clause (the same as :meth:`MemoryStore._vector_scores`)."""
    import sqlalchemy as sa

    np = _numpy()
    query = np.asarray(list(vector), dtype=np.float32)
    if query.ndim != 1 or query.shape[0] != state.dims:
        size = int(query.shape[0]) if query.ndim == 1 else 0
        raise MemoryRefused(_other_size("the query's embedding", size, resource, state.dims))
    norm = float(np.linalg.norm(query))
    if not np.isfinite(norm) or norm == 0.0:
        return {}
    rows = conn.execute(
        sa.text(
            "SELECT id, embedding <=> CAST(:q AS vector) AS distance FROM memories "
            "WHERE resource = :r AND dims = :dims AND embedding IS NOT NULL "
            "AND (expires_at IS NULL OR expires_at > :now) ORDER BY distance, id LIMIT :take"
        ),
        {
            "q": _vector_text((query / norm).astype("<f4").tobytes()),
            "r": resource,
            "dims": state.dims,
            "now": now,
            "take": take,
        },
    ).all()
    return {row.id: max(0.0, min(1.0, 1.0 - float(row.distance))) for row in rows}


def _rounded(value: float | None) -> float | None:
    return None if value is None else round(value, 6)


__all__ = [
    "Forgotten",
    "Memory",
    "MemoryLimits",
    "MemoryRefused",
    "MemoryStore",
    "Provenance",
    "Recalled",
    "Saved",
    "Scored",
    "bump_generation",
    "check_resource_id",
    "check_search",
    "memory_id",
    "normalise_fact",
    "ranked",
]
