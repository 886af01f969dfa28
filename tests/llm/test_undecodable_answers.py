"""Issue 22.30: an answer the client cannot decode (a Bedrock event stream whose checksum fails) is not an
"HTTP 500, the provider had an error": it is said as what it is, not retried (the same bytes would come
back), and no Python traceback reaches the message, whatever LiteLLM put into its own.

The endpoint is a local stand-in for Bedrock that answers 200 with a JSON error body where the binary
event stream should be, as Bedrock does for a model id it does not serve; LiteLLM's real Bedrock path and
botocore's real decoder meet it.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from teamrun.cli import main
from teamrun.errors import ModelError
from teamrun.llm import LiteLLMChatModel, ModelSettings, ProviderError


class _NotAnEventStream(BaseHTTPRequestHandler):
    posts = 0

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        type(self).posts += 1
        self.rfile.read(int(self.headers.get("content-length", 0)))
        body = json.dumps({"message": "The provided model identifier is invalid."}).encode() * 3
        self.send_response(200)
        self.send_header("content-type", "application/vnd.amazon.eventstream")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture
def bedrock(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """The stand-in's URL, with dummy AWS credentials in the environment."""
    for name, value in {
        "AWS_ACCESS_KEY_ID": "AKIAEXAMPLEEXAMPLE",
        "AWS_SECRET_ACCESS_KEY": "not-a-secret",
        "AWS_REGION_NAME": "us-east-1",
    }.items():
        monkeypatch.setenv(name, value)
    _NotAnEventStream.posts = 0
    server = ThreadingHTTPServer(("127.0.0.1", 0), _NotAnEventStream)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


MODEL = "bedrock/anthropic.claude-3-haiku-20240307-v1:0"


def test_a_checksum_failure_is_said_once_without_a_traceback(bedrock: str) -> None:
    settings = ModelSettings(model=MODEL, api_base=bedrock, stream=True, num_retries=3)

    with pytest.raises(ModelError) as info:
        asyncio.run(
            LiteLLMChatModel(backoff_base_s=0.01).complete([{"role": "user", "content": "hi"}], settings=settings)
        )

    error = info.value
    assert isinstance(error, ProviderError)
    assert (error.kind, error.status_code, error.attempts) == ("undecodable", None, 1)
    assert _NotAnEventStream.posts == 1
    message = str(error)
    assert "Traceback" not in message and 'File "' not in message and "HTTP 500" not in message
    assert "not retried" in message and "check the model id, region and api_base" in message
    assert message.endswith("Provider said: Checksum mismatch: expected 0x65223a20, calculated 0xa98fe9c5")


def test_the_cli_says_it_in_one_line(bedrock: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    team = tmp_path / "team.yaml"
    team.write_text(
        f"version: 1\nname: b\nsupervisor: solo\nagents:\n  solo: {{model: '{MODEL}', "
        f"api_base: '{bedrock}', stream: true, num_retries: 3}}\n",
        encoding="utf-8",
    )

    code = main(["execute", str(team), "-i", "hi", "--progress", "none"])

    err = capsys.readouterr().err
    assert code == 1
    assert _NotAnEventStream.posts == 1
    assert "Traceback" not in err and 'File "' not in err and "retry" not in err.split("not retried")[0]
    assert "its answer could not be decoded" in err


def test_a_traceback_inside_any_provider_error_never_reaches_the_message(monkeypatch: pytest.MonkeyPatch) -> None:
    from teamrun.llm.adapter import import_litellm

    litellm = import_litellm()
    said = (
        'Traceback (most recent call last):\n  File "/site-packages/litellm/main.py", line 10, in acompletion\n'
        "    raise ValueError('boom')\nValueError: the upstream closed the stream"
    )

    async def failing(**_: Any) -> Any:
        raise litellm.InternalServerError(message=said, llm_provider="openai", model="gpt-x")

    monkeypatch.setattr(litellm, "acompletion", failing)
    settings = ModelSettings(model="openai/gpt-x", api_base="http://127.0.0.1:9", num_retries=1)

    with pytest.raises(ProviderError) as info:
        asyncio.run(
            LiteLLMChatModel(backoff_base_s=0.01).complete([{"role": "user", "content": "hi"}], settings=settings)
        )

    message = str(info.value)
    assert "Traceback" not in message and 'File "' not in message and "raise ValueError" not in message
    assert message.endswith("Provider said: the upstream closed the stream")
