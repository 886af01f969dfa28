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
attempt recalled in the same prompt, whatever was saved since, so its model calls replay.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import time
from typing import TYPE_CHECKING, Any

from teamrun.config.models import MemoryRecall
from teamrun.engine.durability.memory_entries import (
    EmbeddingRecord,
    RecalledFact,
    RecallRecord,
    embedding_entry,
    embedding_fingerprint,
    recall_entry,
)
from teamrun.engine.memory.blocks import CHARS_PER_TOKEN, within_budget
from teamrun.engine.memory.session import MemorySession, MemoryUnavailable
from teamrun.engine.result import ModelSpend
from teamrun.llm.types import Usage
from teamrun.store.memory import Provenance, Recalled, Saved

if TYPE_CHECKING:
    from teamrun.engine.runtime import AgentFrame, RunContext

__all__ = ["embed", "recall", "save", "search"]


# -- embedding: the one path ----------------------------------------------------------------------------------------


async def embed(
    memory: MemorySession, ctx: RunContext, frame: AgentFrame, text: str, *, at: tuple[int, int]
) -> list[float]:
    """The vector of ``text`` (already masked), journaled under ``frame``'s invocation at ``at`` (model call
    number, position); raises :class:`MemoryUnavailable` or :class:`~teamrun.llm.embedding.EmbeddingFailed`."""
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
            await ctx.journal.write_now(embedding_entry(frame.key, *at, fingerprint, record))
        _charge(ctx, frame, record)
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
    fingerprint = _recall_fingerprint(memory.resource, query, how, memory.settings.mode)
    replayed = ctx.journal.replay.recall(frame.key, turn, fingerprint) if ctx.journal is not None else None
    if replayed is not None:
        _emit(memory, ctx, frame, "recall", query, replayed.facts, replayed=True)
        return replayed
    found = await search(memory, ctx, frame, query, k=how.top_k, min_score=how.min_score, at=(turn, 0))
    facts = within_budget([_fact(r) for r in found], how.max_tokens)
    record = RecallRecord(query, facts, len(found) - len(facts))
    if ctx.journal is not None:
        await ctx.journal.write_now(recall_entry(frame.key, turn, fingerprint, record))
    _emit(memory, ctx, frame, "recall", query, facts)
    if record.left_out:
        ctx.warn(
            frame,
            f"memory: {_facts(record.left_out)} {frame.name} recalled before turn {turn} "
            f"{'was' if record.left_out == 1 else 'were'} left out: longer than its recall budget (max_tokens "
            f"{how.max_tokens}, about {how.max_tokens * CHARS_PER_TOKEN} characters); raise "
            f"memory.recall.{frame.name}.max_tokens to include {'it' if record.left_out == 1 else 'them'}",
        )
    return record


def _facts(count: int) -> str:
    return f"{count} matching fact" if count == 1 else f"{count} matching facts"


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
    vector = None if memory.settings.mode == "keyword" else await embed(memory, ctx, frame, query, at=at)
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
    frame.emit(
        ctx,
        "memory_recall",
        resource=memory.resource,
        how=how,
        ids=[f.id for f in facts],
        scores=[round(f.score, 4) for f in facts],
        replayed=replayed,
        query=query,
        facts=[f.fact for f in facts],
    )


def _fact(recalled: Recalled) -> RecalledFact:
    memory = recalled.memory
    return RecalledFact(memory.id, memory.fact, recalled.score, memory.provenance.saved_at)


def _recall_fingerprint(resource: str, query: str, how: MemoryRecall, mode: str) -> str:
    asked: list[Any] = [resource, query, how.top_k, how.min_score, how.max_tokens, mode]
    return hashlib.sha256(json.dumps(asked, ensure_ascii=False).encode()).hexdigest()


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
