"""Issue 42 item 6, the served A2A agent: ``ListTasks`` lists the team's tasks from the store (every worker's and
process's), not only those this server holds in memory."""

from __future__ import annotations

import asyncio
import json
import threading
from pathlib import Path
from typing import Any

import httpx
import pytest

import teamrun
from teamrun.store import open_store
from teamrun.store.pending import PendingRepository
from teamrun.testing.scripted import ScriptedModel, text, tool_calls
from tests.serve.conftest import TOKEN, until_status

HEADERS = {"Authorization": f"Bearer {TOKEN}", "A2A-Version": "1.0"}
HANG_GUARD_S = 60.0
"""Only so a broken test fails instead of hanging; nothing is timed."""


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


def answer(run_id: str, item: str, words: str) -> dict[str, Any]:
    message = {
        "messageId": f"m-{item}",
        "role": "ROLE_USER",
        "taskId": run_id,
        "parts": [{"text": words}],
        "metadata": {"item": item},
    }
    return {"message": message}


def test_a_blocking_answer_racing_another_answers_the_tasks_final_state_not_working(
    serve: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two blocking A2A answers to the two questions of one task: B reads the task waiting, A's answer continues
    it, B's answer lands while that continuation runs but after it looked for q2; the continuation ends waiting
    with B's answer untaken and is continued again at once. Both blocking calls answer the task's final state
    (completed), neither ``working`` nor an ``input-required`` with nothing left to ask."""
    from teamrun.serve.answers import AnswerService
    from tests.serve.test_web_pending import ask_team, said

    store = open_store(tmp_path / "runs.db")
    asks = tool_calls(("ask_region", {"question": "Which region?"}), ("ask_region", {"question": "And the backup?"}))
    model = ScriptedModel({"lead": [asks, said]})
    server = serve(
        [teamrun.load_team(ask_team(tmp_path), chat_model=model, store=store)], tokens=frozenset({TOKEN}), store=store
    )
    with httpx.Client(base_url=server.url, headers=HEADERS, timeout=120) as client:
        run_id = client.post("/v1/runs", json={"team": "asker", "input": "deploy"}).json()["id"]
        until_status(client, run_id, "waiting")

    b_at_answer, b_go, q2_opened, q2_go, b_recorded = (threading.Event() for _ in range(5))
    service_answer = AnswerService.answer

    async def held_answer(self: AnswerService, item: Any, *args: Any, **kwargs: Any) -> Any:
        if item.item_id == "q2":  # B has read the task waiting; it answers once A's continuation looked for q2
            b_at_answer.set()
            assert await asyncio.to_thread(b_go.wait, HANG_GUARD_S)
        return await service_answer(self, item, *args, **kwargs)

    open_item, answer_and_claim = PendingRepository.open_item, PendingRepository.answer_and_claim

    def held_open(self: PendingRepository, *args: Any, **kwargs: Any) -> Any:
        record = open_item(self, *args, **kwargs)
        if record.item_id == "q2" and record.status == "pending":  # the continuation found q2 unanswered
            q2_opened.set()
            assert q2_go.wait(HANG_GUARD_S)
        return record

    def recorded(self: PendingRepository, run: str, item_id: str, *args: Any, **kwargs: Any) -> Any:
        outcome = answer_and_claim(self, run, item_id, *args, **kwargs)
        if item_id == "q2":
            b_recorded.set()
        return outcome

    monkeypatch.setattr(AnswerService, "answer", held_answer)
    monkeypatch.setattr(PendingRepository, "open_item", held_open)
    monkeypatch.setattr(PendingRepository, "answer_and_claim", recorded)
    results: dict[str, Any] = {}

    def send_answer(key: str, item: str, words: str) -> None:
        with httpx.Client(base_url=server.url, headers=HEADERS, timeout=120) as client:
            results[key] = rpc(client, "asker", "SendMessage", answer(run_id, item, words))

    second = threading.Thread(target=send_answer, args=("B", "q2", "us-east-1"))
    second.start()
    assert b_at_answer.wait(HANG_GUARD_S)
    first = threading.Thread(target=send_answer, args=("A", "q1", "eu-west-1"))
    first.start()
    assert q2_opened.wait(HANG_GUARD_S)  # A's answer continued the task; it found q2 unanswered
    b_go.set()
    assert b_recorded.wait(HANG_GUARD_S)  # B's answer is recorded while that continuation runs
    q2_go.set()
    first.join(HANG_GUARD_S)
    second.join(HANG_GUARD_S)
    states = {key: result["task"]["status"]["state"] for key, result in results.items()}
    assert states == {"A": "TASK_STATE_COMPLETED", "B": "TASK_STATE_COMPLETED"}, results


def test_the_stream_of_an_answer_does_not_announce_the_replayed_delegations_as_new(serve: Any, tmp_path: Path) -> None:
    """The lead delegates to a worker, then asks a person; a streamed answer continues the run, which replays the
    finished delegation through its journal: the stream tells the answer and the end, not the delegation again."""
    from teamrun.testing.scripted import delegate, tool_call
    from tests.serve.test_web_pending import said

    team_file = tmp_path / "team.yaml"
    team_file.write_text(
        """\
version: 1
name: asker
supervisor: lead
agents:
  lead:
    description: Has the region looked up, then asks.
    tools: [ask_region]
    delegates_to: [scout]
  scout:
    description: Looks things up.
tools:
  ask_region:
    person: {choices: [eu-west-1, us-east-1]}
""",
        encoding="utf-8",
    )
    model = ScriptedModel(
        {
            "lead": [delegate("scout", task="look up the regions"), tool_call("ask_region", question="Which?"), said],
            "scout": [text("two regions")],
        }
    )
    store = open_store(tmp_path / "runs.db")
    server = serve(
        [teamrun.load_team(team_file, chat_model=model, store=store)], tokens=frozenset({TOKEN}), store=store
    )
    with httpx.Client(base_url=server.url, headers=HEADERS, timeout=120) as client:
        run_id = client.post("/v1/runs", json={"team": "asker", "input": "deploy"}).json()["id"]
        until_status(client, run_id, "waiting")
        first = client.get(f"/v1/runs/{run_id}/events").text
        body = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "SendStreamingMessage",
            "params": answer(run_id, "q1", "us-east-1"),
        }
        with client.stream("POST", "/a2a/asker", json=body) as response:
            lines = [line for line in response.iter_lines() if line.startswith("data:")]
    assert "look up the regions" in first  # the delegation happened before the question
    events = [json.loads(line.removeprefix("data:")) for line in lines]
    said_lines = json.dumps(events)
    assert "TASK_STATE_COMPLETED" in said_lines, said_lines
    assert "asked scout" not in said_lines, said_lines  # replayed, not new
