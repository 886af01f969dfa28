"""Answers over HTTP (`POST /v1/runs/{id}/pending/{item}`) meet text that is not text, and secrets.

A real server (uvicorn in a thread, tests/serve/conftest.py's ``RunningServer``) with a store, on the scripted model.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

import teamrun
from teamrun.observe.trace_file import ContentCapture
from teamrun.serve import ServeSettings
from teamrun.store import open_store
from teamrun.testing.scripted import ScriptedCall, ScriptedModel, tool_call
from tests.serve.conftest import RunningServer, until_status

TEAM = """version: 1
name: asker
supervisor: lead
tools:
  ask_note: {person: {}}
  ask_pin: {person: {secret: true}}
agents:
  lead: {tools: [ask_note, ask_pin]}
"""


def _told(call: ScriptedCall) -> str:
    return f"the person said: {call.messages[-1].get('content')}"


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Any]:
    """``server(script, content=False)``: a served team whose lead follows ``script``, with a store."""
    started: list[RunningServer] = []

    def start(script: list[Any], *, content: bool = False) -> RunningServer:
        team_file = tmp_path / "team.yaml"
        team_file.write_text(TEAM, encoding="utf-8")
        store = open_store(tmp_path / "runs.db")
        team = teamrun.load_team(
            team_file,
            chat_model=ScriptedModel({"lead": script}),
            store=store,
            wrap_model=ContentCapture if content else None,
        )
        running = RunningServer([team], ServeSettings(store=store, content=content)).start()
        started.append(running)
        return running

    try:
        yield start
    finally:
        for running in started:
            running.stop()


def test_a_lone_surrogate_in_an_answer_is_400_invalid_text_and_the_run_still_waits(server: Any) -> None:
    running = server([tool_call("ask_note", question="Any note?"), _told])
    with httpx.Client(base_url=running.url, timeout=120) as client:
        run_id = client.post("/v1/runs", json={"team": "asker", "input": "go"}).json()["id"]
        until_status(client, run_id, "waiting")
        url = f"/v1/runs/{run_id}/pending/q1"
        refused = [
            client.post(url, content=body, headers={"content-type": "application/json"})
            for body in (
                '{"answer": "caf\\udce9"}',  # free text
                '{"answer": {"note": "caf\\udce9"}}',  # inside JSON
                '{"answer": "fine", "by": "caf\\udce9"}',  # who answers
            )
        ]
        still = client.get(f"/v1/runs/{run_id}").json()["status"]
        [item] = client.get("/v1/pending").json()["data"]
        good = client.post(url, json={"answer": "café"})
        done = until_status(client, run_id, "done")
    assert [r.status_code for r in refused] == [400, 400, 400], [r.text for r in refused]
    assert {r.json()["error"]["code"] for r in refused} == {"invalid_text"}
    assert all("surrogate" in r.json()["error"]["message"] for r in refused)
    assert still == "waiting" and item["id"] == "q1" and item["status"] == "pending"
    assert good.status_code == 200, good.text
    assert done["final_text"] == "the person said: café"


def test_a_secret_answer_is_masked_in_the_served_runs_events_with_content(server: Any) -> None:
    secret = "pin-271828"
    running = server([tool_call("ask_pin", question="Your PIN?"), _told], content=True)
    with httpx.Client(base_url=running.url, timeout=120) as client:
        run_id = client.post("/v1/runs", json={"team": "asker", "input": "go"}).json()["id"]
        until_status(client, run_id, "waiting")
        said = client.post(f"/v1/runs/{run_id}/pending/q1", json={"answer": secret})
        until_status(client, run_id, "done")
        events = client.get(f"/v1/runs/{run_id}/events").text
    assert said.status_code == 200, said.text
    assert '"kind":"llm_io"' in events.replace(" ", "")
    assert secret not in events
    assert "the person said: ***" in events
