"""`teamrun serve` runs a workflow team like any team: its events stream per step, its result is kept."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

import teamrun
from teamrun.serve.app import ServeSettings
from tests.serve.conftest import RunningServer
from tests.serve.sse import sse_events

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[RunningServer]:
    for name in ("NO_PROXY", "no_proxy"):
        monkeypatch.setenv(name, "127.0.0.1,localhost")
    team = teamrun.load_team(REPO / "teams" / "research-report-workflow.yaml", model="offline")
    running = RunningServer([team], ServeSettings()).start()
    try:
        yield running
    finally:
        running.stop()


def test_a_served_workflow_streams_each_step_and_keeps_its_result(server: RunningServer) -> None:
    with httpx.Client(base_url=server.url, timeout=60) as client:
        created = client.post("/v1/runs", json={"team": "research-report-workflow", "input": "Compare Rust and Go"})
        assert created.status_code == 201, created.text
        run_id = created.json()["id"]
        with client.stream("GET", f"/v1/runs/{run_id}/events") as response:
            events = list(sse_events(response.iter_lines()))
        record = client.get(f"/v1/runs/{run_id}").json()
    steps = [data["data"]["step"] for name, data in events if name == "delegation_start"]
    assert steps[0] == "plan" and steps[-1] == "writer"
    assert steps[1:-1] == [f"research[{i}]" for i in range(len(steps) - 2)] and len(steps) > 2
    assert events[-1][0] == "result"
    assert record["status"] == "done"
    assert record["result"]["final_text"].startswith("[offline simulation]")
