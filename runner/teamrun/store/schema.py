"""The store's tables (SQLAlchemy Core), the latest version; :mod:`migrations` builds and upgrades them.

- ``threads``: one conversation; ``current_agent`` is who answers its next turn (swarm routing).
- ``thread_messages``: a thread's turns, in ``seq`` order. ``scope`` is ``""`` for the
  conversation with the user, or a worker's name for that worker's own memory (``memory: thread``).
- ``runs``: one record per run (status, input, answer, usage and cost).
- ``journal``: what a run completed (model replies, tool results), written as it happens.
- ``pending_items``: what a run waits for from a person (questions, approvals) and the answers.
- ``run_events``: a served run's events (masked), one zlib-compressed JSON array per ``part``: what one
  server process served of it (a run continued after a restart has a part per process), for the page's view.
- ``memories``: long-term memory, facts about a ``resource`` (a user, an organisation) with their provenance, an
  optional expiry and the embedding (float32 bytes). Keywords: the ``memories_fts`` FTS5 table on SQLite (created
  with ``memories``), a generated ``keywords`` tsvector column (``to_tsvector('simple', fact)``, GIN-indexed) on
  PostgreSQL (ranking reads it instead of parsing each fact again).
- ``memory_generations``: a token per resource that changes on every save and forget (a cache of the resource's
  vectors is valid while its token is).
- ``memory_messages``: thread messages indexed for a resource's recall of earlier threads (``memory.recall.<agent>.
  messages``): one row per user message or answer of a thread turn of a run given that ``resource``, its text
  (secrets masked) and its embedding (float32 bytes). Keywords: the ``memory_messages_fts`` FTS5 table on SQLite, a
  generated ``keywords`` tsvector column on PostgreSQL, as for ``memories``.
- ``memory_working``: working memory, one JSON record per (resource, team, workspace entry) (``persist: resource``).
- ``run_leases``: which replica (``teamrun serve`` process) executes a running run: its ``owner``, the lease's
  ``generation`` (raised on every take; a write for the run under an older one is refused: fencing) and
  ``expires_at`` (epoch seconds, renewed by the owner's heartbeat); ``cancel_reason``: a cancel asked on another
  replica, for the owner to apply; ``released``: why the owner let it go (``handover``, ``waiting``...);
  ``watched_until``: another replica streams the run's events from the store until then (epoch seconds), so its
  owner keeps them there on every heartbeat. Only
  live runs have a row: a run's outcome write deletes it (a waiting run's stays, released, so the generation
  keeps rising when it continues), the takeover pass sweeps the rows of runs that ended otherwise. Its indexes
  are partial, over live leases only (``ix_run_leases_held``: the renewal; ``ix_run_leases_live``: the takeover).
"""

from __future__ import annotations

import sqlalchemy as sa

metadata = sa.MetaData()

schema_version = sa.Table(
    "schema_version",
    metadata,
    sa.Column("version", sa.Integer, primary_key=True),
    sa.Column("applied_at", sa.DateTime(timezone=True), nullable=False),
)

threads = sa.Table(
    "threads",
    metadata,
    sa.Column("id", sa.String(200), primary_key=True),
    sa.Column("team", sa.String(200), nullable=False),
    sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
    sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
    sa.Column("current_agent", sa.String(200), nullable=True),
    sa.Column("meta", sa.JSON, nullable=False, default=dict),
)

thread_messages = sa.Table(
    "thread_messages",
    metadata,
    sa.Column("thread_id", sa.String(200), sa.ForeignKey("threads.id", ondelete="CASCADE"), primary_key=True),
    sa.Column("seq", sa.Integer, primary_key=True),
    sa.Column("scope", sa.String(200), nullable=False, default=""),
    sa.Column("turn", sa.Integer, nullable=False),
    sa.Column("agent", sa.String(200), nullable=True),
    sa.Column("role", sa.String(20), nullable=False),
    sa.Column("content", sa.JSON, nullable=False),
    sa.Column("run_id", sa.String(64), nullable=True),
    sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
    sa.Index("ix_thread_messages_scope", "thread_id", "scope", "seq"),
)

