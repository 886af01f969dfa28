"""Runs served with a store are journaled there: their records outlive the server that ran them.

A `teamrun serve --store` process runs a team (the runs API and a chat completion),
is stopped with SIGTERM, and a new process on the same store answers
``GET /v1/runs/{id}`` for those runs from the store; `teamrun runs list` lists them.
"""

from __future__ import annotations

import json
from pathlib import Path

import httpx
from click.testing import CliRunner

from teamrun.cli import cli
from tests.cli_processes import child_env, serving
from tests.fakeserver import FakeOpenAI, hang
from tests.serve.conftest import TOKEN, solo_team
from tests.serve.test_threads import AUTH, RESEARCH, chat, served
from tests.waiting import wait_until


def test_a_served_runs_record_outlives_the_server_and_is_listed_by_runs_list(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'teamrun.db'}"
    with (
        served(str(RESEARCH), "--store", store) as url,
        httpx.Client(base_url=url, headers=AUTH, timeout=120) as client,
    ):
        run_id = client.post(
            "/v1/runs", json={"team": "research-report", "input": "Compare Rust and Go", "thread": "t-1"}
        ).json()["id"]
        events = client.get(f"/v1/runs/{run_id}/events").text  # until the run is over
        assert "event: result" in events
        before = client.get(f"/v1/runs/{run_id}").json()
        completion = chat(url).with_raw_response.create(
            model="research-report", messages=[{"role": "user", "content": "Which one compiles faster?"}]
        )
        chat_run = completion.headers["x-teamrun-run-id"]
        answer = completion.parse().choices[0].message.content
    assert before["status"] == "done" and before["final_text"]

    with (
        served(str(RESEARCH), "--store", store) as url,
        httpx.Client(base_url=url, headers=AUTH, timeout=120) as client,
    ):
        after = client.get(f"/v1/runs/{run_id}").json()
        chatted = client.get(f"/v1/runs/{chat_run}").json()
        missing = client.get("/v1/runs/run_nosuchrun")
    assert after["id"] == run_id and after["team"] == "research-report" and after["status"] == "done"
    assert after["final_text"] == before["final_text"] and after["thread"] == "t-1"
    assert after["cost"] == before["result"]["cost"] and after["usage"] == before["result"]["usage"]
    assert after["source"] == "store" and after["events"] is True  # its events are kept in the store
    assert chatted["status"] == "done" and chatted["final_text"] == answer and chatted["thread"] is None
    assert missing.status_code == 404 and missing.json()["error"]["code"] == "run_not_found"

    listed = CliRunner().invoke(cli, ["runs", "list", "--store", store, "--json"])
    assert listed.exit_code == 0, listed.output
    runs = {run["run_id"]: run for run in json.loads(listed.output)}
    assert {run_id, chat_run} <= set(runs)


def test_without_a_store_a_restarted_server_knows_no_earlier_run(tmp_path: Path) -> None:
    with served(str(RESEARCH)) as url, httpx.Client(base_url=url, headers=AUTH, timeout=120) as client:
        run_id = client.post("/v1/runs", json={"team": "research-report", "input": "Compare Rust and Go"}).json()["id"]
        assert "event: result" in client.get(f"/v1/runs/{run_id}/events").text
        assert client.get(f"/v1/runs/{run_id}").json()["status"] == "done"
    with served(str(RESEARCH)) as url, httpx.Client(base_url=url, headers=AUTH, timeout=120) as client:
        assert client.get(f"/v1/runs/{run_id}").status_code == 404


def test_sigterm_marks_the_runs_in_progress_cancelled_in_the_store(tmp_path: Path, fake_openai: FakeOpenAI) -> None:
    fake_openai.script("lead", [hang(300)])
    team = solo_team(tmp_path, model="openai/lead", api_base=fake_openai.url)
    store = f"sqlite:///{tmp_path / 'teamrun.db'}"
    with (
        serving(str(team), "--store", store, env=child_env(TEAMRUN_API_TOKENS=TOKEN)) as server,
        httpx.Client(base_url=server.url, headers=AUTH, timeout=120) as client,
    ):
        run_id = client.post("/v1/runs", json={"team": "solo", "input": "hang on"}).json()["id"]
        wait_until(lambda: fake_openai.requests("lead"), "the run waiting on the provider")
        assert server.stop() == 0

    with served(str(team), "--store", store) as url, httpx.Client(base_url=url, headers=AUTH, timeout=120) as client:
        record = client.get(f"/v1/runs/{run_id}").json()
    assert record["id"] == run_id and record["status"] == "cancelled" and record["source"] == "store"
