"""Embeddings for long-term memory: ``offline`` (a deterministic local hashing embedding) or any LiteLLM model.

LiteLLM is imported lazily (through :func:`teamrun.llm.adapter.import_litellm`), and only for a model other
than ``offline``.

The offline embedding hashes a text's words (case-folded, common English function words left out, lightly
stemmed) and each word's character trigrams into :data:`OFFLINE_DIMENSIONS` signed buckets, then L2-normalises:
no network, no key, the same vector in every process. Two texts sharing words score high; unrelated texts near
0. It is a keyword-ish stand-in good enough for tests, ready-made teams and the benchmark, not a semantic model.
"""

from __future__ import annotations

import asyncio
import hashlib
import math
import re
import unicodedata
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from teamrun.errors import RunError

OFFLINE_DIMENSIONS = 256
MAX_DIMENSIONS = 8192
"""The largest vector size ``memory.embedding.dimensions`` may ask for (the largest models' own size is 4,096)."""
EMBEDDING_TIMEOUT_S = 60.0
"""Seconds one embedding request may take (``memory.embedding.request_timeout_s``) before it is retried."""
EMBEDDING_RETRIES = 2
"""Retries of a failed or timed-out embedding request (``memory.embedding.num_retries``)."""
_RETRY_BACKOFF_S = 0.5
"""The wait before the first retry of an embedding request; doubled for each next one."""
_WORD = re.compile(r"\w+", re.UNICODE)
_STOP_WORDS = (
    "a an the and or but if of to in on at by for with from as is are was were be been being am do does did "
    "has have had i me my we our you your he him his she her it its they them their this that these those "
    "what which who whom whose when where why how there here not no so than then too very can could will "
    "would shall should may might must about into over under again just also s t"
)
_STOP = frozenset(_STOP_WORDS.split())


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
    model: str,
    *,
    api_base: str | None = None,
    api_key: str | None = None,
    dimensions: int | None = None,
    timeout_s: float | None = None,
    num_retries: int | None = None,
) -> Embedder:
    """``offline`` -> a deterministic local embedding (no network, no key); anything else -> ``litellm.aembedding``."""
    if not isinstance(model, str) or not model.strip():
        raise EmbeddingFailed(
            "the embedding model is empty: name one, e.g. `offline` or `openai/text-embedding-3-small`"
        )
    if dimensions is not None and not 1 <= dimensions <= MAX_DIMENSIONS:
        raise EmbeddingFailed(
            f"embedding model {model!r}: dimensions is a number from 1 to {MAX_DIMENSIONS}, not {dimensions}"
        )
    if model == "offline" or model.startswith("offline/"):
        return OfflineEmbedder(model, dimensions=dimensions or OFFLINE_DIMENSIONS)
    return LiteLLMEmbedder(
        model,
        api_base=api_base,
        api_key=api_key,
        dimensions=dimensions,
        timeout_s=EMBEDDING_TIMEOUT_S if timeout_s is None else timeout_s,
        num_retries=EMBEDDING_RETRIES if num_retries is None else num_retries,
    )


