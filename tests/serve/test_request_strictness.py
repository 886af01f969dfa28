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
