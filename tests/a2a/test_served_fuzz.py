"""The A2A endpoint of `teamrun serve` under random input (hypothesis): JSON-RPC envelopes with random
methods, params and ids, random bytes, wrong content types and HTTP methods, huge and deeply nested
values. Never a 5xx, never a traceback (in a response or on the server's stderr, checked when the
module's one server stops), and every error in JSON-RPC's error shape."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.a2a.served_agents import TOKEN, Served, served
from tests.serve.conftest import solo_team

pytestmark = pytest.mark.outofprocess("a `teamrun serve` process")

FUZZ = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])

METHODS = [
    "SendMessage",
    "SendStreamingMessage",
    "GetTask",
    "ListTasks",
    "CancelTask",
    "SubscribeToTask",
    "CreateTaskPushNotificationConfig",
    "GetTaskPushNotificationConfig",
    "ListTaskPushNotificationConfigs",
    "DeleteTaskPushNotificationConfig",
    "GetExtendedAgentCard",
    "message/send",
    "message/stream",
    "tasks/get",
    "tasks/cancel",
    "tasks/resubscribe",
    "tasks/pushNotificationConfig/set",
    "tasks/pushNotificationConfig/get",
    "agent/getAuthenticatedExtendedCard",
]
SURROGATES = st.text(st.characters(categories=["Cs"]), min_size=1, max_size=3)
"""Lone UTF-16 surrogates: JSON's ``\\ud800`` escapes carry them, UTF-8 cannot."""
SCALARS = st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=30)
JSON = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=4),
    max_leaves=25,
)
PART = st.one_of(
    st.fixed_dictionaries({"text": st.text(max_size=40)}),
    st.fixed_dictionaries({"kind": st.just("text"), "text": st.text(max_size=40)}),
    st.fixed_dictionaries({"data": JSON}),
    st.fixed_dictionaries({"url": st.text(max_size=20)}),
    st.fixed_dictionaries({"raw": st.text(max_size=20)}),
    JSON,
)
MESSAGE = st.fixed_dictionaries(
    {"parts": st.lists(PART, max_size=3)},
    optional={
        "messageId": st.text(max_size=20) | JSON,
        "role": st.sampled_from(["ROLE_USER", "ROLE_AGENT", "user", "agent", "ROLE_UNSPECIFIED"]) | JSON,
        "taskId": st.text(max_size=30) | st.just("run_0123456789abcdef"),
        "contextId": st.text(max_size=30) | st.text(min_size=201, max_size=210),
        "kind": st.just("message"),
        "metadata": JSON,
    },
)
PARAMS = st.one_of(
    JSON,
    st.fixed_dictionaries(
        {"message": MESSAGE},
        optional={
            "configuration": st.fixed_dictionaries(
                {}, optional={"returnImmediately": JSON, "historyLength": JSON, "acceptedOutputModes": JSON}
            ),
            "metadata": JSON,
        },
    ),
    st.fixed_dictionaries(
        {"id": st.text(max_size=30) | JSON}, optional={"historyLength": JSON, "metadata": JSON, "tenant": JSON}
    ),
)
ENVELOPE = st.fixed_dictionaries(
    {},
    optional={
        "jsonrpc": st.just("2.0") | JSON,
        "id": st.integers() | st.text(max_size=20) | SURROGATES | JSON,
        "method": st.sampled_from(METHODS) | st.text(max_size=30) | JSON,
        "params": PARAMS,
    },
)
VERSION = st.sampled_from([None, "1.0", "0.3", "2.0", "x", ""])
CONTENT_TYPE = st.sampled_from(
    ["application/json", "text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x", ""]
)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    folder = tmp_path_factory.mktemp("fuzz")
    with served(str(solo_team(folder)), "--store", f"sqlite:///{folder / 'runs.db'}") as running:
        yield running  # on exit: exit code 0 and no traceback on its stderr (served() checks)
    assert "Unhandled exception" not in running.stderr, running.stderr  # the SDK's log of a client's mistake


@pytest.fixture(scope="module")
def client(server: Served) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server.url, timeout=120) as http:
        yield http


def assert_rpc_error(body: Any) -> None:
    """``{"jsonrpc": "2.0", "id": ..., "error": {"code": int, "message": str, ...}}``."""
    assert isinstance(body, dict) and body.get("jsonrpc") == "2.0" and "id" in body, body
    assert "result" not in body, body
    error = body["error"]
    assert isinstance(error["code"], int) and not isinstance(error["code"], bool), body
    assert isinstance(error["message"], str) and error["message"], body


