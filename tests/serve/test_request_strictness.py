"""What a client sends where a number belongs: a boolean is not a number, and a number is finite and within the
bounds a model's tool-call arguments keep (teamrun.bounds): ``NaN``, ``Infinity``, ``1e999`` and integers past
±2^63-1 are refused before anything runs, ``422`` in the error shape naming the field (JSON-RPC's invalid params
on A2A). One test per route that reads a body (attack a43engine D8).

Python's JSON reader takes ``NaN`` and ``Infinity``, so the bodies are sent as raw text.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest

import teamrun
from teamrun.store import open_store
from teamrun.testing.scripted import ScriptedModel, tool_call
from tests.serve.conftest import TOKEN, solo_team, until_status
from tests.serve.test_request_integrity import assert_error_shape

AUTH = {"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"}
NOT_FINITE = ["NaN", "Infinity", "-Infinity", "1e999"]
HUGE = "123456789012345678901234567890"


def _client(server: Any) -> httpx.Client:
    return httpx.Client(base_url=server.url, headers=AUTH, timeout=60)


def _refused(response: httpx.Response, *names: str) -> str:
    """The 422's message, which names each of ``names``."""
    assert response.status_code == 422, response.text
    error = assert_error_shape(response)
    for name in names:
        assert name in error["message"], error
    return str(error["message"])


# -- POST /v1/runs -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("budget", ["max_steps", "max_total_tokens", "timeout_s", "max_cost_usd"])
@pytest.mark.parametrize("given", ["true", "false"])
def test_a_boolean_budget_is_refused_naming_it(serve: Any, tmp_path: Path, budget: str, given: str) -> None:
    server = serve([teamrun.load_team(solo_team(tmp_path))], tokens=frozenset({TOKEN}))
    body = f'{{"team": "solo", "input": "hi", "budgets": {{"{budget}": {given}}}}}'
    with _client(server) as client:
        refused = client.post("/v1/runs", content=body)
        listed = client.get("/v1/runs").json()["data"]

    message = _refused(refused, "budgets", budget, "not a number")
    assert f"{budget} is {given}, a boolean" in message
    assert listed == []  # nothing started


@pytest.mark.parametrize("value", [*NOT_FINITE, HUGE, f"-{HUGE}"])
def test_a_var_that_is_not_a_finite_bounded_number_is_refused_naming_it(serve: Any, tmp_path: Path, value: str) -> None:
    server = serve([teamrun.load_team(solo_team(tmp_path))], tokens=frozenset({TOKEN}))
    body = f'{{"team": "solo", "input": "hi", "vars": {{"topic": "x", "depth": {value}}}}}'
    nested = f'{{"team": "solo", "input": "hi", "budgets": {{"timeout_s": {value}}}}}'
    with _client(server) as client:
        refused = client.post("/v1/runs", content=body)
        budget = client.post("/v1/runs", content=nested)
        listed = client.get("/v1/runs").json()["data"]

    _refused(refused, "vars.depth")
    assert budget.status_code == 422, budget.text
    assert "budgets.timeout_s" in budget.json()["error"]["message"] or value.startswith("-"), budget.text
    assert listed == []


def test_bounded_numbers_and_booleans_are_still_vars(serve: Any, tmp_path: Path) -> None:
    server = serve([teamrun.load_team(solo_team(tmp_path))], tokens=frozenset({TOKEN}))
    body = '{"team": "solo", "input": "hi", "vars": {"a": 9223372036854775807, "b": 1.5e300, "c": true}}'
    with _client(server) as client:
        started = client.post("/v1/runs", content=body)
    assert started.status_code == 201, started.text


