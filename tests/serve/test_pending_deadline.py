"""A served question nobody answers within its ``max_wait_s``: the item is recorded expired and the run continues,
the model told nobody answered (docs/people.md) — also for a run that waited through a server restart."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx

import teamrun
from teamrun.store import open_store
from teamrun.store.pending import PendingRepository
from teamrun.testing.scripted import ScriptedCall, ScriptedModel, tool_call
from tests.serve.conftest import TOKEN, until_status

AUTH = {"Authorization": f"Bearer {TOKEN}"}
TEAM = """\
version: 1
name: asker
supervisor: lead
agents:
  lead:
    description: Asks where to deploy.
    tools: [ask_region]
tools:
  ask_region:
    person: {max_wait_s: 1}
"""


def _told(call: ScriptedCall) -> str:
    return f"the tool said: {call.messages[-1].get('content')}"


def _team(tmp_path: Path, store: Any, script: list[Any]) -> teamrun.Team:
    path = tmp_path / "team.yaml"
    path.write_text(TEAM, encoding="utf-8")
    return teamrun.load_team(path, chat_model=ScriptedModel({"lead": script}), store=store)


def _expired_and_told(client: httpx.Client, run_id: str, db: Path) -> None:
    done = until_status(client, run_id, "done")
    assert done["final_text"] == "the tool said: Nobody answered within 1 seconds. Continue without the answer.", done
    assert client.get("/v1/pending").json()["data"] == []
    (item,) = PendingRepository(open_store(db)).items(run_id)
    assert (item.status, item.answer, item.answered_by) == ("expired", None, "nobody")


def test_a_served_question_past_max_wait_s_expires_and_the_run_continues(serve: Any, tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    store = open_store(db)
    server = serve([_team(tmp_path, store, [tool_call("ask_region", question="Which region?"), _told])], store=store)
    with httpx.Client(base_url=server.url, headers=AUTH, timeout=120) as client:
        run_id = client.post("/v1/runs", json={"team": "asker", "input": "deploy"}).json()["id"]
        _expired_and_told(client, run_id, db)


def test_a_question_that_waited_through_a_restart_expires_in_the_next_server(serve: Any, tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    first = serve(
        [_team(tmp_path, open_store(db), [tool_call("ask_region", question="Which region?")])], store=open_store(db)
    )
    with httpx.Client(base_url=first.url, headers=AUTH, timeout=120) as client:
        run_id = client.post("/v1/runs", json={"team": "asker", "input": "deploy"}).json()["id"]
        until_status(client, run_id, "waiting")
    first.stop()  # stopped before the deadline: the next server watches it

    store = open_store(db)
    second = serve([_team(tmp_path, store, [_told])], store=store)
    with httpx.Client(base_url=second.url, headers=AUTH, timeout=120) as client:
        _expired_and_told(client, run_id, db)
