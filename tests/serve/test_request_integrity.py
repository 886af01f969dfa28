"""What a client cannot break: budgets above the limits in force, hostile headers, text that is not Unicode,
routes that do not exist; and one id per run (issue 22, serve items 1, 2, 3, 5, 6)."""

from __future__ import annotations

import json
import socket
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import teamrun
from teamrun.store import open_store
from tests.fakeserver import FakeOpenAI
from tests.serve.conftest import TOKEN, solo_team
from tests.serve.sse import sse_events

AUTH = {"Authorization": f"Bearer {TOKEN}"}
SURROGATE = "\udfff A"


def http(server: Any, headers: dict[str, str] | None = None) -> httpx.Client:
    return httpx.Client(base_url=server.url, headers=AUTH if headers is None else headers, timeout=60)


def follow(client: httpx.Client, run_id: str, headers: dict[str, str] | None = None) -> list[tuple[str, Any]]:
    with client.stream("GET", f"/v1/runs/{run_id}/events", headers=headers) as response:
        assert response.status_code == 200, response.read()
        return list(sse_events(response.iter_lines()))


def assert_error_shape(response: httpx.Response) -> dict[str, Any]:
    """The documented OpenAI error shape, and nothing else: ``{"error": {"message", "type", "code", ...}}``."""
    body = response.json()
    assert list(body) == ["error"], f"{response.request.method} {response.request.url} -> {body}"
    error = body["error"]
    assert isinstance(error["message"], str) and error["message"]
    assert isinstance(error["type"], str) and "code" in error
    assert "Traceback" not in response.text
    return dict(error)


# -- 1. budgets may only lower the limits in force, teamrun's defaults included -----------------------------


@pytest.mark.parametrize("steps", [60, 1_000_000])
def test_a_budget_above_teamruns_default_max_steps_is_422_naming_the_default(
    serve: Any, tmp_path: Path, steps: int
) -> None:
    server = serve([teamrun.load_team(solo_team(tmp_path))], tokens=frozenset({TOKEN}))
    with http(server) as client:
        refused = client.post("/v1/runs", json={"team": "solo", "input": "hi", "budgets": {"max_steps": steps}})

    assert refused.status_code == 422
    error = assert_error_shape(refused)
    assert error["code"] == "budget_too_high"
    assert f"budgets.max_steps ({steps})" in error["message"]
    assert "max_steps 25, teamrun's default" in error["message"]
    assert error["limits"] == {"max_steps": 25}


def test_a_budget_is_checked_against_the_team_files_limit_where_it_sets_one(serve: Any, tmp_path: Path) -> None:
    server = serve([teamrun.load_team(solo_team(tmp_path, extra="limits:\n  max_steps: 40\n"))])
    with http(server, {}) as client:
        above = client.post("/v1/runs", json={"team": "solo", "input": "hi", "budgets": {"max_steps": 41}})
        allowed = client.post("/v1/runs", json={"team": "solo", "input": "hi", "budgets": {"max_steps": 30}})
        follow(client, allowed.json()["id"])
        record = client.get(f"/v1/runs/{allowed.json()['id']}").json()

    assert above.status_code == 422 and above.json()["error"]["limits"] == {"max_steps": 40}
    assert "max_steps 40, the team's limits" in above.json()["error"]["message"]
    assert allowed.status_code == 201
    assert record["result"]["limits_in_force"]["limits"] == {"max_steps": 30}


def test_a_budget_below_the_default_lowers_it(serve: Any, tmp_path: Path) -> None:
    server = serve([teamrun.load_team(solo_team(tmp_path))])
    with http(server, {}) as client:
        created = client.post("/v1/runs", json={"team": "solo", "input": "hi", "budgets": {"max_steps": 3}})
        follow(client, created.json()["id"])
        record = client.get(f"/v1/runs/{created.json()['id']}").json()

    assert created.status_code == 201
    assert record["result"]["limits_in_force"]["limits"] == {"max_steps": 3}


# -- 2. any header value: 400 or ignored, never 500 nor a reset ---------------------------------------------


def raw_request(port: int, request: bytes) -> bytes:
    """Send ``request`` as is (header bytes no HTTP client would send) and read the whole answer."""
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        sock.sendall(request)
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    return answer


def test_a_last_event_id_that_is_not_an_ascii_number_is_ignored(serve: Any, tmp_path: Path) -> None:
    server = serve([teamrun.load_team(solo_team(tmp_path))], tokens=frozenset({TOKEN}))
    with http(server) as client:
        run_id = client.post("/v1/runs", json={"team": "solo", "input": "hi"}).json()["id"]
        everything = follow(client, run_id)

    # "²" (latin-1 byte 0xb2) passes str.isdigit() and fails int(): the reader gets every event from the start.
    answer = raw_request(
        server.port,
        f"GET /v1/runs/{run_id}/events HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
        f"Authorization: Bearer {TOKEN}\r\n".encode()
        + b"Last-Event-ID: \xb2\r\n\r\n",
    )

    assert answer.startswith(b"HTTP/1.1 200 ")
    assert answer.count(b"\nevent: ") == len(everything)


