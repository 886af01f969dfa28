"""Embeddings for long-term memory: ``offline`` (a deterministic local hashing embedding) or any LiteLLM model.

LiteLLM is imported lazily, only here and in :mod:`teamrun.llm.adapter`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from teamrun.errors import RunError


class EmbeddingFailed(RunError):
    """An embedding call failed or answered nonsense (wrong vector count or size); the message names the model."""


@dataclass(frozen=True)
class Embeddings:
    vectors: list[list[float]]
    model: str
    input_tokens: int | None
    """None when the provider does not say (never a pretended 0)."""
    cost_usd: float | None


class Embedder(Protocol):
    model: str

    async def embed(self, texts: Sequence[str]) -> Embeddings: ...


def embedder_for(
    model: str, *, api_base: str | None = None, api_key: str | None = None, dimensions: int | None = None
) -> Embedder:
    """``offline`` -> a deterministic local embedding (no network, no key); anything else -> ``litellm.aembedding``."""
    raise NotImplementedError


__all__ = ["Embedder", "EmbeddingFailed", "Embeddings", "embedder_for"]