# -- POST /v1/chat/completions ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("field", "value"),
    [("temperature", "NaN"), ("max_tokens", "1e999"), ("seed", HUGE), ("stream", "1"), ("stream", '"yes"')],
)
def test_a_chat_completion_with_a_number_out_of_bounds_or_a_number_for_stream_is_refused(
    serve: Any, tmp_path: Path, field: str, value: str
) -> None:
    server = serve([teamrun.load_team(solo_team(tmp_path))], tokens=frozenset({TOKEN}))
    body = f'{{"model": "solo", "messages": [{{"role": "user", "content": "hi"}}], "{field}": {value}}}'
    with _client(server) as client:
        refused = client.post("/v1/chat/completions", content=body)
        listed = client.get("/v1/runs").json()["data"]

    _refused(refused, field)
    assert listed == []


# -- POST /v1/runs/{run}/pending/{item} and /approvals/{id} ---------------------------------------------------

NUMBER_TEAM = """\
version: 1
name: counter
supervisor: lead
agents:
  lead:
    description: Asks how many.
    tools: [how_many]
tools:
  how_many:
    person: {answer_schema: {type: integer}}
"""


@pytest.mark.parametrize("value", [*NOT_FINITE, HUGE])
def test_an_answer_that_is_not_a_finite_bounded_number_is_refused_and_the_item_stays_pending(
    serve: Any, tmp_path: Path, value: str
) -> None:
    path = tmp_path / "counter.yaml"
    path.write_text(NUMBER_TEAM, encoding="utf-8")
    store = open_store(tmp_path / "runs.db")
    model = ScriptedModel({"lead": [tool_call("how_many", question="How many?"), "counted"]})
    team = teamrun.load_team(path, chat_model=model, store=store)
    server = serve([team], tokens=frozenset({TOKEN}), store=store)
    with _client(server) as client:
        run_id = client.post("/v1/runs", json={"team": "counter", "input": "count"}).json()["id"]
        until_status(client, run_id, "waiting")
        item = client.get("/v1/pending").json()["data"][0]["id"]
        refused = client.post(f"/v1/runs/{run_id}/pending/{item}", content=f'{{"answer": {value}}}')
        as_bool = client.post(f"/v1/runs/{run_id}/pending/{item}", content='{"answer": true}')
        still = client.get("/v1/pending").json()["data"]

    _refused(refused, "answer")
    assert as_bool.status_code == 422, as_bool.text  # the schema says integer: true is not one
    assert [(i["id"], i["status"]) for i in still] == [(item, "pending")]


APPROVAL_TEAM = """\
version: 1
name: stamper
supervisor: lead
defaults: {model: offline}
tools:
  stamp: {command: [echo, ok], require_approval: true}
agents:
  lead: {tools: [stamp], budget: {max_steps: 3}}
"""


@pytest.mark.parametrize("value", ["1", "0", '"yes"', "NaN"])
def test_an_approval_decided_by_anything_but_a_boolean_is_refused(serve: Any, tmp_path: Path, value: str) -> None:
    path = tmp_path / "stamper.yaml"
    path.write_text(APPROVAL_TEAM, encoding="utf-8")
    server = serve([teamrun.load_team(path)], tokens=frozenset({TOKEN}))
    with _client(server) as client:
        run_id = client.post("/v1/runs", json={"team": "stamper", "input": "go"}).json()["id"]
        approval = _waiting_approval(client, run_id)
        refused = client.post(f"/v1/runs/{run_id}/approvals/{approval}", content=f'{{"approve": {value}}}')
        record = client.get(f"/v1/runs/{run_id}").json()
        client.post(f"/v1/runs/{run_id}/approvals/{approval}", json={"approve": False})

    _refused(refused, "approve")
    assert [a["status"] for a in record["approvals"]] == ["pending"], record["approvals"]


def _waiting_approval(client: httpx.Client, run_id: str) -> str:
    from tests.waiting import wait_until

    def asked() -> str | None:
        approvals = client.get(f"/v1/runs/{run_id}").json()["approvals"]
        return str(approvals[0]["id"]) if approvals else None

    return wait_until(asked, f"run {run_id} asks for an approval")


# -- GET /v1/runs/{run}/workspace ------------------------------------------------------------------------------