HOSTILE_VALUES = [b"\xb2", "é²".encode(), b"\xff\xfe", b"\x80", "用户".encode(), b"1\x7f", b"9" * 40]
HEADER_NAMES = [
    b"Last-Event-ID",
    b"X-Teamrun-Thread",
    b"Authorization",
    b"Content-Type",
    b"Accept",
    b"Origin",
    b"Content-Length",
]


def test_any_header_value_is_answered_below_500_on_every_route(serve: Any, tmp_path: Path) -> None:
    store = open_store(tmp_path / "runs.db")
    server = serve([teamrun.load_team(solo_team(tmp_path), store=store)], tokens=frozenset({TOKEN}), store=store)
    with http(server) as client:
        run_id = client.post("/v1/runs", json={"team": "solo", "input": "hi"}).json()["id"]
        follow(client, run_id)
    body = json.dumps({"model": "solo", "messages": [{"role": "user", "content": "hi"}]}).encode()
    routes = [
        (b"GET", f"/v1/runs/{run_id}/events".encode()),
        (b"GET", f"/v1/runs/{run_id}".encode()),
        (b"GET", b"/v1/models"),
        (b"POST", b"/v1/chat/completions"),
        (b"GET", b"/"),
        (b"GET", b"/healthz"),
    ]
    answers: dict[tuple[bytes, bytes, bytes, bytes], bytes] = {}
    for method, path in routes:
        for name in HEADER_NAMES:
            for value in HOSTILE_VALUES:
                sent = body if method == b"POST" else b""
                head = [
                    b"Host: x",
                    b"Connection: close",
                    b"Content-Type: application/json",
                    b"Authorization: Bearer " + TOKEN.encode(),
                    b"Content-Length: %d" % len(sent),
                ]
                head = [line for line in head if not line.lower().startswith(name.lower() + b":")]
                request = (
                    method
                    + b" "
                    + path
                    + b" HTTP/1.1\r\n"
                    + b"\r\n".join([*head, name + b": " + value])
                    + b"\r\n\r\n"
                    + sent
                )
                answers[(method, path, name, value)] = raw_request(server.port, request)

    status = {key: answer[9:12] for key, answer in answers.items()}
    assert all(answer.startswith(b"HTTP/1.1 ") for answer in answers.values()), "an answer for every request"
    assert {key: code for key, code in status.items() if code.startswith(b"5")} == {}
    assert status[(b"GET", f"/v1/runs/{run_id}/events".encode(), b"Last-Event-ID", b"\xb2")] == b"200"
    assert status[(b"GET", b"/v1/models", b"Authorization", b"\xb2")] == b"401"


def test_a_thread_id_a_header_cannot_carry_is_kept_but_not_echoed(serve: Any, tmp_path: Path) -> None:
    store = open_store(tmp_path / "runs.db")
    server = serve([teamrun.load_team(solo_team(tmp_path), store=store)], store=store)
    with http(server, {}) as client:
        plain = client.post(
            "/v1/chat/completions",
            json={"model": "solo", "user": "用户", "messages": [{"role": "user", "content": "hi"}]},
        )
        streamed = client.post(
            "/v1/chat/completions",
            json={"model": "solo", "user": "用户", "stream": True, "messages": [{"role": "user", "content": "again"}]},
        )

    assert plain.status_code == 200, plain.text
    assert plain.json()["teamrun"]["thread"] == "用户"
    assert "x-teamrun-thread" not in plain.headers
    assert streamed.status_code == 200 and streamed.text.rstrip().endswith("data: [DONE]")


# -- 3. a lone surrogate is refused before any provider call, on every route ---------------------------------


def test_a_lone_surrogate_is_400_before_any_provider_call(serve: Any, tmp_path: Path, fake_openai: FakeOpenAI) -> None:
    team = teamrun.load_team(solo_team(tmp_path, model="openai/gpt-4o-mini", api_base=fake_openai.url))
    server = serve([team], tokens=frozenset({TOKEN}))
    with http(server) as client:  # json.dumps escapes it as \\udfff, as any JSON encoder may
        answers = [
            client.post(path, content=json.dumps(body), headers={"content-type": "application/json"})
            for path, body in [
                ("/v1/chat/completions", {"model": "solo", "messages": [{"role": "user", "content": SURROGATE}]}),
                (
                    "/v1/chat/completions",
                    {
                        "model": "solo",
                        "stream": True,
                        "messages": [{"role": "user", "content": [{"type": "text", "text": SURROGATE}]}],
                    },
                ),
                ("/v1/runs", {"team": "solo", "input": SURROGATE}),
                ("/v1/runs", {"team": "solo", "input": "hi", "vars": {"topic": SURROGATE}}),
            ]
        ]

    assert [a.status_code for a in answers] == [400] * 4
    assert [assert_error_shape(a)["code"] for a in answers] == ["invalid_text"] * 4
    messages = [a.json()["error"]["message"] for a in answers]
    assert "messages.0.content holds a lone UTF-16 surrogate" in messages[0]
    assert "messages.0.content.0.text" in messages[1] and "input" in messages[2] and "vars.topic" in messages[3]
    assert fake_openai.requests() == []