def assert_well_formed(response: httpx.Response) -> None:
    """No 5xx, no traceback; a JSON-RPC response (an error in the error shape), or an SSE stream of them."""
    assert response.status_code < 500, response.text
    assert "Traceback" not in response.text
    kind = response.headers.get("content-type", "")
    if kind.startswith("text/event-stream"):
        assert response.status_code == 200
        lines = [line[5:].strip() for line in response.text.splitlines() if line.startswith("data:")]
        assert lines, response.text
        for line in lines:
            item = json.loads(line)
            assert item.get("jsonrpc") == "2.0" and "id" in item, item
            if "error" in item:
                assert_rpc_error(item)
            else:
                assert isinstance(item["result"], dict), item
        return
    assert kind.startswith("application/json"), (response.status_code, kind, response.text)
    body = response.json()
    if response.status_code != 200 or "error" in body:
        assert_rpc_error(body)
    else:
        assert body.get("jsonrpc") == "2.0" and "id" in body and "result" in body, body


def headers(version: str | None, content_type: str = "application/json") -> dict[str, str]:
    shown = {"Authorization": f"Bearer {TOKEN}"}
    if content_type:
        shown["Content-Type"] = content_type
    if version is not None:
        shown["A2A-Version"] = version
    return shown


@FUZZ
@given(envelope=ENVELOPE, version=VERSION)
def test_random_json_rpc_envelopes(client: httpx.Client, envelope: dict[str, Any], version: str | None) -> None:
    sent = json.dumps(envelope)  # floats may be Infinity (JSON's extension Python reads)
    assert_well_formed(client.post("/a2a/solo", content=sent, headers=headers(version)))


@FUZZ
@given(method=st.sampled_from(METHODS), params=PARAMS, request_id=st.integers() | st.text(max_size=10))
def test_known_methods_with_random_params(client: httpx.Client, method: str, params: Any, request_id: Any) -> None:
    version = "0.3" if "/" in method else "1.0"
    envelope = {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}
    response = client.post("/a2a/solo", content=json.dumps(envelope), headers=headers(version))
    assert_well_formed(response)
    if response.headers["content-type"].startswith("application/json"):
        assert response.json()["id"] == request_id


@FUZZ
@given(body=st.binary(max_size=300), content_type=CONTENT_TYPE, version=VERSION)
def test_random_bytes_and_content_types(
    client: httpx.Client, body: bytes, content_type: str, version: str | None
) -> None:
    assert_well_formed(client.post("/a2a/solo", content=body, headers=headers(version, content_type)))


@settings(max_examples=25, deadline=None)
@given(
    method=st.sampled_from(["GET", "PUT", "PATCH", "DELETE", "POST", "OPTIONS"]),
    path=st.sampled_from(["/a2a/solo", "/a2a/nobody", "/a2a/solo/extra", "/a2a/", "/a2a/solo/", "/a2a"]),
    token=st.sampled_from([TOKEN, "wrong-token-0123456789abcdef", None]),
)
def test_other_http_methods_paths_and_tokens(client: httpx.Client, method: str, path: str, token: str | None) -> None:
    sent = {"Authorization": f"Bearer {token}"} if token else {}
    response = client.request(method, path, headers=sent, json={"jsonrpc": "2.0", "id": 1, "method": "GetTask"})
    assert_well_formed(response)
    if token != TOKEN and path in ("/a2a/solo", "/a2a/nobody"):
        assert response.status_code == 401 and response.headers["www-authenticate"] == "Bearer"