@pytest.mark.parametrize("since", ["true", "NaN", "Infinity", "1e999", "1.5", HUGE])
def test_a_workspace_since_that_is_not_a_whole_number_is_refused(serve: Any, tmp_path: Path, since: str) -> None:
    server = serve([teamrun.load_team(solo_team(tmp_path))], tokens=frozenset({TOKEN}))
    with _client(server) as client:
        refused = client.get("/v1/runs/any/workspace", params={"since": since})
    _refused(refused, "since")


# -- A2A ------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("method", "params"),
    [
        ("GetTask", '{"id": "t", "historyLength": true}'),
        ("GetTask", '{"id": "t", "historyLength": NaN}'),
        ("GetTask", f'{{"id": "t", "historyLength": {HUGE}}}'),
        ("ListTasks", '{"pageSize": true}'),
        ("ListTasks", '{"pageSize": Infinity}'),
        (
            "SendMessage",
            '{"message": {"messageId": "m1", "role": "ROLE_USER", "parts": [{"text": "hi"}]}, '
            '"configuration": {"historyLength": false}}',
        ),
    ],
)
def test_an_a2a_number_param_that_is_a_boolean_or_not_finite_is_invalid_params(
    serve: Any, tmp_path: Path, method: str, params: str
) -> None:
    server = serve([teamrun.load_team(solo_team(tmp_path))], tokens=frozenset({TOKEN}))
    body = f'{{"jsonrpc": "2.0", "id": 7, "method": "{method}", "params": {params}}}'
    with _client(server) as client:
        answered = client.post("/a2a/solo/", content=body, headers={"A2A-Version": "1.0"})
        listed = client.get("/v1/runs").json()["data"]

    error = answered.json().get("error")
    assert error is not None and error["code"] == -32602, answered.text  # invalid params
    assert "Traceback" not in answered.text
    assert listed == []
    json.dumps(error)  # the answer itself is JSON a strict reader takes


# -- attack a4243b: what FastAPI parses itself, numbers written as text, booleans, headers --------------------

MALFORMED = ["{", '{"team": "solo", "input": "hi"} x', "", "[" * 100_000 + "]" * 100_000]
ROUTES = ["/v1/runs", "/v1/chat/completions", "/v1/runs/run_x/pending/q1", "/v1/runs/run_x/approvals/a1"]


@pytest.mark.parametrize("route", ROUTES)
def test_a_body_labelled_json_that_is_not_json_is_400_invalid_json_with_the_hint(
    serve: Any, tmp_path: Path, route: str
) -> None:
    server = serve([teamrun.load_team(solo_team(tmp_path))], tokens=frozenset({TOKEN}))
    with _client(server) as client:
        answers = [client.post(route, content=body) for body in MALFORMED]
        listed = client.get("/v1/runs").json()["data"]

    for body, answer in zip(MALFORMED, answers, strict=True):
        assert answer.status_code == 400, (body[:40], answer.text[:300])
        error = assert_error_shape(answer)
        assert error["code"] == "invalid_json", error
        assert "send a JSON object" in error["message"], error
    assert listed == []


@pytest.mark.parametrize("budget", ["timeout_s", "max_cost_usd", "max_steps"])
def test_a_budget_written_as_a_string_is_refused_naming_it(serve: Any, tmp_path: Path, budget: str) -> None:
    server = serve([teamrun.load_team(solo_team(tmp_path))], tokens=frozenset({TOKEN}))
    given = ["1e999", "Infinity", "NaN", "30", "0.5"]
    with _client(server) as client:
        answers = [client.post("/v1/runs", json={"team": "solo", "input": "hi", "budgets": {budget: g}}) for g in given]
        listed = client.get("/v1/runs").json()["data"]

    for answer in answers:
        message = _refused(answer, "budgets", budget)
        assert "a string, not a number" in message
    assert listed == []


