"""A streaming chat completion over its whole life: keepalives while the run works, the client going away
(its run is cancelled at once), and a failed run's error at the end of the stream."""

from __future__ import annotations

import json
import socket
from pathlib import Path
from typing import Any

import httpx
import pytest

import teamrun
from tests.fakeserver import FakeOpenAI, http_error
from tests.serve.conftest import TOKEN, GatedModel, solo_team
from tests.waiting import wait_until

AUTH = {"Authorization": f"Bearer {TOKEN}"}


def chat(stream: bool = True) -> dict[str, Any]:
    return {"model": "solo", "messages": [{"role": "user", "content": "hello"}], "stream": stream}


def test_a_quiet_run_sends_keepalive_comments_then_the_answer(
    serve: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("teamrun.serve.app.KEEPALIVE_S", 0.02)
    model = GatedModel("the gated answer")
    server = serve([teamrun.load_team(solo_team(tmp_path), chat_model=model)], tokens=frozenset({TOKEN}))

    lines: list[str] = []
    with httpx.Client(base_url=server.url, headers=AUTH, timeout=60) as client:
        with client.stream("POST", "/v1/chat/completions", json=chat()) as response:
            assert response.status_code == 200
            assert response.headers["content-type"].startswith("text/event-stream")
            assert response.headers["cache-control"] == "no-cache"
            run_id = response.headers["x-teamrun-run-id"]
            for line in response.iter_lines():
                lines.append(line)
                if line == ": keepalive" and lines.count(line) == 2:
                    model.gate.set()  # two keepalives seen while the model waited: let it answer
        record = client.get(f"/v1/runs/{run_id}").json()

    data = [json.loads(line[6:]) for line in lines if line.startswith("data: {")]
    assert data[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    assert lines.index(": keepalive") < lines.index(next(line for line in lines if "the gated" in line))
    assert "".join(d["choices"][0]["delta"].get("content") or "" for d in data) == "the gated answer"
    assert [d["choices"][0]["finish_reason"] for d in data][-1] == "stop"
    assert [line for line in lines if line][-1] == "data: [DONE]"
    assert record["status"] == "done"


def test_a_client_that_goes_away_mid_stream_cancels_its_run(serve: Any, tmp_path: Path) -> None:
    model = GatedModel()
    server = serve([teamrun.load_team(solo_team(tmp_path), chat_model=model)], tokens=frozenset({TOKEN}))

    with httpx.Client(base_url=server.url, headers=AUTH, timeout=60) as client:
        with client.stream("POST", "/v1/chat/completions", json=chat()) as response:
            run_id = response.headers["x-teamrun-run-id"]
            lines = response.iter_lines()  # kept: a dropped line iterator closes the response
            first = next(lines)
            assert json.loads(first[6:])["choices"][0]["delta"]["role"] == "assistant"
            wait_until(lambda: model.waiting == 1, "the model call is in flight")
        # the stream is closed with the run still waiting on its model

        def cancelled() -> bool:
            return bool(client.get(f"/v1/runs/{run_id}").json()["status"] == "cancelled")

        wait_until(cancelled, "the run of the client that went away was cancelled")
        record = client.get(f"/v1/runs/{run_id}").json()

    assert record["cancel_reason"] == "client disconnected"
    assert model.gate.is_set() is False, "the model never answered: the run was stopped, not finished"


def test_a_run_that_fails_ends_its_stream_with_the_error_then_done(
    serve: Any, tmp_path: Path, fake_openai: FakeOpenAI
) -> None:
    fake_openai.script("solo", [http_error(400, message="the fake provider refuses this")])
    team = teamrun.load_team(solo_team(tmp_path, model="openai/solo", api_base=fake_openai.url))
    server = serve([team], tokens=frozenset({TOKEN}))

    with (
        httpx.Client(base_url=server.url, headers=AUTH, timeout=60) as client,
        client.stream("POST", "/v1/chat/completions", json=chat()) as response,
    ):
        status = response.status_code
        lines = [line for line in response.iter_lines() if line]

    assert status == 200, "the stream had started (headers sent) before the run failed"
    assert lines[-1] == "data: [DONE]"
    error = json.loads(lines[-2][6:])["error"]
    assert error["code"] == "run_failed" and error["status"] == "failed"
    assert "the fake provider refuses this" in error["message"]
    fake_openai.assert_complete()


def test_a_plain_client_that_goes_away_cancels_its_run_too(serve: Any, tmp_path: Path) -> None:
    """Without streaming nothing is written before the answer; the server still notices the client leave."""
    model = GatedModel()
    server = serve([teamrun.load_team(solo_team(tmp_path), chat_model=model)], tokens=frozenset({TOKEN}))
    body = json.dumps(chat(stream=False)).encode()
    request = (
        f"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {TOKEN}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
    ).encode() + body

    with socket.create_connection(("127.0.0.1", server.port)) as sock:
        sock.sendall(request)
        wait_until(lambda: model.waiting == 1, "the model call is in flight")
        held = server.app.state.registry.held()
        assert len(held) == 1
        run_id = held[0].id
    # the connection is closed with the run still waiting on its model

    with httpx.Client(base_url=server.url, headers=AUTH, timeout=60) as client:

        def cancelled() -> bool:
            return bool(client.get(f"/v1/runs/{run_id}").json()["status"] == "cancelled")

        wait_until(cancelled, "the run of the plain client that went away was cancelled")
        record = client.get(f"/v1/runs/{run_id}").json()

    assert record["cancel_reason"] == "client disconnected"
    assert model.gate.is_set() is False
