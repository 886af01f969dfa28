"""A2A parameter errors say what is wrong in one line, without echoing a validator's dump or the number sent (the
attacker's D7): a v0.3 ``tasks/get`` with ``historyLength`` 1e20 (a whole number past ±2^53: ``-32602`` with
``data.reason: INVALID_NUMBER``), ``"abc"`` or ``1.5`` (one line naming the field); a v1.0 ``GetTask`` with
``historyLength: 1e300`` (``INVALID_NUMBER``, no 300-digit echo), or 300 nines as text (v0.3: ``-32603`` with
the digits, now ``-32602 INVALID_NUMBER``; v1.0's ``parseError`` says ``<300 digits>``); a message whose
``metadata.item`` is a number (said as sent, ``5``, not protobuf's ``5.0``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx

import teamrun
from tests.a2a.served_agents import AUTH, TOKEN
from tests.serve.conftest import REPO, serve, solo_team, until_status

__all__ = ["serve"]


def call(server: Any, team: str, method: str, params: Any, **headers: str) -> dict[str, Any]:
    body = {"jsonrpc": "2.0", "id": 7, "method": method, "params": params}
    answer = httpx.post(f"{server.url}/a2a/{team}", json=body, headers={**AUTH, **headers}, timeout=120)
    assert answer.status_code == 200, answer.text
    error: dict[str, Any] = answer.json()["error"]
    return error


def test_v03_params_that_do_not_fit_name_the_field_in_one_line(serve: Any, tmp_path: Path) -> None:
    server = serve([teamrun.load_team(solo_team(tmp_path))], tokens=frozenset({TOKEN}))
    huge = call(server, "solo", "tasks/get", {"id": "run_x", "historyLength": 1e20})
    v10 = call(server, "solo", "GetTask", {"id": "run_x", "historyLength": 1e300}, **{"A2A-Version": "1.0"})
    assert huge["code"] == -32602 and huge["data"] == {"reason": "INVALID_NUMBER"}, huge
    assert "historyLength" in huge["message"] and "int_parsing" not in huge["message"]
    assert v10["code"] == -32602 and v10.get("data") == {"reason": "INVALID_NUMBER"}, v10
    assert "0" * 20 not in json.dumps(v10), v10
    nines = "9" * 300  # a whole number as text: the v0.3 layer reads it as an int protobuf cannot hold
    text03 = call(server, "solo", "tasks/get", {"id": "run_x", "historyLength": nines})
    text10 = call(server, "solo", "GetTask", {"id": "run_x", "historyLength": nines}, **{"A2A-Version": "1.0"})
    assert text03["code"] == -32602, text03  # was -32603; a number sent as text is not a number (its JSON type)
    assert "historyLength is a string, not a whole number" in text03["message"], text03
    assert text10["code"] == -32602 and "<300 digits>" in json.dumps(text10), text10
    assert "9" * 20 not in json.dumps(text03) + json.dumps(text10)
    for bad in ("abc", 1.5):
        error = call(server, "solo", "tasks/get", {"id": "run_x", "historyLength": bad})
        said = error["message"]
        assert error["code"] == -32602, error
        assert said.startswith("params do not fit tasks/get: ") and "historyLength" in said, said
        assert "[type=" not in said and "input_value" not in said and "\n" not in said, said


def test_a_number_as_metadata_item_is_refused_as_sent(serve: Any, tmp_path: Path) -> None:
    from teamrun.store import open_store

    store = open_store(tmp_path / "runs.db")
    team = teamrun.load_team(REPO / "teams" / "launch-signoff.yaml", model="offline", store=store)
    server = serve([team], store=store, tokens=frozenset({TOKEN}))
    with httpx.Client(base_url=server.url, headers=AUTH, timeout=120) as client:
        run_id = client.post("/v1/runs", json={"team": "launch-signoff", "input": "Launch Falcon"}).json()["id"]
        until_status(client, run_id, "waiting")
    said = {
        "role": "user",
        "messageId": "m1",
        "kind": "message",
        "taskId": run_id,
        "parts": [{"kind": "text", "text": "eu-west-1"}],
        "metadata": {"item": 5},
    }
    error = call(server, "launch-signoff", "message/send", {"message": said})
    assert error["code"] == -32602, error
    assert "metadata.item" in error["message"] and "not 5" in error["message"], error
    assert "5.0" not in error["message"], error