@pytest.mark.parametrize("value", ["1", '"yes"', '"no"', "0"])
def test_a_chat_include_usage_that_is_not_a_boolean_is_refused(serve: Any, tmp_path: Path, value: str) -> None:
    server = serve([teamrun.load_team(solo_team(tmp_path))], tokens=frozenset({TOKEN}))
    body = (
        '{"model": "solo", "messages": [{"role": "user", "content": "hi"}], "stream": true, '
        f'"stream_options": {{"include_usage": {value}}}}}'
    )
    with _client(server) as client:
        refused = client.post("/v1/chat/completions", content=body)
        listed = client.get("/v1/runs").json()["data"]

    _refused(refused, "stream_options.include_usage")
    assert listed == []


@pytest.mark.parametrize(
    ("field", "values"),
    [
        ("temperature", ["true", '"hot"', '"0.5"']),
        ("max_tokens", ["true", '"10"', "-5", "0", "1.5"]),
        ("max_completion_tokens", ["true", '"10"']),
        ("n", ["true", '"2"']),
        ("top_p", ["false"]),
    ],
)
def test_a_chat_field_accepted_and_ignored_with_the_wrong_type_is_refused(
    serve: Any, tmp_path: Path, field: str, values: list[str]
) -> None:
    server = serve([teamrun.load_team(solo_team(tmp_path))], tokens=frozenset({TOKEN}))
    head = '{"model": "solo", "messages": [{"role": "user", "content": "hi"}], '
    with _client(server) as client:
        answers = [client.post("/v1/chat/completions", content=f'{head}"{field}": {value}}}') for value in values]
        right = client.post("/v1/chat/completions", content=f'{head}"{field}": 1}}')
    for answer in answers:
        _refused(answer, field)
    assert right.status_code == 200, right.text  # the right type is still accepted (and ignored)


def test_chat_budgets_are_checked_and_kept_as_on_runs(serve: Any, tmp_path: Path) -> None:
    server = serve([teamrun.load_team(solo_team(tmp_path))], tokens=frozenset({TOKEN}))
    chat = {"model": "solo", "messages": [{"role": "user", "content": "hi"}]}
    with _client(server) as client:
        boolean = client.post("/v1/chat/completions", json=chat | {"budgets": {"max_steps": True}})
        text = client.post("/v1/chat/completions", json=chat | {"budgets": {"max_steps": "3"}})
        too_high = client.post("/v1/chat/completions", json=chat | {"budgets": {"max_steps": 1000}})
        unknown = client.post("/v1/chat/completions", json=chat | {"budgets": {"max_stepz": 3}})
        kept = client.post("/v1/chat/completions", json=chat | {"budgets": {"max_steps": 3}})
        record = client.get(f"/v1/runs/{kept.headers['x-teamrun-run-id']}").json()

    assert "max_steps is true, a boolean" in _refused(boolean, "budgets")
    assert "a string, not a number" in _refused(text, "budgets", "max_steps")
    assert too_high.status_code == 422 and too_high.json()["error"]["code"] == "budget_too_high", too_high.text
    _refused(unknown, "max_stepz")
    assert kept.status_code == 200, kept.text
    assert record["status"] == "done", record


def test_a_thread_header_of_raw_non_ascii_bytes_is_400_naming_it(serve: Any, tmp_path: Path) -> None:
    store = open_store(tmp_path / "runs.db")
    server = serve([teamrun.load_team(solo_team(tmp_path), store=store)], tokens=frozenset({TOKEN}), store=store)
    chat = {"model": "solo", "messages": [{"role": "user", "content": "hdr"}]}
    with _client(server) as client:
        refused = client.post(
            "/v1/chat/completions", json=chat, headers={"X-Teamrun-Thread": "caf\xc3\xa9".encode("latin-1")}
        )
        listed = client.get("/v1/runs").json()["data"]

    assert refused.status_code == 400, refused.text
    error = assert_error_shape(refused)
    assert error["code"] == "invalid_thread" and "X-Teamrun-Thread" in error["message"], error
    assert listed == []


