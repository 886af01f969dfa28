"""Each served run's own vars, budgets and approvals on ONE served team (no copy of the team per run), and a
waiting run continued over HTTP with the vars it was started with."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx

import teamrun
from teamrun.store import open_store
from teamrun.store.journal import StoreJournal
from teamrun.testing.scripted import ScriptedCall, ScriptedModel, tool_call
from tests.engine.test_run_options import team_file
from tests.serve.conftest import until_run, until_status
from tests.serve.sse import sse_events


def _lang(call: ScriptedCall) -> str:
    return str(call.messages[0]["content"]).removeprefix("Answer in ").split(".")[0]


def _guarded_then_answer(call: ScriptedCall) -> Any:
    lang = _lang(call)
    return tool_call("guarded", note=lang) if not call.tool_results else f"{lang}: {call.tool_results[0]}"


def _ask_then_answer(call: ScriptedCall) -> Any:
    lang = _lang(call)
    return (
        tool_call("ask_ops", question=f"ship in {lang}?")
        if not call.tool_results
        else f"{lang}: {call.tool_results[0]}"
    )


def _follow(client: httpx.Client, run_id: str) -> list[tuple[str, Any]]:
    with client.stream("GET", f"/v1/runs/{run_id}/events") as response:
        return list(sse_events(response.iter_lines()))


def test_two_runs_of_one_served_team_each_have_their_own_vars_budgets_and_approvals(serve: Any, tmp_path: Path) -> None:
    model = ScriptedModel({"lead": [_guarded_then_answer] * 4})
    team = teamrun.load_team(team_file(tmp_path, "served_options_tools"), chat_model=model)
    own_approver, own_desk, own_config = team.approver, team.desk, team.config
    server = serve([team])

    with httpx.Client(base_url=server.url, timeout=60) as client:
        fr = client.post(
            "/v1/runs",
            json={"team": "options", "input": "go", "vars": {"lang": "French"}, "budgets": {"max_steps": 1}},
        ).json()["id"]
        de = client.post("/v1/runs", json={"team": "options", "input": "go", "vars": {"lang": "German"}}).json()["id"]
        asked_fr = until_run(client, fr, lambda r: r["approvals"], "an approval asked")["approvals"]
        asked_de = until_run(client, de, lambda r: r["approvals"], "an approval asked")["approvals"]
        # both wait for their approval at once: neither is answered yet
        still_fr = client.get(f"/v1/runs/{fr}").json()
        approved = client.post(f"/v1/runs/{fr}/approvals/{asked_fr[0]['id']}", json={"approve": True})
        denied = client.post(f"/v1/runs/{de}/approvals/{asked_de[0]['id']}", json={"approve": False})
        events_fr, events_de = _follow(client, fr), _follow(client, de)
        record_fr, record_de = client.get(f"/v1/runs/{fr}").json(), client.get(f"/v1/runs/{de}").json()

    model.assert_complete()
    assert still_fr["status"] == "running" and [a["status"] for a in still_fr["approvals"]] == ["pending"]
    assert [(a["tool"], a["arguments"]) for a in asked_fr] == [("guarded", {"note": "French"})]
    assert [(a["tool"], a["arguments"]) for a in asked_de] == [("guarded", {"note": "German"})]
    assert approved.status_code == 200 and denied.status_code == 200
    assert record_fr["final_text"] == "French: guarded ran (French)"
    assert record_de["final_text"].startswith("German: ") and "denied" in record_de["final_text"]
    assert record_fr["status"] == "budget_exhausted" and record_fr["result"]["limits_in_force"]["limits"] == {
        "max_steps": 1
    }
    assert record_de["status"] == "done" and record_de["result"]["limits_in_force"]["limits"] == {"max_steps": 5}
    assert {d["run_id"] for n, d in events_fr if n != "result"} == {fr}
    assert {d["run_id"] for n, d in events_de if n != "result"} == {de}
    assert team.approver is own_approver and team.desk is own_desk and team.config is own_config
    assert team.vars == {"lang": "English"}


def test_a_served_run_waiting_for_a_person_continues_with_the_vars_and_budgets_it_was_started_with(
    serve: Any, tmp_path: Path
) -> None:
    store = open_store(tmp_path / "runs.db")
    model = ScriptedModel({"lead": [_ask_then_answer] * 2})
    team = teamrun.load_team(team_file(tmp_path, "served_options_tools"), chat_model=model)
    server = serve([team], store=store)

    with httpx.Client(base_url=server.url, timeout=60) as client:
        run_id = client.post(
            "/v1/runs", json={"team": "options", "input": "go", "vars": {"lang": "French"}, "budgets": {"max_steps": 3}}
        ).json()["id"]
        waiting = until_status(client, run_id, "waiting")
        items = client.get("/v1/pending", params={"run_id": run_id}).json()["data"]
        answered = client.post(f"/v1/runs/{run_id}/pending/{items[0]['id']}", json={"answer": "oui"})
        done = until_status(client, run_id, "done")

    model.assert_complete()
    assert waiting["result"]["limits_in_force"]["limits"] == {"max_steps": 3}
    assert [(i["question"], i["run_id"]) for i in items] == [("ship in French?", run_id)]
    assert answered.status_code == 200
    assert done["final_text"].startswith("French: ") and "oui" in done["final_text"]
    assert done["result"]["limits_in_force"]["limits"] == {"max_steps": 3}  # the request's budgets, kept
    record = StoreJournal(store).get_run(run_id)
    assert record is not None and record.vars == {"lang": "French"} and record.attempts == 2
    assert record.limits == {"max_steps": 3}
    assert team.store is store  # the server's store, set once when the app was made
