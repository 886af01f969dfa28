"""A JSON body is read as JSON whatever its ``Content-Type`` (the attacker's D6: ``curl -d '{...}'`` sends
``application/x-www-form-urlencoded`` and got ``422 invalid_request: body: Input should be a valid dictionary``),
as the A2A endpoint reads it; a body that is not JSON says so (``400 invalid_json``) and names the type to send."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest

import teamrun
from tests.serve.conftest import solo_team, until_status

BODY = json.dumps({"team": "solo", "input": "hello"})


@pytest.mark.parametrize("content_type", ["application/x-www-form-urlencoded", "text/plain", None])
def test_a_json_body_is_read_whatever_its_content_type(serve: Any, tmp_path: Path, content_type: str | None) -> None:
    server = serve([teamrun.load_team(solo_team(tmp_path))])
    headers = {"content-type": content_type} if content_type else {}
    with httpx.Client(base_url=server.url, timeout=60) as client:
        created = client.post("/v1/runs", content=BODY, headers=headers)
        assert created.status_code == 201, created.text
        done = until_status(client, created.json()["id"], "done")
    assert done["final_text"]


def test_a_body_that_is_not_json_says_so_and_names_the_content_type(serve: Any, tmp_path: Path) -> None:
    server = serve([teamrun.load_team(solo_team(tmp_path))])
    with httpx.Client(base_url=server.url, timeout=60) as client:
        form = client.post("/v1/runs", data={"team": "solo", "input": "hello"})
        surrogate = client.post(
            "/v1/runs", content='{"team": "solo", "input": "\\ud800"}', headers={"content-type": "text/plain"}
        )
        listed = client.get("/v1/runs").json()["data"]
    assert form.status_code == 400, form.text
    error = form.json()["error"]
    assert error["code"] == "invalid_json" and "Content-Type: application/json" in error["message"]
    assert "valid dictionary" not in error["message"]
    assert surrogate.status_code == 400 and surrogate.json()["error"]["code"] == "invalid_text"
    assert listed == []
