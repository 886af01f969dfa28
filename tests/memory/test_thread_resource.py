"""Attack a44m item 3 (issue 44): a thread belongs to the resource of its first run.

``--resource B --thread a1``, where a1 was started with resource A, got A's earlier turns word for word as its
history, and B's turn was indexed under B. Such a run is refused now, as a thread of another team is: exit 2 from
the CLI, ``400 run_refused`` from POST /v1/runs and chat completions, a ``rejected`` task over A2A; the message
never names the other resource. A thread started without a resource takes the first one a run gives it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest
import sqlalchemy as sa

import teamrun
from teamrun.store import open_store
from teamrun.store.schema import memory_messages
from teamrun.testing.scripted import ScriptedModel, text
from tests.a2a.served_agents import AUTH, TOKEN
from tests.cli_processes import teamrun as teamrun_cli
from tests.serve.conftest import RunningServer, ServeSettings
from tests.waiting import wait_until

OWNER = "acme-org-7731"
TEAM = """\
version: 1
name: desk
supervisor: support
defaults: {model: offline}
agents:
  support: {instructions: Help the customer.}
memory:
  embedding: {model: offline}
  recall:
    support: {messages: {top_k: 3, min_score: 0.0}}
"""
DAMAGED = "My parcel to Lisbon arrived damaged, order 7731"


def _execute(team: Path, store: Path, task: str, *extra: str) -> Any:
    return teamrun_cli("execute", str(team), "-i", task, "--store", str(store), "--progress", "none", *extra)


def test_a_thread_of_another_resource_is_refused_from_the_cli_without_naming_it(tmp_path: Path) -> None:
    team, store = tmp_path / "desk.yaml", tmp_path / "runs.db"
    team.write_text(TEAM, encoding="utf-8")

    first = _execute(team, store, DAMAGED, "--resource", OWNER, "--thread", "a1")
    other = _execute(team, store, "Lisbon parcel", "--resource", "globex", "--thread", "a1")
    none = _execute(team, store, "Lisbon parcel", "--thread", "a1")
    again = _execute(team, store, "Any news?", "--resource", OWNER, "--thread", "a1", "--json")

    assert first.returncode == 0, first.stderr
    for refused in (other, none):
        assert refused.returncode == 2, refused.stdout + refused.stderr
        assert "thread 'a1' belongs to" in refused.stderr and "give another --thread id" in refused.stderr
        assert OWNER not in refused.stdout + refused.stderr
        assert "Traceback" not in refused.stderr
    assert "belongs to another resource" in other.stderr
    assert "this run was given none" in none.stderr
    assert again.returncode == 0, again.stderr
    with open_store(store) as opened:
        messages = opened.threads.messages("a1")
        with opened.engine.connect() as conn:  # the index holds the thread under its own resource only
            owners = set(
                conn.execute(sa.select(memory_messages.c.resource).where(memory_messages.c.thread_id == "a1")).scalars()
            )
    assert [m.content for m in messages if m.role == "user"] == [DAMAGED, "Any news?"]
    assert owners == {OWNER}
    assert json.loads(again.stdout)["status"] == "done"


def test_a_thread_started_without_a_resource_takes_the_first_one_given(tmp_path: Path) -> None:
    team, store = tmp_path / "desk.yaml", tmp_path / "runs.db"
    team.write_text(TEAM, encoding="utf-8")

    plain = _execute(team, store, "hello", "--thread", "t1")
    taken = _execute(team, store, "hello again", "--resource", OWNER, "--thread", "t1")
    other = _execute(team, store, "and me?", "--resource", "globex", "--thread", "t1")

    assert plain.returncode == 0 and taken.returncode == 0, plain.stderr + taken.stderr
    assert other.returncode == 2 and "belongs to another resource" in other.stderr, other.stderr


def _a2a(context: str, resource: str) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "SendMessage",
        "params": {
            "message": {
                "messageId": f"m-{resource}",
                "role": "ROLE_USER",
                "contextId": context,
                "parts": [{"text": "Lisbon parcel"}],
                "metadata": {"teamrun": {"resource": resource}},
            },
            "configuration": {"blocking": True},
        },
    }


def test_a_thread_of_another_resource_is_refused_over_http_and_a2a(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("TEAMRUN_STORE", raising=False)
    path = tmp_path / "desk.yaml"
    path.write_text(TEAM, encoding="utf-8")
    store = open_store(tmp_path / "runs.db")
    model = ScriptedModel({"support": [text("Sorry about order 7731.")]})
    team = teamrun.load_team(path, store=store, chat_model=model)
    server = RunningServer([team], ServeSettings(store=store, tokens=frozenset({TOKEN}))).start()
    chat = {"model": "desk", "messages": [{"role": "user", "content": "Lisbon parcel"}]}
    try:
        with httpx.Client(base_url=server.url, headers=AUTH, timeout=120) as client:
            started = client.post(
                "/v1/runs", json={"team": "desk", "input": DAMAGED, "thread": "h1", "resource": OWNER}
            )
            assert started.status_code == 201, started.text
            run = started.json()["id"]
            wait_until(lambda: client.get(f"/v1/runs/{run}").json()["status"] != "running", "the first run ends")
            posted = client.post(
                "/v1/runs", json={"team": "desk", "input": "Lisbon parcel", "thread": "h1", "resource": "globex"}
            ).json()
            ended = wait_until(
                lambda: (seen := client.get(f"/v1/runs/{posted['id']}").json())["status"] != "running" and seen,
                "the second run is refused",
            )
            chatted = client.post(
                "/v1/chat/completions", json={**chat, "resource": "globex"}, headers={"X-Teamrun-Thread": "h1"}
            )
            rpc = client.post("/a2a/desk", json=_a2a("h1", "globex"), headers={"A2A-Version": "1.0"})
    finally:
        server.stop()
    assert ended["status"] == "failed" and "belongs to another resource" in ended["error"], ended
    assert OWNER not in json.dumps(ended)
    assert chatted.status_code == 400, chatted.text
    error = chatted.json()["error"]
    assert error["code"] == "run_refused" and "belongs to another resource" in error["message"], error
    assert OWNER not in chatted.text
    task = rpc.json()["result"]["task"]
    assert task["status"]["state"] == "TASK_STATE_REJECTED", rpc.text
    assert "conversation of another resource" in rpc.text and OWNER not in rpc.text
    assert [m.content for m in store.threads.messages("h1") if m.role == "user"] == [DAMAGED]
    assert len(model.calls) == 1  # the refused runs called no model
