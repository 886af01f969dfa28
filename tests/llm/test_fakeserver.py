"""The fake OpenAI server itself: strictness, handlers, concurrency, wire format."""

from __future__ import annotations

import json
import threading
import urllib.error
import urllib.request
from typing import Any

import pytest

from tests.fakeserver import FakeOpenAI, Reply, http_error, text, tool_calls


def post(server: FakeOpenAI, body: dict[str, Any], path: str = "/chat/completions") -> tuple[int, str]:
    """POST JSON to the server; return status and body text."""
    request = urllib.request.Request(server.url + path, json.dumps(body).encode(), {"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def chat(model: str, **extra: Any) -> dict[str, Any]:
    return {"model": model, "messages": [{"role": "user", "content": "hello"}], **extra}


def test_script_is_answered_in_order_with_usage(fake_openai: FakeOpenAI) -> None:
    fake_openai.script("m", [text("one"), tool_calls(("t", {"a": 1}), ("u", "{bad"))])

    first = json.loads(post(fake_openai, chat("m"))[1])
    second = json.loads(post(fake_openai, chat("m"))[1])

    assert first["choices"][0]["message"]["content"] == "one"
    assert first["usage"]["prompt_tokens"] > 0 and first["usage"]["completion_tokens"] > 0
    calls = second["choices"][0]["message"]["tool_calls"]
    assert [(c["function"]["name"], c["function"]["arguments"]) for c in calls] == [
        ("t", '{"a": 1}'),
        ("u", "{bad"),
    ]
    fake_openai.assert_complete()


def test_request_past_the_script_is_a_violation(fake_openai: FakeOpenAI) -> None:
    fake_openai.script("m", [text("only")])
    post(fake_openai, chat("m"))

    status, _ = post(fake_openai, chat("m"))

    assert status == 500
    with pytest.raises(AssertionError, match="no reply left"):
        fake_openai.assert_complete()


def test_leftover_replies_fail_assert_complete(fake_openai: FakeOpenAI) -> None:
    fake_openai.script("m", [text("a"), text("b")])
    post(fake_openai, chat("m"))

    with pytest.raises(AssertionError, match="1 unused replies"):
        fake_openai.assert_complete()


def test_handler_answers_dynamically(fake_openai: FakeOpenAI) -> None:
    def echo(request: dict[str, Any]) -> Reply:
        return text(f"echo {request['messages'][-1]['content']}")

    fake_openai.handler("*", echo)

    assert json.loads(post(fake_openai, chat("any"))[1])["choices"][0]["message"]["content"] == ("echo hello")
    fake_openai.assert_complete()


def test_error_reply_carries_retry_after(fake_openai: FakeOpenAI) -> None:
    fake_openai.script("m", [http_error(429, retry_after=0.5)])
    request = urllib.request.Request(fake_openai.url + "/chat/completions", json.dumps(chat("m")).encode())

    with pytest.raises(urllib.error.HTTPError) as info:
        urllib.request.urlopen(request, timeout=5)

    assert info.value.code == 429 and info.value.headers["Retry-After"] == "0.5"


def test_stream_sends_tool_call_deltas_and_usage(fake_openai: FakeOpenAI) -> None:
    fake_openai.script("m", [tool_calls(("lookup", {"query": "a long enough query"}))])

    status, body = post(fake_openai, chat("m", stream=True, stream_options={"include_usage": True}))

    events = [line.removeprefix("data: ") for line in body.splitlines() if line.startswith("data: ")]
    assert status == 200 and events[-1] == "[DONE]"
    chunks = [json.loads(e) for e in events[:-1]]
    deltas = [c["choices"][0]["delta"] for c in chunks if c["choices"]]
    arguments = "".join(d["tool_calls"][0]["function"].get("arguments", "") for d in deltas if "tool_calls" in d)
    assert json.loads(arguments) == {"query": "a long enough query"}
    assert chunks[-1]["choices"] == [] and chunks[-1]["usage"]["total_tokens"] > 0


def test_requests_are_served_concurrently(fake_openai: FakeOpenAI) -> None:
    # Each request waits until all six have arrived: a server answering one at a time breaks the
    # barrier (its timeout only stops a hang; nothing here bounds how long the requests take).
    all_in = threading.Barrier(6, timeout=30)

    def together(request: dict[str, Any]) -> Reply:
        all_in.wait()
        return text("together", delay=0.3)

    fake_openai.handler("m", together)
    threads = [threading.Thread(target=post, args=(fake_openai, chat("m"))) for _ in range(6)]

    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    log = fake_openai.requests("m")
    assert len(log) == 6 and all(r.status == 200 and r.end >= r.start + 0.29 for r in log)
    assert max(r.start for r in log) < min(r.end for r in log)  # all were in flight at once
    fake_openai.assert_complete()


def test_refuse_above_answers_429_past_the_window_s_requests_and_keeps_the_script(fake_openai: FakeOpenAI) -> None:
    fake_openai.script("m", [text("one"), text("two"), text("three")])
    fake_openai.refuse_above(2, window_s=3600, retry_after=7)

    statuses = [post(fake_openai, chat("m"))[0] for _ in range(4)]

    assert statuses == [200, 200, 429, 429]  # the refused count too: the window stays full
    refused = fake_openai.requests("m")[2]
    assert (refused.status, refused.reply_kind) == (429, "rate_limited")
    request = urllib.request.Request(fake_openai.url + "/chat/completions", json.dumps(chat("m")).encode())
    with pytest.raises(urllib.error.HTTPError) as info:
        urllib.request.urlopen(request, timeout=5)
    assert info.value.code == 429 and info.value.headers["Retry-After"] == "7"
    assert json.loads(info.value.read())["error"]["type"] == "rate_limit_error"
    assert fake_openai.leftovers() == {"m": 1}  # a refused request uses up no scripted reply
