"""What a run's long-term memory (:class:`~teamrun.engine.memory.session.MemorySession`) does inside the run.

Every embedding call goes through :func:`embed`, the one path that

1. masks the run's secrets in the texts first (the file's secret ``${VAR}`` values, secret-looking environment
   values, and what the run learns is secret later — a ``secret: true`` answer — as a subscriber of the run's
   events: :meth:`MemorySession.keep_secrets`), so no secret reaches the endpoint, the journal or the store;
2. answers from the journal when an earlier attempt of the run paid for the same texts (a resume re-pays
   nothing), else refuses when the run's cost or token limits are used up, else calls the model and writes the
   vectors to the journal before they are used;
3. charges the tokens and cost to the agent's ledger (up its chain: the run's ``max_cost_usd`` covers them, no
   step counted) and to the run's usage per model.

A recall (:func:`recall`) is journaled too (``memory_recall``): a resume puts the facts the killed
attempt recalled in the same prompt, whatever was saved since, so its model calls replay. With ``messages:`` it also
searches the messages of the resource's other threads, with the same query embedding.

A thread turn of a run whose team recalls messages is indexed as it ends: :func:`embed_turn` embeds its user
message and its answer through :func:`embed` (masked, journaled under
:data:`~teamrun.engine.durability.memory_entries.THREAD_INVOCATION`, charged to the answering agent) before the
run's spending is settled, and :func:`index_turn` adds them to the store's index once the thread kept the turn.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from teamrun.config.models import MemoryRecall, MemoryRecallMessages
from teamrun.engine.durability.memory_entries import (
    THREAD_INVOCATION,
    EmbeddingRecord,
    RecalledFact,
    RecalledMessage,
    RecallRecord,
    embedding_entry,
    embedding_fingerprint,
    recall_entry,
)
from teamrun.engine.memory.blocks import CHARS_PER_TOKEN, messages_within_budget, within_budget
from teamrun.engine.memory.session import MemorySession, MemoryUnavailable
from teamrun.engine.result import ModelSpend
from teamrun.errors import StoreError
from teamrun.llm.embedding import EmbeddingFailed
from teamrun.llm.types import Usage
from teamrun.store.memory import MemoryRefused, Provenance, Recalled, Saved
from teamrun.store.memory_messages import IndexedMessage

if TYPE_CHECKING:
    from teamrun.engine.runtime import AgentFrame, RunContext

__all__ = [
    "MESSAGE_EMBED_CHARS",
    "TurnIndex",
    "embed",
    "embed_turn",
    "index_turn",
    "indexes_messages",
    "recall",
    "save",
    "search",
    "search_messages",
]

MESSAGE_EMBED_CHARS = 8000
"""How much of a thread message is embedded when it is indexed (its beginning; the index keeps the whole text):
about 2,000 tokens, within every embedding model's input."""


# -- embedding: the one path ----------------------------------------------------------------------------------------


async def embed(
    memory: MemorySession,
    ctx: RunContext,
    frame: AgentFrame,
    text: str,
    *,
    at: tuple[int, int],
    invocation: str | None = None,
) -> list[float]:
    """The vector of ``text`` (already masked), journaled under ``frame``'s invocation (or ``invocation``) at ``at``
    (model call number, position); raises :class:`MemoryUnavailable` or
    :class:`~teamrun.llm.embedding.EmbeddingFailed`."""
    model = memory.embedder.model
    fingerprint = embedding_fingerprint(model, [text], memory.settings.embedding.dimensions)
    known = memory.known_vectors.get(fingerprint)
    if known is not None:
        return known
    record = ctx.journal.replay.embedding(fingerprint) if ctx.journal is not None else None
    if record is None:
        reached = frame.ledger.check_spent()
        if reached is not None:
            raise MemoryUnavailable(f"{reached} reached; nothing was embedded")
        paid = await memory.embedder.embed([text])
        record = EmbeddingRecord(paid.vectors, paid.model, paid.input_tokens, paid.cost_usd)
        if ctx.journal is not None:  # durable before it is used: a kill after this re-pays nothing
            await ctx.journal.write_now(embedding_entry(invocation or frame.key, *at, fingerprint, record))
    _charge(ctx, frame, record)  # one from the journal counts too, as a replayed model call does
    if len(record.vectors) != 1:
        raise MemoryUnavailable(f"embedding model {model!r} returned {len(record.vectors)} vectors for one text")
    memory.known_vectors[fingerprint] = record.vectors[0]
    return record.vectors[0]