def test_the_approvals_route_with_a_store_takes_note_and_by_as_pending_does(serve: Any, tmp_path: Path) -> None:
    path = tmp_path / "stamper.yaml"
    path.write_text(APPROVAL_TEAM, encoding="utf-8")
    store = open_store(tmp_path / "runs.db")
    server = serve([teamrun.load_team(path, store=store)], tokens=frozenset({TOKEN}), store=store)
    with _client(server) as client:
        run_id = client.post("/v1/runs", json={"team": "stamper", "input": "go"}).json()["id"]
        until_status(client, run_id, "waiting")
        [item] = client.get("/v1/pending").json()["data"]
        said = client.post(
            f"/v1/runs/{run_id}/approvals/{item['id']}", json={"approve": False, "note": "not today", "by": "ana"}
        )
        empty_by = client.post(f"/v1/runs/{run_id}/approvals/{item['id']}", json={"approve": True, "by": ""})

    assert said.status_code == 200, said.text
    assert said.json()["answer"] == {"approved": False, "note": "not today"}, said.json()
    assert said.json()["answered_by"] == "ana", said.json()
    _refused(empty_by, "by")


def test_the_approvals_route_without_a_store_takes_note_and_by(serve: Any, tmp_path: Path) -> None:
    path = tmp_path / "stamper.yaml"
    path.write_text(APPROVAL_TEAM, encoding="utf-8")
    server = serve([teamrun.load_team(path)], tokens=frozenset({TOKEN}))
    with _client(server) as client:
        run_id = client.post("/v1/runs", json={"team": "stamper", "input": "go"}).json()["id"]
        approval = _waiting_approval(client, run_id)
        said = client.post(
            f"/v1/runs/{run_id}/approvals/{approval}", json={"approve": False, "note": "no", "by": "ana"}
        )
    assert said.status_code == 200, said.text


V03_MESSAGE = '{"message": {"role": "user", "messageId": "m1", "parts": [{"kind": "text", "text": "hi"}]}'


@pytest.mark.parametrize(
    ("method", "params", "named"),
    [
        ("message/send", V03_MESSAGE + ', "configuration": {"blocking": 1}}', "configuration.blocking"),
        ("message/send", V03_MESSAGE + ', "configuration": {"blocking": "no"}}', "configuration.blocking"),
        ("message/send", V03_MESSAGE + ', "configuration": {"historyLength": true}}', "configuration.historyLength"),
        ("tasks/get", '{"id": "t", "historyLength": true}', "historyLength"),
        ("tasks/get", '{"id": "t", "historyLength": "2"}', "historyLength"),
    ],
)
def test_an_a2a_v03_boolean_or_whole_number_param_of_another_type_is_invalid_params(
    serve: Any, tmp_path: Path, method: str, params: str, named: str
) -> None:
    server = serve([teamrun.load_team(solo_team(tmp_path))], tokens=frozenset({TOKEN}))
    body = f'{{"jsonrpc": "2.0", "id": 7, "method": "{method}", "params": {params}}}'
    with _client(server) as client:
        answered = client.post("/a2a/solo/", content=body)  # no A2A-Version: v0.3
        listed = client.get("/v1/runs").json()["data"]

    error = answered.json().get("error")
    assert error is not None and error["code"] == -32602, answered.text
    assert named in error["message"], error
    assert listed == []


@pytest.mark.parametrize("route", ROUTES[:2])
@pytest.mark.parametrize(("body", "kind"), [("[1]", "an array"), ("42", "a number"), ('"x"', "a string")])
def test_a_json_body_that_is_not_an_object_is_refused_saying_what_it_is(
    serve: Any, tmp_path: Path, route: str, body: str, kind: str
) -> None:
    """Not pydantic's "Input should be a valid dictionary or object to extract fields from" (attack a4243b)."""
    server = serve([teamrun.load_team(solo_team(tmp_path))], tokens=frozenset({TOKEN}))
    with _client(server) as client:
        message = _refused(client.post(route, content=body), f"the body is {kind}, not a JSON object")
    assert "dictionary" not in message