class OfflineEmbedder:
    """The deterministic local embedding (see the module's description)."""

    def __init__(self, model: str = "offline", *, dimensions: int = OFFLINE_DIMENSIONS) -> None:
        self.model = model
        self.dimensions = dimensions

    async def embed(self, texts: Sequence[str]) -> Embeddings:
        return self.embed_now(texts)

    def embed_now(self, texts: Sequence[str]) -> Embeddings:
        """The same as :meth:`embed`, without an event loop (it does no I/O)."""
        vectors = [offline_vector(text, self.dimensions) for text in _checked(self.model, texts)]
        tokens = sum(max(1, len(text) // 4) for text in texts)
        return Embeddings(vectors=vectors, model=self.model, input_tokens=tokens, cost_usd=0.0)


def offline_vector(text: str, dimensions: int = OFFLINE_DIMENSIONS) -> list[float]:
    """The offline embedding of ``text``: hashed words (weight 1) and their character trigrams (0.5 each)."""
    words = [w for w in _WORD.findall(unicodedata.normalize("NFKC", text).casefold()) if w not in _STOP]
    vector = [0.0] * dimensions
    features: list[tuple[str, float]] = [("w:" + _stem(w), 1.0) for w in words]
    for word in words:
        padded = f"<{word}>"
        features += [("c:" + padded[i : i + 3], 0.5) for i in range(len(padded) - 2)]
    for feature, weight in features:
        digest = hashlib.blake2b(feature.encode(), digest_size=8).digest()
        number = int.from_bytes(digest, "little")
        vector[number % dimensions] += weight if (number >> 63) & 1 == 0 else -weight
    norm = math.sqrt(sum(v * v for v in vector))
    if norm == 0.0:  # no words at all: a fixed direction, so the vector is still usable
        vector[0] = 1.0
        return vector
    return [v / norm for v in vector]


def _stem(word: str) -> str:
    """A very light English stemmer: plural and -ing/-ed endings off, so 'likes' and 'liked' meet 'like'."""
    for ending in ("ing", "ed", "es", "s"):
        if len(word) > len(ending) + 2 and word.endswith(ending):
            return word[: -len(ending)]
    return word


class LiteLLMEmbedder:
    """Any embedding model LiteLLM knows, through ``litellm.aembedding``."""

    def __init__(
        self,
        model: str,
        *,
        api_base: str | None = None,
        api_key: str | None = None,
        dimensions: int | None = None,
        timeout_s: float = EMBEDDING_TIMEOUT_S,
        num_retries: int = EMBEDDING_RETRIES,
    ) -> None:
        self.model = model
        self.api_base = api_base
        self._api_key = api_key
        self.dimensions = dimensions
        self.timeout_s = timeout_s
        self.num_retries = num_retries

    def __repr__(self) -> str:  # never the key
        return f"LiteLLMEmbedder({self.model!r}, api_base={self.api_base!r})"

    async def embed(self, texts: Sequence[str]) -> Embeddings:
        from teamrun.llm.adapter import LOCAL_PLACEHOLDER_KEY, import_litellm, is_local_url

        texts = _checked(self.model, texts)
        if not texts:
            return Embeddings(vectors=[], model=self.model, input_tokens=0, cost_usd=0.0)
        litellm = import_litellm()
        _quiet_response_warnings()
        kwargs: dict[str, Any] = {"model": self.model, "input": list(texts)}
        if self.api_base:
            kwargs["api_base"] = self.api_base
        key = self._api_key
        if key is None and self.api_base and is_local_url(self.api_base):
            key = LOCAL_PLACEHOLDER_KEY
        if key is not None:
            kwargs["api_key"] = key
        if self.dimensions is not None:  # a model that cannot shorten its vectors answers its own size: refused below
            kwargs["dimensions"] = self.dimensions
            kwargs["drop_params"] = True
        kwargs["timeout"] = self.timeout_s
        kwargs["num_retries"] = 0  # ours, below: LiteLLM does not always enforce its timeout on embeddings
        where = f" at {self.api_base}" if self.api_base else " at its provider's endpoint"
        attempts = self.num_retries + 1
        for attempt in range(attempts):
            try:
                async with asyncio.timeout(self.timeout_s):
                    response = await litellm.aembedding(**kwargs)
                break
            except Exception as exc:  # any provider failure becomes our error, named
                timeout = isinstance(exc, TimeoutError) or "timeout" in type(exc).__name__.lower()
                status = getattr(exc, "status_code", None)
                transient = timeout or not isinstance(status, int) or status >= 500 or status in (408, 429)
                if transient and attempt + 1 < attempts:
                    await asyncio.sleep(_RETRY_BACKOFF_S * 2**attempt)
                    continue
                if timeout:
                    raise EmbeddingFailed(
                        f"embedding model {self.model!r}{where} timed out ({attempts} attempt(s) of "
                        f"{self.timeout_s:g}s); raise memory.embedding.request_timeout_s or check the endpoint"
                    ) from None
                if _connection_failed(exc):
                    raise EmbeddingFailed(
                        f"embedding model {self.model!r}{where}: could not connect ({attempts} attempt(s); nothing "
                        "answered: is the endpoint running, and is its api_base right?)"
                    ) from None
                raise EmbeddingFailed(
                    f"embedding model {self.model!r}{where} failed: {_reason(exc, self._api_key)}"
                ) from None
        return self._parse(response, len(texts), where)

    def _parse(self, response: Any, count: int, where: str) -> Embeddings:
        data = _get(response, "data") or []
        try:
            ordered = sorted(data, key=lambda item: int(_get(item, "index") or 0))
            vectors = [[float(x) for x in _get(item, "embedding")] for item in ordered]
        except (TypeError, ValueError):
            raise EmbeddingFailed(
                f"embedding model {self.model!r}{where} answered something that is not a list of vectors"
            ) from None
        if len(vectors) != count:
            raise EmbeddingFailed(
                f"embedding model {self.model!r}{where} returned {len(vectors)} vector(s) for {count} text(s)"
            )
        sizes = {len(v) for v in vectors}
        expected = self.dimensions
        if 0 in sizes or len(sizes) > 1 or (expected is not None and sizes != {expected}):
            wanted = f"{expected}" if expected is not None else "one size, not empty"
            raise EmbeddingFailed(
                f"embedding model {self.model!r}{where} returned vectors of size {sorted(sizes)}; expected {wanted}"
            )
        if any(not math.isfinite(x) for v in vectors for x in v):
            raise EmbeddingFailed(f"embedding model {self.model!r}{where} returned numbers that are not finite")
        usage = _get(response, "usage")
        tokens = _get(usage, "prompt_tokens") if usage is not None else None
        hidden = getattr(response, "_hidden_params", None) or {}
        cost = hidden.get("response_cost") if isinstance(hidden, dict) else None
        said = int(tokens) if isinstance(tokens, int | float) and tokens > 0 else None  # LiteLLM fills in 0
        priced = float(cost) if isinstance(cost, int | float) and (said is not None or cost > 0) else None
        return Embeddings(vectors=vectors, model=self.model, input_tokens=said, cost_usd=priced)


def _quiet_response_warnings() -> None:
    """LiteLLM's embedding response model warns on stderr (pydantic serializer warnings) when an endpoint answers
    something that is not a list of vectors; :meth:`LiteLLMEmbedder._parse` says what is wrong instead."""
    warnings.filterwarnings(
        "ignore",
        message=r"Pydantic serializer warnings:\s+PydanticSerializationUnexpectedValue\(Expected `list\[",
        category=UserWarning,
    )


def _connection_failed(exc: BaseException) -> bool:
    """Whether ``exc`` (or what caused it) is a failure to connect (refused, no route, DNS): LiteLLM says it as
    an HTTP 500 that no server answered."""
    seen: BaseException | None = exc
    for _ in range(8):
        if seen is None:
            return False
        name = type(seen).__name__
        if isinstance(seen, ConnectionError) or name in ("APIConnectionError", "ConnectError", "ClientConnectorError"):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def _checked(model: str, texts: Sequence[str]) -> list[str]:
    if isinstance(texts, str) or not all(isinstance(t, str) for t in texts):
        raise EmbeddingFailed(f"embedding model {model!r}: the texts to embed are a list of strings")
    return list(texts)


def _get(value: Any, key: str) -> Any:
    if isinstance(value, dict):
        return value.get(key)
    return getattr(value, key, None)


def _reason(exc: BaseException, key: str | None) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    if key:
        text = text.replace(key, "***")
    status = getattr(exc, "status_code", None)
    text = text[:300] + ("…" if len(text) > 300 else "")
    return f"HTTP {status}: {text}" if isinstance(status, int) else text


__all__ = [
    "EMBEDDING_RETRIES",
    "EMBEDDING_TIMEOUT_S",
    "MAX_DIMENSIONS",
    "OFFLINE_DIMENSIONS",
    "Embedder",
    "EmbeddingFailed",
    "Embeddings",
    "LiteLLMEmbedder",
    "OfflineEmbedder",
    "embedder_for",
    "offline_vector",
]