# -- recall before a turn -------------------------------------------------------------------------------------------


async def recall(
    memory: MemorySession, ctx: RunContext, frame: AgentFrame, query: str, turn: int, how: MemoryRecall
) -> RecallRecord:
    """What ``frame``'s agent recalls before its model call ``turn`` (journaled; a resume's from the journal): the
    facts that fit its token budget, and how many matched but were left out for it (said in a warning)."""
    query = memory.mask(query)
    thread = ctx.thread.thread_id if ctx.thread is not None else None
    fingerprint = _recall_fingerprint(memory.resource, query, how, memory.settings.mode, thread)
    replayed = ctx.journal.replay.recall(frame.key, turn, fingerprint) if ctx.journal is not None else None
    if replayed is not None:
        _count_journaled_query(memory, ctx, frame, query)
        _emit_recall(memory, ctx, frame, how, query, replayed, replayed=True)
        return replayed
    found = await search(memory, ctx, frame, query, k=how.top_k, min_score=how.min_score, at=(turn, 0))
    facts = within_budget([_fact(r) for r in found], how.max_tokens)
    said: list[RecalledMessage] = []
    if how.messages is not None:
        said = await _earlier_messages(memory, ctx, frame, query, how.messages, turn)
    messages = messages_within_budget(said, how.messages.max_tokens) if how.messages is not None else ()
    record = RecallRecord(query, facts, len(found) - len(facts), messages, len(said) - len(messages))
    if ctx.journal is not None:
        await ctx.journal.write_now(recall_entry(frame.key, turn, fingerprint, record))
    _emit_recall(memory, ctx, frame, how, query, record)
    if record.left_out:
        ctx.warn(frame, _left_out(record.left_out, "fact", frame.name, turn, how.max_tokens, "max_tokens"))
    if record.messages_left_out and how.messages is not None:
        limit = how.messages.max_tokens
        ctx.warn(frame, _left_out(record.messages_left_out, "message", frame.name, turn, limit, "messages.max_tokens"))
    return record


def _count_journaled_query(memory: MemorySession, ctx: RunContext, frame: AgentFrame, query: str) -> None:
    """A recall answered from the journal: the embedding of its query, paid by an earlier attempt, counts in this
    run's usage, cost and limits (as :func:`embed` counts one it finds in the journal); its vector is kept, so
    the turn's indexing does not embed the same text again."""
    if memory.settings.mode == "keyword" or ctx.journal is None:
        return
    fingerprint = embedding_fingerprint(memory.embedder.model, [_cut(query)], memory.settings.embedding.dimensions)
    record = ctx.journal.replay.embedding(fingerprint)
    if fingerprint in memory.known_vectors or record is None or len(record.vectors) != 1:
        return
    _charge(ctx, frame, record)
    memory.known_vectors[fingerprint] = record.vectors[0]


def _cut(text: str) -> str:
    """What is embedded of ``text``: its first :data:`MESSAGE_EMBED_CHARS` characters, for a query as for an
    indexed message (a user's message that was the query is then embedded once)."""
    return text[:MESSAGE_EMBED_CHARS]


def _left_out(count: int, what: str, agent: str, turn: int, max_tokens: int, setting: str) -> str:
    """The warning that ``count`` matching facts or messages did not fit the recall's token budget."""
    many = count != 1
    return (
        f"memory: {count} matching {what}{'s' if many else ''} {agent} recalled before turn {turn} "
        f"{'were' if many else 'was'} left out: longer than its recall budget ({setting} {max_tokens}, about "
        f"{max_tokens * CHARS_PER_TOKEN} characters); raise memory.recall.{agent}.{setting} to include "
        f"{'them' if many else 'it'}"
    )


async def _earlier_messages(
    memory: MemorySession, ctx: RunContext, frame: AgentFrame, query: str, how: MemoryRecallMessages, turn: int
) -> list[RecalledMessage]:
    """The messages of the resource's other threads closest to ``query`` (a store that refuses: none, said)."""
    try:
        return await search_messages(memory, ctx, frame, query, how, at=(turn, 0))
    except MemoryRefused as exc:
        ctx.warn(frame, f"memory: {frame.name} recalled no messages of earlier threads before turn {turn}: {exc}")
        return []


