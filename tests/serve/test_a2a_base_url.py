"""An A2A client given a served agent's base URL: with its trailing slash (``http://H/a2a/<team>/``, as docs/a2a.md
says) the card resolves by standard URL resolution, as the JavaScript SDK's ``createFromUrl`` resolves it; without
it, what that resolution asks for (``/a2a/.well-known/agent-card.json``) is a 404 naming the right URLs."""

from __future__ import annotations

from pathlib import Path
from typing import Any
from urllib.parse import urljoin

import httpx

import teamrun
from tests.serve.conftest import TOKEN, solo_team

AUTH = {"Authorization": f"Bearer {TOKEN}"}
WELL_KNOWN = ".well-known/agent-card.json"


def test_a_base_url_with_its_slash_resolves_the_card_and_one_without_says_where_it_is(
    serve: Any, tmp_path: Path
) -> None:
    server = serve([teamrun.load_team(solo_team(tmp_path))], tokens=frozenset({TOKEN}))
    base = f"{server.url}/a2a/solo/"
    with httpx.Client(timeout=60) as client:
        card = client.get(urljoin(base, WELL_KNOWN))
        beside = client.get(urljoin(base.rstrip("/"), WELL_KNOWN))  # the base URL without its slash
        call = {"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "no-such-task"}}
        at_base = client.post(base, json=call, headers={**AUTH, "A2A-Version": "1.0"})

    assert card.status_code == 200 and card.json()["name"] == "solo", card.text
    assert beside.request.url.path == "/a2a/.well-known/agent-card.json"
    assert beside.status_code == 404, beside.text
    error = beside.json()["error"]
    assert error["data"] == {"reason": "AGENT_CARD_NOT_FOUND"}
    assert f"{server.url}/a2a/solo/.well-known/agent-card.json" in error["message"], error
    assert f"with its trailing slash ({server.url}/a2a/<team>/)" in error["message"], error
    assert at_base.status_code == 200 and "no-such-task" in at_base.json()["error"]["message"], at_base.text
