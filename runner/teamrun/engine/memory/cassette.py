"""Long-term memory in a recording (``--record``) and its replay (``--replay``): a replay makes no embedding call.

A recorded run's embedding calls are lines of its cassette, next to its model exchanges::

    {"kind": "embedding", "fingerprint": "<sha256 of model, dimensions, masked texts>", "vectors": [[...]],
     "model": "...", "input_tokens": 12, "cost_usd": 0.0}

The texts themselves are not kept (they were masked before embedding; the fingerprint names them). A replay
answers each embedding from these lines, with no network and no key; a text the recording did not embed is an
:class:`~teamrun.llm.embedding.EmbeddingFailed` naming the cassette (recall: a warning; save: a tool error).

A recorded run's ``memory_search`` and ``memory_save`` calls are lines too, keyed by where the call was made (the
invocation, its model call and position) and what it asked (masked)::

    {"kind": "memory_call", "key": "<sha256>", "ok": true, "content": "<what the model read>",
     "events": [["memory_recall", {...}]]}

A replay answers each such call from its line (:class:`MemoryCallReplay`) — the same result the recording's
model read, so the next request matches the recording whatever the store remembers by then — and emits the
recorded events again; it neither searches nor saves (it writes nothing into the store). A call the cassette
has no line of (recorded before teamrun kept them): a search is made in the store as it is (reading only), a save
answers what a save that succeeded answers and writes nothing.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from teamrun.engine.durability.memory_entries import embedding_fingerprint
from teamrun.llm.embedding import Embedder, EmbeddingFailed, Embeddings

__all__ = [
    "EMBEDDING_LINE",
    "MEMORY_CALL_LINE",
    "MemoryCall",
    "MemoryCallRecorder",
    "MemoryCallReplay",
    "RecordingEmbedder",
    "ReplayEmbedder",
    "memory_call_key",
]

EMBEDDING_LINE = "embedding"
"""The ``kind`` of a cassette line holding an embedding call (model exchanges have none)."""
MEMORY_CALL_LINE = "memory_call"
"""The ``kind`` of a cassette line holding a ``memory_search`` or ``memory_save`` call's outcome."""


class RecordingEmbedder:
    """Embeds through ``inner`` and appends each call to the cassette ``path`` (under ``lock``, the recording
    model's, so lines never interleave)."""

    def __init__(self, inner: Embedder, path: Path, lock: threading.Lock, dimensions: int | None) -> None:
        self.inner = inner
        self.model = inner.model
        self.path = path
        self._lock = lock
        self._dimensions = dimensions

    async def embed(self, texts: Sequence[str]) -> Embeddings:
        paid = await self.inner.embed(texts)
        line = {
            "kind": EMBEDDING_LINE,
            "fingerprint": embedding_fingerprint(self.model, list(texts), self._dimensions),
            "vectors": paid.vectors,
            "model": paid.model,
            "input_tokens": paid.input_tokens,
            "cost_usd": paid.cost_usd,
        }
        text = json.dumps(line, ensure_ascii=False) + "\n"
        with self._lock, self.path.open("a", encoding="utf-8") as handle:
            handle.write(text)
        return paid


class ReplayEmbedder:
    """Answers embedding calls from the cassette ``path``'s embedding lines; never calls a model."""

    def __init__(self, model: str, path: Path, dimensions: int | None) -> None:
        self.model = model
        self.path = path
        self._dimensions = dimensions
        self._recorded: dict[str, Embeddings] = {}
        try:
            lines = path.read_text(encoding="utf-8").splitlines()
        except OSError:
            lines = []  # the model replay says what is wrong with the cassette
        for raw in lines:
            if f'"kind": "{EMBEDDING_LINE}"' not in raw:
                continue
            try:
                data = json.loads(raw)
                self._recorded[str(data["fingerprint"])] = Embeddings(
                    [[float(x) for x in v] for v in data["vectors"]],
                    str(data.get("model") or model),
                    data.get("input_tokens"),
                    data.get("cost_usd"),
                )
            except (ValueError, KeyError, TypeError):
                continue  # a cut last line (a killed recording)

    async def embed(self, texts: Sequence[str]) -> Embeddings:
        recorded = self._recorded.get(embedding_fingerprint(self.model, list(texts), self._dimensions))
        if recorded is None:
            raise EmbeddingFailed(
                f"replay of {self.path}: embedding model {self.model!r} was not asked to embed this text when the "
                f"cassette was recorded (a replay makes no embedding call); re-record it with --record {self.path}"
            )
        return recorded


def _lines(path: Path, kind: str) -> list[dict[str, Any]]:
    """The cassette's lines of ``kind`` (a missing cassette: none; the model replay says what is wrong with it)."""
    try:
        raw_lines = path.read_text(encoding="utf-8").splitlines()
    except OSError:
        return []
    found = []
    for raw in raw_lines:
        if f'"kind": "{kind}"' not in raw:
            continue
        try:
            data = json.loads(raw)
        except ValueError:
            continue  # a cut last line (a killed recording)
        if isinstance(data, dict):
            found.append(data)
    return found


def memory_call_key(invocation: str, at: tuple[int, int], tool: str, masked_arguments: Mapping[str, Any]) -> str:
    """Where a memory tool call was made (the invocation's stable key, its model call and position) and what it
    asked (its arguments, secrets masked): the same in a recording and in its replay."""
    place = [invocation, at[0], at[1], tool, dict(masked_arguments)]
    return hashlib.sha256(json.dumps(place, sort_keys=True, ensure_ascii=False, default=str).encode()).hexdigest()


@dataclass(frozen=True)
class MemoryCall:
    """A memory tool call's outcome as recorded: what the model read, and the events it emitted."""

    ok: bool
    content: str
    """The result (``ok``) or the tool error's message the model read."""
    events: tuple[tuple[str, dict[str, Any]], ...] = ()


class MemoryCallRecorder:
    """Appends each memory tool call's outcome to the cassette ``path`` (under ``lock``, the recording model's)."""

    def __init__(self, path: Path, lock: threading.Lock) -> None:
        self.path = path
        self._lock = lock

    def record(self, key: str, call: MemoryCall) -> None:
        line = {
            "kind": MEMORY_CALL_LINE,
            "key": key,
            "ok": call.ok,
            "content": call.content,
            "events": [[kind, data] for kind, data in call.events],
        }
        text = json.dumps(line, ensure_ascii=False, default=str) + "\n"
        with self._lock, self.path.open("a", encoding="utf-8") as handle:
            handle.write(text)


class MemoryCallReplay:
    """Answers memory tool calls from the cassette ``path``'s ``memory_call`` lines; never reads the store."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._recorded: dict[str, list[MemoryCall]] = {}
        self._lock = threading.Lock()
        for data in _lines(path, MEMORY_CALL_LINE):
            try:
                events = tuple((str(kind), dict(fields)) for kind, fields in data.get("events") or [])
                call = MemoryCall(bool(data["ok"]), str(data["content"]), events)
                self._recorded.setdefault(str(data["key"]), []).append(call)
            except (KeyError, TypeError, ValueError):
                continue

    def answer(self, key: str) -> MemoryCall | None:
        """The recorded outcome of the call at ``key`` (the same call made again: the next recorded one), or
        ``None`` (the recording made no such call)."""
        with self._lock:
            calls = self._recorded.get(key)
            if not calls:
                return None
            return calls.pop(0) if len(calls) > 1 else calls[0]