async def search_messages(
    memory: MemorySession,
    ctx: RunContext,
    frame: AgentFrame,
    query: str,
    how: MemoryRecallMessages,
    *,
    at: tuple[int, int],
) -> list[RecalledMessage]:
    """The messages of the resource's threads other than the run's own closest to ``query`` (masked here), best
    first; the query's embedding is the facts' search's (paid once)."""
    query = memory.mask(query)
    vector = None if memory.settings.mode == "keyword" else await embed(memory, ctx, frame, _cut(query), at=at)
    thread = ctx.thread.thread_id if ctx.thread is not None else None
    found = await asyncio.to_thread(
        memory.messages.search,
        memory.resource,
        query,
        vector,
        k=how.top_k,
        min_score=how.min_score,
        mode=memory.settings.mode,
        exclude_thread=thread,
    )
    return [RecalledMessage(f.message.id, f.message.thread_id, f.message.role, f.message.text, f.score) for f in found]


async def search(
    memory: MemorySession,
    ctx: RunContext,
    frame: AgentFrame,
    query: str,
    *,
    k: int,
    min_score: float,
    at: tuple[int, int],
) -> list[Recalled]:
    """The resource's memories closest to ``query`` (masked here), best first."""
    query = memory.mask(query)
    vector = None if memory.settings.mode == "keyword" else await embed(memory, ctx, frame, _cut(query), at=at)
    return await asyncio.to_thread(
        memory.store.search, memory.resource, query, vector, k=k, min_score=min_score, mode=memory.settings.mode
    )


# -- saving ---------------------------------------------------------------------------------------------------------


async def save(memory: MemorySession, ctx: RunContext, frame: AgentFrame, fact: str, *, at: tuple[int, int]) -> Saved:
    """Save ``fact`` (masked first, then embedded) for the resource, with where it came from."""
    fact = memory.mask(fact).strip()
    # a full resource refuses a new fact before its embedding is paid (the save's transaction is the real count)
    await asyncio.to_thread(memory.store.check_room, memory.resource, fact, memory.limits)
    vector = await embed(memory, ctx, frame, fact, at=at)
    thread = ctx.thread.thread_id if ctx.thread is not None else None
    provenance = Provenance(ctx.result.run_id, thread, frame.name, time.time())
    return await asyncio.to_thread(
        memory.store.save, memory.resource, fact, vector, provenance, ttl_s=memory.settings.ttl_s, limits=memory.limits
    )


def _emit_recall(
    memory: MemorySession,
    ctx: RunContext,
    frame: AgentFrame,
    how: MemoryRecall,
    query: str,
    record: RecallRecord,
    *,
    replayed: bool = False,
) -> None:
    """A recall's events: its facts (``how: recall``), then with ``messages:`` its messages (``how: messages``)."""
    _emit(memory, ctx, frame, "recall", query, record.facts, replayed=replayed)
    if how.messages is not None:
        found = record.messages
        ids, scores, texts = [m.id for m in found], [m.score for m in found], [m.text for m in found]
        _emit_found(memory, ctx, frame, "messages", query, ids, scores, texts, replayed=replayed)


def _emit(
    memory: MemorySession,
    ctx: RunContext,
    frame: AgentFrame,
    how: str,
    query: str,
    facts: tuple[RecalledFact, ...] | list[RecalledFact],
    *,
    replayed: bool = False,
) -> None:
    ids, scores, texts = [f.id for f in facts], [f.score for f in facts], [f.fact for f in facts]
    _emit_found(memory, ctx, frame, how, query, ids, scores, texts, replayed=replayed)


def _emit_found(
    memory: MemorySession,
    ctx: RunContext,
    frame: AgentFrame,
    how: str,
    query: str,
    ids: list[str],
    scores: list[float],
    texts: list[str],
    *,
    replayed: bool,
) -> None:
    frame.emit(
        ctx,
        "memory_recall",
        resource=memory.resource,
        how=how,
        ids=ids,
        scores=[round(score, 4) for score in scores],
        replayed=replayed,
        query=query,
        facts=texts,
    )


