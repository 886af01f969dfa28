"""The LiteLLM adapter against the local fake server, through LiteLLM's real HTTP path."""

from __future__ import annotations

import asyncio
import itertools
import math
import threading
from collections.abc import Sequence
from typing import Any

import pytest
from structlog.testing import capture_logs

from teamrun.errors import ModelError
from teamrun.llm import LiteLLMChatModel, ModelReply, ModelSettings, ProviderError, RetryNotice
from teamrun.llm.adapter import _parse_retry_after, import_litellm
from teamrun.llm.ratelimit import RateLimiter, RateLimits
from tests.cli_processes import free_port
from tests.fakeserver import FakeOpenAI, Reply, hang, http_error, malformed_body, text, tool_calls
from tests.waiting import wait_until_async

MESSAGES = [
    {"role": "system", "content": "You coordinate."},
    {"role": "user", "content": "Compare two phones."},
]
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": name,
            "description": f"the {name} tool",
            "parameters": {
                "type": "object",
                "properties": {"task": {"type": "string"}},
                "required": ["task"],
            },
        },
    }
    for name in ("ask_researcher", "ask_writer")
]


def complete(
    server: FakeOpenAI,
    model: str = "lead",
    *,
    tools: Sequence[dict[str, Any]] = (),
    chat_model: LiteLLMChatModel | None = None,
    **settings: Any,
) -> ModelReply:
    """One adapter call to ``openai/<model>`` on the fake server."""
    chat = chat_model or LiteLLMChatModel(backoff_base_s=0.01)
    config = ModelSettings(model=f"openai/{model}", api_base=server.url, **settings)
    return asyncio.run(chat.complete(MESSAGES, settings=config, tools=tools))


def fail(server: FakeOpenAI, **settings: Any) -> ProviderError:
    """Run a call that must fail; return the error."""
    with pytest.raises(ModelError) as info:
        complete(server, **settings)
    assert isinstance(info.value, ProviderError)
    return info.value


@pytest.mark.parametrize("stream", [False, True])
def test_text_reply_with_usage(fake_openai: FakeOpenAI, stream: bool) -> None:
    fake_openai.script("lead", [text("Both phones are fine.")])

    reply = complete(fake_openai, stream=stream, temperature=0.2, max_tokens=50, extra={"top_p": 0.5})

    assert reply.text == "Both phones are fine."
    assert reply.tool_calls == ()
    assert reply.finish_reason == "stop"
    assert reply.usage.requests == 1
    assert reply.usage.input_tokens > 0 and reply.usage.output_tokens > 0
    request = fake_openai.requests("lead")[0].request
    assert request["messages"] == MESSAGES
    assert (request["temperature"], request["max_tokens"], request["top_p"]) == (0.2, 50, 0.5)
    assert "tools" not in request
    if stream:
        assert request["stream"] is True
        assert request["stream_options"] == {"include_usage": True}
    else:
        assert not request.get("stream")
    fake_openai.assert_complete()


@pytest.mark.parametrize("stream", [False, True])
def test_parallel_tool_calls(fake_openai: FakeOpenAI, stream: bool) -> None:
    fake_openai.script(
        "lead",
        [tool_calls(("ask_researcher", {"task": "specs"}), ("ask_writer", {"task": "draft"}))],
    )

    reply = complete(fake_openai, tools=TOOLS, stream=stream)

    assert [(c.name, c.arguments) for c in reply.tool_calls] == [
        ("ask_researcher", '{"task": "specs"}'),
        ("ask_writer", '{"task": "draft"}'),
    ]
    assert len({c.id for c in reply.tool_calls}) == 2
    assert reply.text is None
    assert reply.finish_reason == "tool_calls"
    assert reply.as_message()["tool_calls"][1]["function"]["name"] == "ask_writer"
    assert [t["function"]["name"] for t in fake_openai.requests()[0].request["tools"]] == [
        "ask_researcher",
        "ask_writer",
    ]
    fake_openai.assert_complete()


