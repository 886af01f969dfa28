"""Runs a server holds that another process continued: the server's answers follow the store, never what it
held in memory (``GET /v1/runs``, ``?status=``, ``GET /v1/runs/{id}``, A2A ``GetTask``).

Two served runs wait for a person; ``teamrun answer`` finishes one, a cancel then ``teamrun resume`` finishes
the other; the store says ``done`` for both, and so must the server.
"""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path
from typing import Any

import httpx

import teamrun
from teamrun.cli import main
from teamrun.store import open_store
from teamrun.testing.scripted import ScriptedModel, tool_call
from tests.serve.conftest import TOKEN, until_status
from tests.serve.test_web_pending import ask_team

AUTH = {"Authorization": f"Bearer {TOKEN}"}


def _cli(*args: str) -> str:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(args))
    assert code == 0 and "Traceback" not in err.getvalue(), err.getvalue()
    return out.getvalue()


def test_the_run_list_and_records_follow_the_store_for_runs_continued_elsewhere(serve: Any, tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    store = open_store(db)
    script = [tool_call("ask_region", question="Which region?")] * 2  # each run asks; the commands continue them
    team = teamrun.load_team(ask_team(tmp_path), chat_model=ScriptedModel({"lead": script}), store=store)
    server = serve([team], tokens=frozenset({TOKEN}), store=store)
    with httpx.Client(base_url=server.url, headers=AUTH, timeout=120) as client:
        first = client.post("/v1/runs", json={"team": "asker", "input": "deploy a"}).json()["id"]
        until_status(client, first, "waiting")
        second = client.post("/v1/runs", json={"team": "asker", "input": "deploy b"}).json()["id"]
        until_status(client, second, "waiting")

        _cli("answer", first, "q1", "us-east-1", "--store", str(db))  # continued by this command, to its end
        assert client.post(f"/v1/runs/{second}/cancel").status_code == 202
        resumed = json.loads(_cli("resume", second, "--store", str(db), "--yes", "--json", "--progress", "none"))
        assert resumed["status"] == "done", resumed

        listed = {row["id"]: row["status"] for row in client.get("/v1/runs").json()["data"]}
        waiting = [row["id"] for row in client.get("/v1/runs", params={"status": "waiting"}).json()["data"]]
        done = {row["id"] for row in client.get("/v1/runs", params={"status": "done"}).json()["data"]}
        records = {run_id: client.get(f"/v1/runs/{run_id}").json() for run_id in (first, second)}
        cancel = client.post(f"/v1/runs/{second}/cancel")
        events = client.get(f"/v1/runs/{second}/events").text  # what ran here, then the run's end as the store has it
        task = client.post(
            "/a2a/asker",
            json={"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": second}},
            headers={"A2A-Version": "1.0"},
        ).json()

    assert (listed[first], listed[second]) == ("done", "done"), listed
    assert first not in waiting and second not in waiting, waiting
    assert {first, second} <= done, done
    assert records[first]["status"] == "done", records[first]
    assert records[second]["status"] == "done", records[second]
    assert records[second]["final_text"] == resumed["final_text"]
    assert task["result"]["status"]["state"] == "TASK_STATE_COMPLETED", task
    assert cancel.status_code == 409 and "is not running (it is done)" in cancel.json()["error"]["message"], cancel.text
    result = json.loads(events.rsplit("event: result\ndata: ", 1)[1])
    assert (result["status"], result["final_text"]) == ("done", resumed["final_text"]), result