runs = sa.Table(
    "runs",
    metadata,
    sa.Column("id", sa.String(64), primary_key=True),
    sa.Column("team", sa.String(200), nullable=False),
    sa.Column("thread_id", sa.String(200), nullable=True, index=True),
    sa.Column("status", sa.String(32), nullable=False),
    sa.Column("input", sa.Text, nullable=False),
    sa.Column("final_output", sa.Text, nullable=True),
    sa.Column("usage", sa.JSON, nullable=False, default=dict),
    sa.Column("cost", sa.Float, nullable=False, default=0.0),
    sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
    sa.Column("ended_at", sa.DateTime(timezone=True), nullable=True),
    sa.Column("error", sa.Text, nullable=True),
    sa.Column("meta", sa.JSON, nullable=False, default=dict),
)

journal = sa.Table(
    "journal",
    metadata,
    sa.Column("run_id", sa.String(64), sa.ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True),
    sa.Column("seq", sa.Integer, primary_key=True),
    sa.Column("agent_path", sa.String(1000), nullable=False),
    sa.Column("kind", sa.String(16), nullable=False),
    sa.Column("call_key", sa.String(500), nullable=False),
    sa.Column("request_hash", sa.String(128), nullable=True),
    sa.Column("payload", sa.JSON, nullable=False),
    sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
    sa.Index("ix_journal_call_key", "run_id", "call_key"),
)

pending_items = sa.Table(
    "pending_items",
    metadata,
    sa.Column("run_id", sa.String(64), sa.ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True),
    sa.Column("item_id", sa.String(32), primary_key=True),
    sa.Column("kind", sa.String(16), nullable=False),
    sa.Column("call_key", sa.String(1500), nullable=False),
    sa.Column("agent", sa.String(200), nullable=False),
    sa.Column("question", sa.Text, nullable=False),
    sa.Column("spec", sa.JSON, nullable=False),
    sa.Column("status", sa.String(16), nullable=False),
    sa.Column("answer", sa.JSON, nullable=True),
    sa.Column("answered_by", sa.String(200), nullable=True),
    sa.Column("asked_at", sa.DateTime(timezone=True), nullable=False),
    sa.Column("answered_at", sa.DateTime(timezone=True), nullable=True),
    sa.Column("used", sa.Boolean, nullable=False, default=False),
    sa.UniqueConstraint("run_id", "call_key", name="uq_pending_items_call"),
)

run_events = sa.Table(
    "run_events",
    metadata,
    sa.Column("run_id", sa.String(64), sa.ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True),
    sa.Column("part", sa.Integer, primary_key=True),
    sa.Column("count", sa.Integer, nullable=False),
    sa.Column("raw_bytes", sa.Integer, nullable=False),
    sa.Column("body", sa.LargeBinary, nullable=False),
    sa.Column("saved_at", sa.DateTime(timezone=True), nullable=False),
)

memories = sa.Table(
    "memories",
    metadata,
    sa.Column("resource", sa.String(200), primary_key=True),
    sa.Column("id", sa.String(64), primary_key=True),
    sa.Column("fact", sa.Text, nullable=False),
    sa.Column("dims", sa.Integer, nullable=False),
    sa.Column("vector", sa.LargeBinary, nullable=False),
    sa.Column("run_id", sa.String(64), nullable=True),
    sa.Column("thread_id", sa.String(200), nullable=True),
    sa.Column("agent", sa.String(200), nullable=True),
    sa.Column("saved_at", sa.Float, nullable=False),
    sa.Column("expires_at", sa.Float, nullable=True),
    sa.Index("ix_memories_resource", "resource", "saved_at"),
)

memory_generations = sa.Table(
    "memory_generations",
    metadata,
    sa.Column("resource", sa.String(200), primary_key=True),
    sa.Column("token", sa.String(32), nullable=False),
)

memory_messages = sa.Table(
    "memory_messages",
    metadata,
    sa.Column("resource", sa.String(200), primary_key=True),
    sa.Column("id", sa.String(64), primary_key=True),
    sa.Column("thread_id", sa.String(200), nullable=False),
    sa.Column("run_id", sa.String(64), nullable=True),
    sa.Column("role", sa.String(20), nullable=False),
    sa.Column("text", sa.Text, nullable=False),
    sa.Column("dims", sa.Integer, nullable=False),
    sa.Column("vector", sa.LargeBinary, nullable=False),
    sa.Column("saved_at", sa.Float, nullable=False),
    sa.Index("ix_memory_messages_thread", "thread_id"),
)