@pytest.mark.parametrize("stream", [False, True])
def test_malformed_tool_arguments_pass_through_raw(fake_openai: FakeOpenAI, stream: bool) -> None:
    fake_openai.script("lead", [tool_calls(("ask_researcher", '{"task": "unterminated'))])

    reply = complete(fake_openai, tools=TOOLS, stream=stream)

    assert reply.tool_calls[0].arguments == '{"task": "unterminated'
    fake_openai.assert_complete()


def test_429_retry_after_is_honoured(fake_openai: FakeOpenAI) -> None:
    fake_openai.script("lead", [http_error(429, retry_after=0.2), text("ok")])
    notices: list[RetryNotice] = []
    chat = LiteLLMChatModel(backoff_base_s=0.001, on_retry=notices.append)

    reply = complete(fake_openai, chat_model=chat)

    assert reply.text == "ok"
    first, second = fake_openai.requests()
    assert second.start - first.end >= 0.18
    assert [(n.kind, n.status_code, n.delay_s, n.attempt) for n in notices] == [("rate_limited", 429, 0.2, 1)]
    fake_openai.assert_complete()


def test_retry_after_is_capped(fake_openai: FakeOpenAI) -> None:
    fake_openai.script("lead", [http_error(429, retry_after=3600), text("ok")])
    notices: list[RetryNotice] = []
    chat = LiteLLMChatModel(retry_after_max_s=0.05, on_retry=notices.append)

    assert complete(fake_openai, chat_model=chat).text == "ok"
    assert notices[0].delay_s == 0.05


@pytest.mark.parametrize("said", [float("nan"), float("inf"), -5.0])
def test_a_retry_after_that_is_not_a_finite_number_of_seconds_is_ignored(fake_openai: FakeOpenAI, said: float) -> None:
    """``Retry-After: nan`` (or ``inf``, or negative) is not a wait: the usual backoff, and no hold of the model
    (a NaN hold made every later request of it wait forever, past the cap)."""
    fake_openai.script("lead", [http_error(429, retry_after=said), text("ok")])
    notices: list[RetryNotice] = []
    limits = RateLimits()
    chat = LiteLLMChatModel(backoff_base_s=0.01, on_retry=notices.append, rate_limits=limits)

    assert complete(fake_openai, chat_model=chat).text == "ok"
    assert len(notices) == 1 and math.isfinite(notices[0].delay_s) and 0 < notices[0].delay_s <= 0.01
    assert asyncio.run(limits.acquire("openai/lead", fake_openai.url, None)) == 0.0


@pytest.mark.parametrize(
    ("header", "seconds"),
    [
        ("7", 7.0),
        (" 2.5 ", 2.5),
        ("nan", None),
        ("NaN", None),
        ("-1", None),
        ("1e999", None),
        ("soon", None),
        ("Wed, 21 Oct 2015 07:28:00 GMT", 0.0),
        (None, None),
    ],
)
def test_retry_after_header_is_read_as_finite_seconds_or_not_at_all(header: str | None, seconds: float | None) -> None:
    assert _parse_retry_after(header) == seconds


def test_a_held_model_is_not_held_by_a_nan() -> None:
    async def no_wait(seconds: float) -> None:
        raise AssertionError(f"waited {seconds} s")

    limiter = RateLimiter(clock=lambda: 100.0, sleep=no_wait)
    limiter.hold(float("nan"))
    limiter.hold(float("inf"))
    assert asyncio.run(limiter.acquire()) == 0.0


def test_500_retried_num_retries_times_then_model_error(fake_openai: FakeOpenAI) -> None:
    fake_openai.script("lead", [http_error(500)] * 3)

    error = fail(fake_openai, num_retries=2)

    assert len(fake_openai.requests()) == 3
    assert (error.kind, error.status_code, error.attempts) == ("server_error", 500, 3)
    assert "openai" in str(error) and "openai/lead" in str(error) and "HTTP 500" in str(error)
    assert "gave up after 3 attempts" in str(error)
    fake_openai.assert_complete()