def test_huge_and_deep_values(client: httpx.Client) -> None:
    def call(params: Any) -> dict[str, Any]:
        return {"jsonrpc": "2.0", "id": "big", "method": "GetTask", "params": params}

    def send(data: Any) -> dict[str, Any]:
        return {
            "message": {
                "messageId": "m",
                "role": "ROLE_USER",
                "parts": [{"data": data}, {"kind": "data", "data": data}],
            }
        }

    cases = [
        json.dumps(call({"id": "x" * 2_000_000})),  # larger than the body limit: 413
        json.dumps(call({"id": "x" * 900_000})),  # within it: an unknown task
        "[" * 100_000 + "]" * 100_000,  # nested past Python's recursion limit
        json.dumps(call({"id": "x", "metadata": {"a": "DEEP"}})).replace('"DEEP"', "[" * 500 + "1" + "]" * 500),
        json.dumps(call({"id": "\\ud800"})).replace("\\\\ud800", "\\ud800"),  # a lone surrogate
        json.dumps([call({"id": "x"})] * 3),  # a batch
        json.dumps(call({"id": "x", "historyLength": 10**30})),
        json.dumps({**call({"id": "x"}), "id": "\ud800"}),  # a lone surrogate in the echoed id
        json.dumps({**call({"id": "x"}), "id": "\udfff", "method": "tasks/get"}),
        json.dumps({**call({"id": "x", "historyLength": 10**30}), "method": "tasks/get"}),  # v0.3: 9
        json.dumps({**call(send({"x": float("nan")})), "method": "SendMessage"}),
        json.dumps({**call(send({"x": float("inf")})), "method": "SendMessage"}),
        json.dumps({**call(send({"x": 2**53 + 1})), "method": "message/send"}),
        json.dumps({**call(send([1e999])), "method": "message/send"}),
        json.dumps({**call([1, 2]), "method": "tasks/get"}),  # v0.3 params that do not fit: 14
        json.dumps({**call(None), "method": "tasks/get"}),
        json.dumps({**call({"historyLength": 3}), "method": "tasks/get"}),
    ]
    codes, ids = [], []
    for body in cases:
        version = "0.3" if '"method": "tasks/get"' in body or '"method": "message/send"' in body else "1.0"
        response = client.post("/a2a/solo", content=body, headers=headers(version))
        assert_well_formed(response)
        codes.append((response.status_code, response.json()["error"]["code"]))
        ids.append(response.json()["id"])
    assert codes[0] == (413, -32600)
    assert codes[1] == (200, -32001)
    assert codes[2] == (200, -32700)
    assert codes[4][1] == -32602
    assert codes[7:9] == [(200, -32602), (200, -32602)] and ids[7:9] == [None, None]  # the id cannot be echoed
    assert codes[9:14] == [(200, -32602)] * 5  # numbers protobuf cannot carry (nor its int fields hold)
    assert codes[14:] == [(200, -32602)] * 3  # v0.3 params that do not fit the method: -32602, one line
    for body in cases[14:]:
        error = client.post("/a2a/solo", content=body, headers=headers(None)).json()["error"]
        assert "pydantic" not in json.dumps(error) and "\n" not in error["message"], error


def test_what_a_request_echoes_back_is_masked(client: httpx.Client) -> None:
    """A token a caller puts in a contextId, a task id or a path comes back masked (`***`), as the runs API
    masks it: in tasks, errors and stream events, to every token holder."""

    def rpc(method: str, params: Any, version: str = "1.0") -> httpx.Response:
        envelope = {"jsonrpc": "2.0", "id": 7, "method": method, "params": params}
        return client.post("/a2a/solo", content=json.dumps(envelope), headers=headers(version))

    said = {"messageId": "m1", "role": "ROLE_USER", "parts": [{"text": "hello"}], "contextId": f"ctx-{TOKEN}"}
    sent = rpc("SendMessage", {"message": said})
    task = sent.json()["result"]["task"]
    streamed = rpc("SendStreamingMessage", {"message": {**said, "messageId": "m2"}})
    assert streamed.headers["content-type"].startswith("text/event-stream")
    listed = rpc("ListTasks", {"contextId": f"ctx-{TOKEN}"})
    answers = [
        sent,
        streamed,
        rpc("GetTask", {"id": task["id"]}),
        listed,
        rpc("GetTask", {"id": f"run_{TOKEN}"}),
        rpc("tasks/get", {"id": f"run_{TOKEN}"}, version="0.3"),
        rpc("SendMessage", {"message": {**said, "messageId": "m3", "taskId": f"run_{TOKEN}"}}),
        client.get(f"/a2a/{TOKEN}/.well-known/agent-card.json"),
        client.post(f"/a2a/{TOKEN}", json={"jsonrpc": "2.0", "id": 1, "method": "GetTask"}, headers=headers("1.0")),
        client.post(f"/a2a/solo/{TOKEN}", json={}, headers=headers("1.0")),
    ]
    for response in answers:
        assert_well_formed(response)
        assert TOKEN not in response.text, response.text
    assert task["contextId"] == "ctx-***" and task["status"]["state"] == "TASK_STATE_COMPLETED"
    usage = task["metadata"]["teamrun"]["usage"]
    assert usage["requests"] == 1 and all(type(n) is int for n in usage.values()), usage  # counts, not 1.0
    assert "ctx-***" in streamed.text
    assert len(listed.json()["result"]["tasks"]) >= 2  # the filter still finds the tasks by their contextId
    assert "run_***" in answers[4].json()["error"]["message"]
    thread = httpx.get(f"{client.base_url}/v1/runs/{task['id']}", headers=headers(None)).json()["thread"]
    assert thread == "ctx-***"  # the runs API shows it so too


def test_the_bare_prefix_answers_a_json_rpc_error(client: httpx.Client) -> None:
    response = client.post("/a2a", json={"jsonrpc": "2.0", "id": 1, "method": "GetTask"}, headers=headers("1.0"))
    assert_well_formed(response)  # not a redirect to /a2a/ with an empty body
    assert response.status_code == 404 and "POST /a2a/<team>" in response.json()["error"]["message"]