memory_working = sa.Table(
    "memory_working",
    metadata,
    sa.Column("resource", sa.String(200), primary_key=True),
    sa.Column("team", sa.String(200), primary_key=True),
    sa.Column("entry", sa.String(200), primary_key=True),
    sa.Column("version", sa.Integer, nullable=False),
    sa.Column("value", sa.JSON, nullable=True),
    sa.Column("updated_at", sa.Float, nullable=False),
)

run_leases = sa.Table(
    "run_leases",
    metadata,
    sa.Column("run_id", sa.String(64), primary_key=True),
    sa.Column("owner", sa.String(200), nullable=False),
    sa.Column("generation", sa.Integer, nullable=False),
    sa.Column("expires_at", sa.Float, nullable=False),
    sa.Column("cancel_reason", sa.Text, nullable=True),
    sa.Column("released", sa.String(64), nullable=True),
    sa.Column("watched_until", sa.Float, nullable=True),
)
LIVE_LEASE = sa.or_(run_leases.c.released.is_(None), run_leases.c.released == sa.literal_column("'handover'"))
"""A lease a replica holds, or one handed over for another to take at once: what the heartbeat reads (the
``'handover'`` literal, not a parameter: SQLite and PostgreSQL then see the partial index's own condition)."""
sa.Index(  # the renewal: the leases an owner holds
    "ix_run_leases_held",
    run_leases.c.owner,
    sqlite_where=run_leases.c.released.is_(None),
    postgresql_where=run_leases.c.released.is_(None),
)
sa.Index(  # the takeover: live leases by expiry (a handed-over one expires at 0)
    "ix_run_leases_live", run_leases.c.expires_at, sqlite_where=LIVE_LEASE, postgresql_where=LIVE_LEASE
)


def _ddl(statement: str, dialect: str) -> sa.ExecutableDDLElement:
    return sa.DDL(statement).execute_if(dialect=dialect)  # type: ignore[no-untyped-call]


_MEMORY_KEYWORDS_SQLITE = (
    "CREATE VIRTUAL TABLE IF NOT EXISTS memories_fts USING fts5("
    "scope, fact, memory_id UNINDEXED, resource UNINDEXED, tokenize = 'unicode61 remove_diacritics 2')"
)
_MEMORY_KEYWORDS_POSTGRES = (
    "ALTER TABLE memories ADD COLUMN IF NOT EXISTS keywords tsvector "
    "GENERATED ALWAYS AS (to_tsvector('simple', fact)) STORED",
    "CREATE INDEX IF NOT EXISTS ix_memories_keywords ON memories USING gin (keywords)",
)
sa.event.listen(memories, "after_create", _ddl(_MEMORY_KEYWORDS_SQLITE, "sqlite"))
for _statement in _MEMORY_KEYWORDS_POSTGRES:
    sa.event.listen(memories, "after_create", _ddl(_statement, "postgresql"))
sa.event.listen(memories, "before_drop", _ddl("DROP TABLE IF EXISTS memories_fts", "sqlite"))

_MESSAGE_KEYWORDS_SQLITE = (
    "CREATE VIRTUAL TABLE IF NOT EXISTS memory_messages_fts USING fts5(scope, text, message_id UNINDEXED, "
    "resource UNINDEXED, thread_id UNINDEXED, tokenize = 'unicode61 remove_diacritics 2')"
)
_MESSAGE_KEYWORDS_POSTGRES = (
    "ALTER TABLE memory_messages ADD COLUMN IF NOT EXISTS keywords tsvector "
    "GENERATED ALWAYS AS (to_tsvector('simple', text)) STORED",
    "CREATE INDEX IF NOT EXISTS ix_memory_messages_keywords ON memory_messages USING gin (keywords)",
)
sa.event.listen(memory_messages, "after_create", _ddl(_MESSAGE_KEYWORDS_SQLITE, "sqlite"))
for _statement in _MESSAGE_KEYWORDS_POSTGRES:
    sa.event.listen(memory_messages, "after_create", _ddl(_statement, "postgresql"))
sa.event.listen(memory_messages, "before_drop", _ddl("DROP TABLE IF EXISTS memory_messages_fts", "sqlite"))

__all__ = [
    "LIVE_LEASE",
    "journal",
    "memories",
    "memory_generations",
    "memory_messages",
    "memory_working",
    "metadata",
    "pending_items",
    "run_events",
    "run_leases",
    "runs",
    "schema_version",
    "thread_messages",
    "threads",
]