def _fact(recalled: Recalled) -> RecalledFact:
    memory = recalled.memory
    return RecalledFact(memory.id, memory.fact, recalled.score, memory.provenance.saved_at)


def _recall_fingerprint(resource: str, query: str, how: MemoryRecall, mode: str, thread: str | None) -> str:
    asked: list[Any] = [resource, query, how.top_k, how.min_score, how.max_tokens, mode]
    if how.messages is not None:  # a recall without them keeps the fingerprint it had
        asked += [how.messages.top_k, how.messages.min_score, how.messages.max_tokens, thread]
    return hashlib.sha256(json.dumps(asked, ensure_ascii=False).encode()).hexdigest()


# -- a thread turn indexed as it ends -------------------------------------------------------------------------------


@dataclass(frozen=True)
class TurnIndex:
    """A thread turn's messages embedded for the index of the resource's threads."""

    thread_id: str
    run_id: str
    messages: tuple[IndexedMessage, ...]


def indexes_messages(ctx: RunContext) -> bool:
    """Whether this run indexes its thread turn: an agent of the team recalls earlier threads' messages, and the
    run has a resource and a thread and is no replay (a replay writes nothing into the memory store)."""
    settings = ctx.config.memory
    if ctx.memory is None or ctx.thread is None or ctx.memory.replay is not None or settings is None:
        return False
    return any(how is not None and how.messages is not None for how in (settings.recall or {}).values())


async def embed_turn(ctx: RunContext, frame: AgentFrame, input: str) -> TurnIndex | None:
    """The run's thread turn — its user message and its answer, secrets masked — embedded for the index (through
    :func:`embed`: journaled, charged to ``frame``, the answering agent), or ``None``: the run indexes nothing, or
    its turn is not one its thread keeps. An embedding that cannot be made leaves the turn out, with a warning."""
    result = ctx.result
    if not indexes_messages(ctx) or result.status not in ("done", "budget_exhausted") or not result.final_text:
        return None
    assert ctx.memory is not None and ctx.thread is not None
    memory, messages = ctx.memory, []
    for position, (role, said) in enumerate((("user", input), ("assistant", result.final_text))):
        text = memory.mask(said)  # as the recall's query is masked: the user's message is embedded once
        if not text.strip():
            continue
        try:
            at = (1, position)
            vector = await embed(memory, ctx, frame, _cut(text), at=at, invocation=THREAD_INVOCATION)
        except (MemoryUnavailable, EmbeddingFailed) as exc:
            ctx.warn(frame, _not_indexed(ctx.thread.thread_id, exc))
            return None
        messages.append(IndexedMessage(role, text, vector))
    return TurnIndex(ctx.thread.thread_id, result.run_id, tuple(messages))


async def index_turn(ctx: RunContext, frame: AgentFrame, turn: TurnIndex) -> None:
    """Add ``turn`` (:func:`embed_turn`) to the store's index of the resource's thread messages, once its thread
    kept it; a store that refuses is a warning."""
    if ctx.memory is None:
        return
    memory = ctx.memory
    try:
        await asyncio.to_thread(
            memory.messages.add, memory.resource, turn.thread_id, turn.run_id, turn.messages, at=time.time()
        )
    except (MemoryRefused, StoreError) as exc:
        ctx.warn(frame, _not_indexed(turn.thread_id, exc))


def _not_indexed(thread: str, why: Exception) -> str:
    return (
        f"memory: this turn of thread {thread!r} was not indexed, so other threads will not recall its messages: {why}"
    )


def _charge(ctx: RunContext, frame: AgentFrame, record: EmbeddingRecord) -> None:
    """An embedding call's tokens and cost, on the agent's ledger (no step) and the run's usage per model."""
    usage = Usage(record.input_tokens or 0, 0, 1)
    cost = record.cost_usd or 0.0
    frame.ledger.charge_model(usage, cost, step=False)
    spend = ctx.result.models.setdefault(record.model, ModelSpend())
    spend.usage = spend.usage + usage
    spend.cost += cost
    spend.calls += 1
    spend.usage_known = spend.usage_known and record.input_tokens is not None
    if record.input_tokens is None:
        frame.ledger.usage_known = False
