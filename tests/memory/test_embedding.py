"""Embeddings: the offline hashing embedding, and any LiteLLM model through an OpenAI-compatible endpoint
(the fake one here): counts, sizes, failures named."""

from __future__ import annotations

import asyncio
import math
import threading

import pytest

from teamrun.errors import RunError
from teamrun.llm.embedding import OFFLINE_DIMENSIONS, EmbeddingFailed, embedder_for, offline_vector
from tests.memory.fake_embeddings import Behaviour, FakeEmbeddingHTTPServer


def _cosine(a: list[float], b: list[float]) -> float:
    return sum(x * y for x, y in zip(a, b, strict=True))


def test_offline_is_deterministic_normalised_and_paraphrases_score_higher_than_unrelated_text() -> None:
    embedder = embedder_for("offline")
    result = asyncio.run(embedder.embed(["The customer prefers invoices by email", "", "Bonjour, ça va ?"]))
    assert result.model == "offline" and result.cost_usd == 0.0 and result.input_tokens is not None
    assert [len(v) for v in result.vectors] == [OFFLINE_DIMENSIONS] * 3
    assert all(math.isclose(math.sqrt(sum(x * x for x in v)), 1.0, rel_tol=1e-9) for v in result.vectors)
    assert result.vectors[0] == offline_vector("The customer prefers invoices by email")  # any process, any time
    fact = offline_vector("The customer prefers invoices by email")
    paraphrase = offline_vector("which invoices does this customer prefer, email?")
    unrelated = offline_vector("The office in Lyon closes at six on Fridays")
    assert _cosine(fact, paraphrase) > 0.5 > 0.15 > _cosine(fact, unrelated)
    assert len(asyncio.run(embedder_for("offline", dimensions=64).embed(["x"])).vectors[0]) == 64


def test_a_litellm_model_embeds_through_its_endpoint_in_one_call(fake_embeddings: FakeEmbeddingHTTPServer) -> None:
    embedder = embedder_for("openai/fake-embed", api_base=fake_embeddings.url, api_key="sk-test-123")
    result = asyncio.run(embedder.embed(["first fact", "second fact"]))
    assert fake_embeddings.calls == 1 and fake_embeddings.inputs == [["first fact", "second fact"]]
    assert [len(v) for v in result.vectors] == [16, 16]
    assert result.vectors[0] == pytest.approx(offline_vector("first fact", 16))
    assert result.input_tokens == 4 and result.model == "openai/fake-embed"
    assert "sk-test-123" not in repr(embedder)


def test_input_tokens_are_none_when_the_provider_does_not_say() -> None:
    with FakeEmbeddingHTTPServer(Behaviour(usage=False)) as fake:
        result = asyncio.run(embedder_for("openai/fake-embed", api_base=fake.url).embed(["a"]))
    assert result.input_tokens is None and result.cost_usd is None  # never a pretended 0
    assert len(result.vectors) == 1


def test_a_priced_model_reports_its_cost(fake_embeddings: FakeEmbeddingHTTPServer) -> None:
    embedder = embedder_for("openai/text-embedding-3-small", api_base=fake_embeddings.url, api_key="sk-x")
    result = asyncio.run(embedder.embed(["a fact about the customer"]))
    assert result.input_tokens == 6 and result.cost_usd is not None and result.cost_usd > 0


@pytest.mark.parametrize(
    ("behaviour", "dimensions", "message"),
    [
        (Behaviour(status=500), None, r"embedding model 'openai/fake-embed' at http://.* failed: .*refuses"),
        (Behaviour(status=401), None, r"failed: .*refuses"),
        (Behaviour(wrong_count=True), None, r"returned 1 vector\(s\) for 2 text\(s\)"),
        (Behaviour(wrong_size_after=0), 16, r"returned vectors of size \[15\]; expected 16"),
    ],
)
def test_an_endpoint_that_fails_or_answers_the_wrong_shape_is_an_embedding_failed(
    behaviour: Behaviour, dimensions: int | None, message: str
) -> None:
    with FakeEmbeddingHTTPServer(behaviour) as fake:
        embedder = embedder_for("openai/fake-embed", api_base=fake.url, api_key="sk-secret-987", dimensions=dimensions)
        with pytest.raises(EmbeddingFailed, match=message) as caught:
            asyncio.run(embedder.embed(["one", "two"]))
    assert isinstance(caught.value, RunError) and "sk-secret-987" not in str(caught.value)


def test_a_bad_embedding_model_or_input_is_refused_by_name() -> None:
    with pytest.raises(EmbeddingFailed, match="the embedding model is empty"):
        embedder_for(" ")
    with pytest.raises(EmbeddingFailed, match="dimensions is a number from 1 to 8192, not 0"):
        embedder_for("offline", dimensions=0)
    with pytest.raises(EmbeddingFailed, match="dimensions is a number from 1 to 8192, not 20000000"):
        embedder_for("openai/x-embed", dimensions=20_000_000)
    with pytest.raises(EmbeddingFailed, match="a list of strings"):
        asyncio.run(embedder_for("offline").embed("not a list"))


def test_a_hanging_endpoint_times_out_and_the_error_names_it() -> None:
    with FakeEmbeddingHTTPServer(Behaviour(hang=threading.Event())) as fake:
        embedder = embedder_for("openai/fake-embed", api_base=fake.url, api_key="sk-x", timeout_s=0.3, num_retries=1)
        with pytest.raises(EmbeddingFailed, match=r"'openai/fake-embed' at http://127.0.0.1:\d+/v1 timed out") as err:
            asyncio.run(embedder.embed(["one"]))
        assert fake.calls == 2  # retried once
    assert "(2 attempt(s) of 0.3s); raise memory.embedding.request_timeout_s" in str(err.value)