@pytest.mark.parametrize("status", [400, 401, 404])
def test_client_errors_are_not_retried(fake_openai: FakeOpenAI, status: int) -> None:
    fake_openai.script("lead", [http_error(status)])

    error = fail(fake_openai, num_retries=3)

    assert len(fake_openai.requests()) == 1
    assert (error.kind, error.status_code, error.attempts) == ("rejected", status, 1)
    assert f"HTTP {status}" in str(error)
    fake_openai.assert_complete()


def test_malformed_body_is_retried(fake_openai: FakeOpenAI) -> None:
    fake_openai.script("lead", [malformed_body(), malformed_body('{"foo": 1}'), text("fine")])

    assert complete(fake_openai, num_retries=2).text == "fine"
    fake_openai.assert_complete()


def test_malformed_body_every_time_becomes_model_error(fake_openai: FakeOpenAI) -> None:
    fake_openai.script("lead", [malformed_body()] * 2)

    error = fail(fake_openai, num_retries=1)

    assert error.kind == "malformed"
    assert "not a valid chat completion" in str(error)
    fake_openai.assert_complete()


def test_timeout_is_retried(fake_openai: FakeOpenAI) -> None:
    fake_openai.script("lead", [hang(600), text("after the hang")])  # the server stops waiting at the end

    reply = complete(fake_openai, timeout_s=0.3)

    assert reply.text == "after the hang"
    first, second = fake_openai.requests()
    # The retry was answered while the first request was still hanging: the client gave up on it.
    assert first.end == 0.0 and second.end > second.start > first.start
    fake_openai.assert_complete()


def test_timeout_every_time_names_the_limit(fake_openai: FakeOpenAI) -> None:
    fake_openai.script("lead", [hang(5), hang(5)])

    error = fail(fake_openai, timeout_s=0.2, num_retries=1)

    assert error.kind == "timeout"
    assert "timed out after 0.2s" in str(error)


def test_connection_refused_is_retried_then_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-dummy")
    chat = LiteLLMChatModel(backoff_base_s=0.001)
    api_base = f"http://127.0.0.1:{free_port()}/v1"
    settings = ModelSettings(model="openai/lead", api_base=api_base, num_retries=1)
    with pytest.raises(ProviderError) as info:
        asyncio.run(chat.complete(MESSAGES, settings=settings))
    assert (info.value.kind, info.value.attempts) == ("connection", 2)
    assert "check api_base" in str(info.value)


def test_usage_and_cost_from_the_price_table(fake_openai: FakeOpenAI) -> None:
    fake_openai.script("gpt-4o-mini", [text("priced")])
    litellm = import_litellm()

    reply = complete(fake_openai, "gpt-4o-mini")

    prompt_cost, completion_cost = litellm.cost_per_token(
        model="gpt-4o-mini",
        prompt_tokens=reply.usage.input_tokens,
        completion_tokens=reply.usage.output_tokens,
    )
    assert reply.cost_usd == pytest.approx(prompt_cost + completion_cost)
    assert reply.cost_usd > 0


def test_unknown_model_costs_zero_and_warns_once(fake_openai: FakeOpenAI) -> None:
    fake_openai.script("no-such-priced-model", [text("a"), text("b")])

    with capture_logs() as logs:
        replies = [complete(fake_openai, "no-such-priced-model") for _ in range(2)]

    assert [r.cost_usd for r in replies] == [0.0, 0.0]
    assert [e["event"] for e in logs].count("llm_cost_unknown") == 1


