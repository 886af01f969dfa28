"""OTel's model-call span says which model was asked and which answered (``gen_ai.request.model`` vs
``gen_ai.response.model``) and the input tokens read from the provider's cache (issue 45)."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import teamrun
from teamrun.llm import breaker
from teamrun.llm.breaker import BreakerRegistry
from teamrun.observe.otel import OTelExporter
from tests.fakeserver import FakeOpenAI, Reply, http_error, malformed_body, text


@pytest.fixture(autouse=True)
def _fresh_breakers(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(breaker, "_process_breakers", BreakerRegistry())


@pytest.fixture
def second(second_openai: FakeOpenAI) -> FakeOpenAI:
    """The second provider (the fallback's): tests/conftest.py's ``second_openai``."""
    return second_openai


def _cached_answer(content: str, *, prompt: int, cached: int) -> Reply:
    """A completion whose usage says ``cached`` of its ``prompt`` tokens came from the provider's cache."""
    body = {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 0,
        "model": "backup",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
        "usage": {
            "prompt_tokens": prompt,
            "completion_tokens": 3,
            "total_tokens": prompt + 3,
            "prompt_tokens_details": {"cached_tokens": cached},
        },
    }
    return malformed_body(json.dumps(body))


def _team(tmp_path: Path, first: FakeOpenAI, second: FakeOpenAI) -> Path:
    path = tmp_path / "solo.yaml"
    path.write_text(
        textwrap.dedent(f"""\
            version: 1
            name: solo
            supervisor: solo
            agents:
              solo:
                model: openai/primary
                api_base: {first.url}
                num_retries: 0
                fallbacks:
                  - {{model: openai/backup, api_base: "{second.url}", num_retries: 0}}
            """),
        encoding="utf-8",
    )
    return path


def _chat_spans(team_file: Path) -> list[ReadableSpan]:
    memory = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    result = teamrun.load_team(team_file).run_sync("go", subscribers=[OTelExporter(provider)])
    assert result.status == "done", result.error
    provider.shutdown()
    return [s for s in memory.get_finished_spans() if s.name.startswith("chat ")]


def test_a_fallback_call_names_the_model_asked_and_the_one_that_answered_and_its_cached_tokens(
    tmp_path: Path, fake_openai: FakeOpenAI, second: FakeOpenAI
) -> None:
    fake_openai.handler("primary", lambda _request: http_error(500))
    second.handler("backup", lambda _request: _cached_answer("from backup", prompt=120, cached=96))

    (span,) = _chat_spans(_team(tmp_path, fake_openai, second))

    attributes = dict(span.attributes or {})
    assert attributes["gen_ai.request.model"] == "openai/primary"
    assert attributes["gen_ai.response.model"] == "openai/backup"
    assert attributes["gen_ai.usage.input_tokens"] == 120
    assert attributes["gen_ai.usage.cache_read.input_tokens"] == 96
    assert attributes["teamrun.fallback"] == "openai/backup after openai/primary failed: server error (HTTP 500)"


def test_the_first_model_answering_is_the_response_model_and_no_cache_figure_is_made_up(
    tmp_path: Path, fake_openai: FakeOpenAI, second: FakeOpenAI
) -> None:
    fake_openai.handler("primary", lambda _request: text("from primary"))

    (span,) = _chat_spans(_team(tmp_path, fake_openai, second))

    attributes = dict(span.attributes or {})
    assert attributes["gen_ai.request.model"] == attributes["gen_ai.response.model"] == "openai/primary"
    assert "gen_ai.usage.cache_read.input_tokens" not in attributes  # the provider reported none
    assert "teamrun.fallback" not in attributes
