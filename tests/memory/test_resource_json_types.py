"""Attack a44b item 7: a resource id that is not text is named by what it was sent as in JSON, alike over
A2A and POST /v1/runs.

A2A's metadata (a protobuf Struct) reads ``42`` as the float 42.0 and POST /v1/runs keeps the int: they said
"not float" and "not int" for the same JSON. Both say "a number" now (and "a boolean", "an array", "an object").
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest

import teamrun
from teamrun.store import open_store
from teamrun.testing.scripted import ScriptedModel
from tests.a2a.served_agents import AUTH, TOKEN
from tests.serve.conftest import RunningServer, ServeSettings

TEAM = """\
version: 1
name: desk
supervisor: support
agents:
  support: {instructions: Help the customer.}
memory:
  embedding: {model: offline}
  save: [support]
"""


def _a2a(resource: Any) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "SendMessage",
        "params": {
            "message": {
                "messageId": "m1",
                "role": "ROLE_USER",
                "parts": [{"text": "hi"}],
                "metadata": {"teamrun": {"resource": resource}},
            }
        },
    }


@pytest.mark.parametrize(
    ("sent", "said"), [(42, "a number"), (4.5, "a number"), (True, "a boolean"), (["a"], "an array"), ({}, "an object")]
)
def test_a_resource_id_that_is_not_text_is_named_by_its_json_type_over_a2a_and_http(
    sent: Any, said: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("TEAMRUN_STORE", raising=False)
    path = tmp_path / "desk.yaml"
    path.write_text(TEAM, encoding="utf-8")
    store = open_store(tmp_path / "runs.db")
    team = teamrun.load_team(path, store=store, chat_model=ScriptedModel({"support": []}))
    server = RunningServer([team], ServeSettings(store=store, tokens=frozenset({TOKEN}))).start()
    try:
        with httpx.Client(base_url=server.url, headers=AUTH, timeout=120) as client:
            rpc = client.post("/a2a/desk", json=_a2a(sent), headers={"A2A-Version": "1.0"})
            posted = client.post("/v1/runs", json={"team": "desk", "input": "hi", "resource": sent})
    finally:
        server.stop()
    error = rpc.json()["error"]
    assert error["code"] == -32602, rpc.text
    assert (
        f"metadata.teamrun.resource: a resource id is text (e.g. a user id like 'customer-42'), not {said}"
        in (error["message"])
    )
    assert posted.status_code == 422 and f"not {said}" in posted.text, posted.text
    for python_name in ("float", "int", "bool", "list", "dict"):
        assert f"not {python_name}" not in error["message"] and f"not {python_name}" not in posted.text
