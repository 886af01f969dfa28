"""A streamed answer's usage is the provider's, or unknown (attack a45b 6): a provider that streams no usage chunk
(or ``usage: null``) leaves LiteLLM to estimate one by counting tokens; that estimate is never reported as known."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from structlog.testing import capture_logs

from teamrun.llm import LiteLLMChatModel, ModelReply, ModelSettings, adapter
from tests.fakeserver import FakeOpenAI, malformed_body, text

_BASE = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 0, "model": "m"}


def _chunk(delta: dict[str, Any], finish: str | None = None) -> str:
    return json.dumps({**_BASE, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})


def _stream(usage: Any) -> str:
    """An SSE answer "hello"; ``usage``: its usage chunk's usage (``"absent"``: no usage chunk)."""
    events = [_chunk({"role": "assistant", "content": ""}), _chunk({"content": "hello"}), _chunk({}, "stop")]
    if usage != "absent":
        events.append(json.dumps({**_BASE, "choices": [], "usage": usage}))
    return "".join(f"data: {event}\n\n" for event in [*events, "[DONE]"])


def _complete(server: FakeOpenAI, model: str) -> ModelReply:
    settings = ModelSettings(model=f"openai/{model}", api_base=server.url, stream=True, num_retries=0)
    return asyncio.run(LiteLLMChatModel().complete([{"role": "user", "content": "hi"}], settings=settings))


@pytest.mark.parametrize("usage", ["absent", None], ids=["no-usage-chunk", "usage-null"])
def test_a_stream_without_the_providers_usage_is_usage_unknown(
    fake_openai: FakeOpenAI, monkeypatch: pytest.MonkeyPatch, usage: Any
) -> None:
    monkeypatch.setattr(adapter, "_models_without_usage", set())
    fake_openai.script("m", [malformed_body(_stream(usage))])

    with capture_logs() as logs:
        reply = _complete(fake_openai, "m")

    assert reply.text == "hello"
    assert reply.usage_known is False and reply.cost_usd == 0.0
    assert (reply.usage.input_tokens, reply.usage.output_tokens) == (0, 0)
    assert [e["model"] for e in logs if e["event"] == "llm_usage_unknown"] == ["openai/m"]


def test_a_stream_with_the_providers_usage_reports_it(fake_openai: FakeOpenAI) -> None:
    fake_openai.script(
        "m", [malformed_body(_stream({"prompt_tokens": 19, "completion_tokens": 3, "total_tokens": 22}))]
    )
    fake_openai.script("n", [text("hello")])  # the fake's own stream: its include_usage chunk

    reply = _complete(fake_openai, "m")

    assert (reply.usage_known, reply.usage.input_tokens, reply.usage.output_tokens) == (True, 19, 3)
    assert _complete(fake_openai, "n").usage_known is True