def test_api_key_from_env_is_sent_but_never_shown(fake_openai: FakeOpenAI, monkeypatch: pytest.MonkeyPatch) -> None:
    secret = "sk-teamrun-secret-0123456789abcdef"
    monkeypatch.setenv("TEAMRUN_TEST_KEY", secret)
    fake_openai.script("lead", [text("hi"), http_error(401, message=f"Incorrect API key {secret}")])

    complete(fake_openai, api_key_env="TEAMRUN_TEST_KEY")
    error = fail(fake_openai, api_key_env="TEAMRUN_TEST_KEY")

    headers = [r.headers["authorization"] for r in fake_openai.requests()]
    assert headers == [f"Bearer {secret}"] * 2
    assert secret not in str(error) and secret not in repr(error.args)
    assert "check the API key" in str(error)


def test_unset_api_key_env_fails_before_any_request(fake_openai: FakeOpenAI, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TEAMRUN_UNSET_KEY", raising=False)

    error = fail(fake_openai, api_key_env="TEAMRUN_UNSET_KEY")

    assert "TEAMRUN_UNSET_KEY" in str(error) and error.kind == "config"
    assert fake_openai.requests() == []


def test_missing_key_is_not_retried(fake_openai: FakeOpenAI, monkeypatch: pytest.MonkeyPatch) -> None:
    """A host that is not local gets no placeholder key (a local one does: tests/llm/test_switching_models.py)."""
    monkeypatch.delenv("OPENAI_API_KEY")
    settings = ModelSettings(model="openai/lead", api_base="https://llm.example.com/v1", num_retries=3)

    with pytest.raises(ProviderError) as info:
        asyncio.run(LiteLLMChatModel(backoff_base_s=0.01).complete(MESSAGES, settings=settings))

    error = info.value
    assert error.kind == "config" and error.attempts == 1
    assert "api_key_env" in str(error)
    assert fake_openai.requests() == []


def test_concurrent_calls_overlap(fake_openai: FakeOpenAI) -> None:
    # Every request waits until all five have arrived, so the calls can only succeed if the adapter
    # really has them in flight at once (the barrier's timeout is a hang guard, not a timing bound).
    all_in = threading.Barrier(5, timeout=60)
    answered = itertools.count()

    def together(request: dict[str, Any]) -> Reply:
        all_in.wait()
        return text(f"answer {next(answered)}")

    fake_openai.handler("lead", together)
    chat = LiteLLMChatModel()
    settings = ModelSettings(model="openai/lead", api_base=fake_openai.url)

    async def fan_out() -> list[ModelReply]:
        calls = [chat.complete(MESSAGES, settings=settings) for _ in range(5)]
        return list(await asyncio.gather(*calls))

    replies = asyncio.run(fan_out())

    assert sorted(r.text or "" for r in replies) == [f"answer {i}" for i in range(5)]
    log = fake_openai.requests("lead")
    assert len(log) == 5 and max(r.start for r in log) < min(r.end for r in log)
    fake_openai.assert_complete()


def test_cancellation_is_not_turned_into_a_model_error(fake_openai: FakeOpenAI) -> None:
    fake_openai.script("lead", [hang(5)])
    chat = LiteLLMChatModel()
    settings = ModelSettings(model="openai/lead", api_base=fake_openai.url)

    async def cancel_soon() -> None:
        task = asyncio.create_task(chat.complete(MESSAGES, settings=settings))
        # cancel once the request is at the server (not by a timer: a busy machine is slow)
        await wait_until_async(lambda: fake_openai.requests() or task.done(), "the request at the server")
        task.cancel()
        await task

    with pytest.raises(asyncio.CancelledError):
        asyncio.run(cancel_soon())
    assert len(fake_openai.requests()) == 1


def test_api_key_in_extra_is_redacted_too(fake_openai: FakeOpenAI) -> None:
    secret = "sk-extra-secret-abcdef0123456789"
    fake_openai.script("lead", [http_error(403, message=f"key {secret} lacks access")])

    error = fail(fake_openai, extra={"api_key": secret})

    assert fake_openai.requests()[0].headers["authorization"] == f"Bearer {secret}"
    assert secret not in str(error)
