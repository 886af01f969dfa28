"""Issue 42 item 6, the served A2A agent: ``ListTasks`` lists the team's tasks from the store (every worker's and
process's), not only those this server holds in memory."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx

import teamrun
from teamrun.store import open_store
from teamrun.testing.scripted import ScriptedModel, text
from tests.serve.conftest import TOKEN

HEADERS = {"Authorization": f"Bearer {TOKEN}", "A2A-Version": "1.0"}


def rpc(client: httpx.Client, team: str, method: str, params: dict[str, Any]) -> Any:
    """One A2A v1.0 JSON-RPC call: its ``result`` (the test fails on an ``error``)."""
    answer = client.post(f"/a2a/{team}", json={"jsonrpc": "2.0", "id": 1, "method": method, "params": params}).json()
    assert "result" in answer, answer
    return answer["result"]


def send(words: str) -> dict[str, Any]:
    return {"message": {"messageId": f"m-{words}", "role": "ROLE_USER", "parts": [{"text": words}]}}


def solo(tmp_path: Path) -> Path:
    path = tmp_path / "solo.yaml"
    path.write_text("version: 1\nname: solo\nsupervisor: lead\nagents:\n  lead:\n    description: Answers.\n")
    return path


def test_list_tasks_with_a_store_lists_the_runs_another_process_ran(serve: Any, tmp_path: Path) -> None:
    store = open_store(tmp_path / "runs.db")
    elsewhere = teamrun.load_team(
        solo(tmp_path), chat_model=ScriptedModel({"lead": [text("from elsewhere")]}), store=store
    )
    other = elsewhere.run_sync("ran by another process", journal=True)  # another worker or process, same store
    assert other.status == "done"
    here = teamrun.load_team(solo(tmp_path), chat_model=ScriptedModel({"lead": [text("from here")]}), store=store)
    server = serve([here], tokens=frozenset({TOKEN}), store=store)
    with httpx.Client(base_url=server.url, headers=HEADERS, timeout=120) as client:
        mine = rpc(client, "solo", "SendMessage", send("ran here"))["task"]
        listed = rpc(client, "solo", "ListTasks", {})
    ids = [task["id"] for task in listed["tasks"]]
    assert ids == [mine["id"], other.run_id], ids  # newest first, this server's and the store's
    assert listed["totalSize"] == 2
    assert {task["status"]["state"] for task in listed["tasks"]} == {"TASK_STATE_COMPLETED"}
