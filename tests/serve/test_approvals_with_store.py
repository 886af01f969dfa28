"""With a store, ``POST /v1/runs/{run}/approvals/{id}`` answers the approval ``GET /v1/pending`` lists (the
attacker's D3: it said ``404 approval_not_found`` while ``/pending/{id}`` with the same body worked): through the
one answer service, so the run continues and a second answer is ``409``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx

import teamrun
from tests.serve.conftest import until_status


def test_the_approvals_route_answers_a_pending_approval_held_in_the_store(serve: Any, tmp_path: Path) -> None:
    from teamrun.store import open_store
    from teamrun.testing.scripted import ScriptedModel, tool_call
    from tests.serve.test_approvals import last_tool_result, stamp_team

    marker = tmp_path / "stamp.txt"
    model = ScriptedModel({"lead": [tool_call("stamp", path=str(marker)), last_tool_result]})
    store = open_store(tmp_path / "runs.db")
    server = serve([teamrun.load_team(stamp_team(tmp_path), chat_model=model, store=store)], store=store)
    with httpx.Client(base_url=server.url, timeout=120) as client:
        run_id = client.post("/v1/runs", json={"team": "stamper", "input": "stamp it"}).json()["id"]
        until_status(client, run_id, "waiting")
        [item] = client.get("/v1/pending").json()["data"]
        said = client.post(f"/v1/runs/{run_id}/approvals/{item['id']}", json={"approve": True})
        assert said.status_code == 200, said.text
        done = until_status(client, run_id, "done")
        again = client.post(f"/v1/runs/{run_id}/approvals/{item['id']}", json={"approve": False})
        unknown = client.post(f"/v1/runs/{run_id}/approvals/a99", json={"approve": True})
    assert said.json()["id"] == item["id"] and said.json()["answer"] == {"approved": True, "note": None}
    assert marker.read_text() == "ran"
    assert "stamped" in done["final_text"]
    assert again.status_code == 409 and again.json()["error"]["code"] == "item_answered"
    assert unknown.status_code == 404
