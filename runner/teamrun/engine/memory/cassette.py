"""Long-term memory in a recording (``--record``) and its replay (``--replay``): a replay makes no embedding call.

A recorded run's embedding calls are lines of its cassette, next to its model exchanges::

    {"kind": "embedding", "fingerprint": "<sha256 of model, dimensions, masked texts>", "vectors": [[...]],
     "model": "...", "input_tokens": 12, "cost_usd": 0.0}

The texts themselves are not kept (they were masked before embedding; the fingerprint names them). A replay
answers each embedding from these lines, with no network and no key; a text the recording did not embed is an
:class:`~teamrun.llm.embedding.EmbeddingFailed` naming the cassette (recall: a warning; save: a tool error).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Sequence
from pathlib import Path

from teamrun.engine.durability.memory_entries import embedding_fingerprint
from teamrun.llm.embedding import Embedder, EmbeddingFailed, Embeddings

__all__ = ["EMBEDDING_LINE", "RecordingEmbedder", "ReplayEmbedder"]

EMBEDDING_LINE = "embedding"
"""The ``kind`` of a cassette line holding an embedding call (model exchanges have none)."""


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
