"""The served A2A agent's corners an attacker found (/work/attack/a2a-serve.md D6, D8, D13), driven with a2a-sdk's
client or JSON-RPC over HTTP against the app served by uvicorn (the ``serve`` fixture) on a SQLite store:

- a question (or an approval's arguments) holding a team secret is stored masked, for a served run and a CLI run;
- ``ListTasks`` with an unknown ``status`` is ``-32602`` naming the states;
- a second answer to an item already answered is ``-32004`` saying who answered it and when;
- an ``interrupted`` task's ``status.timestamp`` is when its run last showed life, not the time of the read;
- a ``rejected`` task (``contextId`` of another team's conversation) says so in A2A's words, naming no team;
- ``SubscribeToTask`` on a task another server runs is refused as ``CancelTask`` is;
- CORS lets a browser send what the a2a-sdk client sends (``A2A-Version``...).
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

import teamrun
from teamrun.cli import main
from tests.a2a.served_agents import TOKEN, agent, collect, message, state_name, text_of
from tests.serve.conftest import serve

__all__ = ["serve"]

SECRET = "sup3rs3cretvalue99"
ASKER = """version: 1
name: asker
supervisor: lead
tools:
  ask_ops: {person: {choices: [eu, us]}}
  notify:
    command: [echo, "{{ message }}"]
    parameters: {message: {type: string}}
    require_approval: true
agents:
  lead: {description: Asks before it notifies., tools: [ask_ops, notify]}
"""


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / f"{name}.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def stored_items(db: Path) -> list[tuple[str, str, str]]:
    """``(item_id, question, spec)`` of every row of the store's ``pending_items``, as sqlite holds them."""
    with sqlite3.connect(db) as conn:
        return [tuple(row) for row in conn.execute("SELECT item_id, question, spec FROM pending_items ORDER BY 1")]


def test_a_question_holding_a_team_secret_is_stored_masked_when_served(
    serve: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from teamrun.store import open_store

    monkeypatch.setenv("MY_SECRET_TOKEN", SECRET)
    store = open_store(tmp_path / "runs.db")
    team = teamrun.load_team(write(tmp_path, "asker", ASKER), store=store)
    server = serve([team], store=store, tokens=frozenset({TOKEN}))

    async def scenario() -> tuple[Any, Any]:
        async with agent(server.url, "asker", streaming=False) as client:
            [sent] = await collect(client, message(f"Deploy with the key {SECRET}"))
            [answered] = await collect(client, message("eu", task_id=sent.task.id))  # then `notify` asks
        return sent.task, answered.task

    for task in asyncio.run(scenario()):
        assert state_name(task.status.state) == "INPUT_REQUIRED"
        shown = text_of(task.status.message.parts[:1])
        assert "***" in shown and SECRET not in shown, shown
    rows = stored_items(tmp_path / "runs.db")
    assert [row[0] for row in rows] == ["a2", "q1"], rows  # the question and the approval of `notify`
    assert all("***" in question for _, question, _ in rows), rows
    assert SECRET not in json.dumps(rows), rows  # neither the questions nor the approval's arguments


def test_a_question_holding_a_team_secret_is_stored_masked_by_a_cli_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("MY_SECRET_TOKEN", SECRET)
    team = write(tmp_path, "asker", ASKER)
    db = tmp_path / "runs.db"
    args = ["execute", str(team), "-i", f"Deploy with the key {SECRET}", "--store", str(db), "--detach"]
    assert main([*args, "--json", "--progress", "none"]) == 4, capsys.readouterr().err  # 4: waits for people
    run_id = json.loads(capsys.readouterr().out)["run_id"]
    assert main(["answer", run_id, "q1", "eu", "--store", str(db), "--progress", "none"]) == 4  # `notify` asks
    rows = stored_items(db)
    assert [row[0] for row in rows] == ["a2", "q1"], rows
    assert all("***${MY_SECRET_TOKEN}***" in question for _, question, _ in rows), rows
    assert SECRET not in json.dumps(rows), rows
    capsys.readouterr()
    assert main(["runs", "show", run_id, "--store", str(db), "--json"]) == 0
    [item] = json.loads(capsys.readouterr().out)["pending"]
    assert item["item"] == "a2" and item["question"].startswith("may notify run with"), item
    assert SECRET not in json.dumps(item) and "***" in item["question"]