# -- 5. one error shape everywhere ---------------------------------------------------------------------------


def test_every_error_has_the_openai_shape(serve: Any, tmp_path: Path) -> None:
    server = serve([teamrun.load_team(solo_team(tmp_path))], tokens=frozenset({TOKEN}), max_request_bytes=300_000)
    deep = b"[" * 50_000 + b"]" * 50_000
    deep_object = b'{"team": "solo", "input": "hi", "vars": ' + b'{"a": ' * 20_000 + b"1" + b"}" * 20_001
    with http(server) as client:
        cases = {
            "unknown route": client.get("/nope"),
            "unknown /v1 route": client.post("/v1/embeddings", json={}),
            "405": client.delete("/v1/models"),
            "405 on runs": client.put("/v1/runs", json={}),
            "50k-deep array": client.post("/v1/runs", content=deep, headers={"content-type": "application/json"}),
            "deep object": client.post(
                "/v1/chat/completions", content=deep_object, headers={"content-type": "application/json"}
            ),
            "not json": client.post("/v1/runs", content=b"{nope", headers={"content-type": "application/json"}),
            "validation": client.post("/v1/runs", json={"team": "solo"}),
            "unknown team": client.post("/v1/runs", json={"team": "nope", "input": "hi"}),
            "unknown run": client.get("/v1/runs/run_nope/events"),
            "no token": client.get("/v1/models", headers={"Authorization": ""}),
            "too large": client.post("/v1/runs", content=b"x" * 300_001),
            "unknown web file": client.get("/web/nope.js"),
        }

    statuses = {name: response.status_code for name, response in cases.items()}
    assert statuses == {
        "unknown route": 404,
        "unknown /v1 route": 404,
        "405": 405,
        "405 on runs": 405,
        "50k-deep array": 400,
        "deep object": 400,
        "not json": 400,  # as the docs say (attack a4243b 4): it was FastAPI's 422
        "validation": 422,
        "unknown team": 404,
        "unknown run": 404,
        "no token": 401,
        "too large": 413,
        "unknown web file": 404,
    }
    codes = {name: assert_error_shape(response)["code"] for name, response in cases.items()}
    assert codes["unknown route"] == "not_found" and codes["405"] == "method_not_allowed"
    assert codes["50k-deep array"] == codes["not json"] == "invalid_json"
    assert cases["405"].headers["allow"] == "GET"


SEGMENTS = st.sampled_from(
    [
        "v1",
        "runs",
        "models",
        "chat",
        "completions",
        "events",
        "cancel",
        "approvals",
        "web",
        "app.js",
        "metrics",
        "healthz",
        "readyz",
        "mcp",
        "run_x",
        "..",
        "%2e%2e",
        "%00",
        "é",
    ]
)
METHODS = st.sampled_from(["GET", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"])


def test_any_path_and_method_answers_json_in_the_error_shape_or_succeeds(serve: Any, tmp_path: Path) -> None:
    server = serve([teamrun.load_team(solo_team(tmp_path))], tokens=frozenset({TOKEN}))
    client = http(server)

    @settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck), database=None)
    @given(
        method=METHODS,
        segments=st.lists(SEGMENTS, max_size=5),
        body=st.sampled_from([b"", b"{}", b"[[[", b"0"]),
        with_token=st.booleans(),
    )
    def check(method: str, segments: list[str], body: bytes, with_token: bool) -> None:
        path = "/" + "/".join(segments)
        if path in ("/v1/runs", "/v1/chat/completions") and method == "POST" and body == b"{}":
            body = b"[]"  # never start a run: this test is about the answers, not the runs
        response = client.request(
            method,
            path,
            content=body,
            headers={"content-type": "application/json", **({} if with_token else {"Authorization": ""})},
        )
        assert response.status_code < 500, (method, path, response.text)
        if response.status_code >= 400:
            assert_error_shape(response)

    try:
        check()
    finally:
        client.close()


# -- 6. one id per run, with or without a store ---------------------------------------------------------------


@pytest.mark.parametrize("with_store", [False, True], ids=["no store", "store"])
def test_the_events_and_the_record_carry_the_run_id_the_api_returned(
    serve: Any, tmp_path: Path, with_store: bool
) -> None:
    store = open_store(tmp_path / "runs.db") if with_store else None
    server = serve([teamrun.load_team(solo_team(tmp_path), store=store)], store=store)
    with http(server, {}) as client:
        run_id = client.post("/v1/runs", json={"team": "solo", "input": "hi"}).json()["id"]
        events = follow(client, run_id)
        record = client.get(f"/v1/runs/{run_id}").json()
        chat = client.post(
            "/v1/chat/completions", json={"model": "solo", "messages": [{"role": "user", "content": "hi"}]}
        )
        chat_id = chat.headers["x-teamrun-run-id"]
        chat_events = follow(client, chat_id)

    assert events and {data["run_id"] for name, data in events if name != "result"} == {run_id}
    assert events[-1][1]["id"] == run_id and record["result"]["run_id"] == run_id
    assert chat.json()["teamrun"]["run_id"] == chat_id
    assert {data["run_id"] for name, data in chat_events if name != "result"} == {chat_id}
