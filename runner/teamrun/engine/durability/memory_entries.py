"""The journal's long-term memory entries: the run's resource, each embedding call, each recall.

- ``memory_resource``: the resource (``--resource``) a run was given, journaled as it starts, so ``teamrun
  resume`` recalls and saves for the same one without being told again.
- ``embedding``: one embedding call's vectors, model and usage, keyed by the texts' fingerprint (an embedding is
  a function of the model and the text): a resume answers it from here and pays nothing again.
- ``memory_recall``: what an agent recalled before a turn (the facts, ids and scores; with ``messages:`` also the
  messages of earlier threads), keyed by the invocation and the model call it came before: a resume puts the same
  facts and messages in the same prompt, so its model calls replay.

The embeddings of a thread turn's messages, indexed as the turn ends, are ``embedding`` entries of the invocation
:data:`THREAD_INVOCATION` (a resume answers them from here as any other).

Only this module knows their payloads; :class:`~teamrun.engine.durability.replay.Replay` reads them back through
it (``memory_resource``, ``embedding``, ``recall``).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from teamrun.store.records import EntryKey, JournalEntry

__all__ = [
    "RESOURCE_INVOCATION",
    "THREAD_INVOCATION",
    "EmbeddingRecord",
    "RecallRecord",
    "RecalledFact",
    "RecalledMessage",
    "embedding_entry",
    "embedding_fingerprint",
    "read_embedding",
    "read_recall",
    "read_resource",
    "recall_entry",
    "resource_entry",
]

RESOURCE_INVOCATION = "@run"
"""The invocation the run's own ``memory_resource`` entry is kept under (no agent's key starts with ``@``)."""
THREAD_INVOCATION = "@thread"
"""The invocation the embeddings of the run's thread turn, indexed as it ends, are kept under."""


@dataclass(frozen=True)
class EmbeddingRecord:
    """One embedding call as it was paid: its vectors, the model that answered, its usage (``None``: not said)."""

    vectors: list[list[float]]
    model: str
    input_tokens: int | None
    cost_usd: float | None


@dataclass(frozen=True)
class RecalledFact:
    """One memory recalled: its id, its (masked) fact, its score."""

    id: str
    fact: str
    score: float
    saved_at: float | None = None


@dataclass(frozen=True)
class RecalledMessage:
    """One message of an earlier thread recalled: its id, thread, role (``user``, ``assistant``), masked text and
    score."""

    id: str
    thread_id: str
    role: str
    text: str
    score: float


@dataclass(frozen=True)
class RecallRecord:
    """What one recall found, best first."""

    query: str
    facts: tuple[RecalledFact, ...]
    left_out: int = 0
    """Facts that matched but did not fit the recall's token budget."""
    messages: tuple[RecalledMessage, ...] = ()
    """Messages of the resource's other threads (a recall with ``messages:``)."""
    messages_left_out: int = 0
    """Messages that matched but did not fit their token budget."""


def embedding_fingerprint(model: str, texts: Sequence[str], dimensions: int | None = None) -> str:
    """What an embedding call asked: the model, its size, the texts (already masked)."""
    return hashlib.sha256(json.dumps([model, dimensions, list(texts)], ensure_ascii=False).encode()).hexdigest()


def embedding_entry(
    invocation: str, index: int, position: int, fingerprint: str, record: EmbeddingRecord
) -> JournalEntry:
    """The ``embedding`` entry of a call made by ``invocation`` at model call ``index`` (``position``: which of its
    embeddings there: a recall is 0, a memory tool's call its place in the reply plus one)."""
    payload = {
        "vectors": record.vectors,
        "model": record.model,
        "input_tokens": record.input_tokens,
        "cost_usd": record.cost_usd,
    }
    return JournalEntry(EntryKey(invocation, index, "embedding", position), fingerprint, payload)


def read_embedding(entry: JournalEntry) -> EmbeddingRecord | None:
    """The call an ``embedding`` entry keeps (``None``: its payload is not one)."""
    payload = entry.payload
    vectors = payload.get("vectors")
    if not isinstance(vectors, list) or not all(isinstance(v, list) for v in vectors):
        return None
    tokens, cost = payload.get("input_tokens"), payload.get("cost_usd")
    return EmbeddingRecord(
        [[float(x) for x in v] for v in vectors],
        str(payload.get("model") or ""),
        tokens if isinstance(tokens, int) and not isinstance(tokens, bool) else None,
        float(cost) if isinstance(cost, int | float) and not isinstance(cost, bool) else None,
    )


def recall_entry(invocation: str, index: int, fingerprint: str, record: RecallRecord) -> JournalEntry:
    """The ``memory_recall`` entry of ``invocation``'s recall before its model call ``index``."""
    facts = [{"id": f.id, "fact": f.fact, "score": f.score, "saved_at": f.saved_at} for f in record.facts]
    payload: dict[str, Any] = {"query": record.query, "facts": facts}
    if record.left_out:
        payload["left_out"] = record.left_out
    if record.messages:
        payload["messages"] = [
            {"id": m.id, "thread_id": m.thread_id, "role": m.role, "text": m.text, "score": m.score}
            for m in record.messages
        ]
    if record.messages_left_out:
        payload["messages_left_out"] = record.messages_left_out
    return JournalEntry(EntryKey(invocation, index, "memory_recall"), fingerprint, payload)


def read_recall(entry: JournalEntry) -> RecallRecord:
    """The recall a ``memory_recall`` entry keeps."""
    found = entry.payload.get("facts")
    facts = []
    for item in found if isinstance(found, list) else []:
        if isinstance(item, Mapping) and isinstance(item.get("fact"), str):
            score, saved = item.get("score"), item.get("saved_at")
            facts.append(
                RecalledFact(
                    str(item.get("id") or ""),
                    item["fact"],
                    float(score) if isinstance(score, int | float) else 0.0,
                    float(saved) if isinstance(saved, int | float) else None,
                )
            )
    query = str(entry.payload.get("query") or "")
    counted, messages_counted = _count(entry.payload.get("left_out")), _count(entry.payload.get("messages_left_out"))
    return RecallRecord(query, tuple(facts), counted, _messages(entry.payload), messages_counted)


def _messages(payload: Mapping[str, Any]) -> tuple[RecalledMessage, ...]:
    found = payload.get("messages")
    messages = []
    for item in found if isinstance(found, list) else []:
        if isinstance(item, Mapping) and isinstance(item.get("text"), str):
            score = item.get("score")
            messages.append(
                RecalledMessage(
                    str(item.get("id") or ""),
                    str(item.get("thread_id") or ""),
                    str(item.get("role") or ""),
                    item["text"],
                    float(score) if isinstance(score, int | float) else 0.0,
                )
            )
    return tuple(messages)


def _count(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def resource_entry(resource: str) -> JournalEntry:
    """The run's resource, as it started."""
    return JournalEntry(EntryKey(RESOURCE_INVOCATION, 0, "memory_resource"), "", {"resource": resource})


def read_resource(entry: JournalEntry) -> str | None:
    value: Any = entry.payload.get("resource")
    return value if isinstance(value, str) and value else None
