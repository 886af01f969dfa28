"""teams/remote-worker.yaml as its header says: start an A2A agent, point TEAMRUN_A2A_URL at it, run offline."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest

from tests.a2a.remote_fixtures import REPO, A2AAgent
from tests.cli_run import run_cli

pytestmark = pytest.mark.outofprocess("an a2a-sdk agent under uvicorn in a subprocess")
TEAM = REPO / "teams" / "remote-worker.yaml"


def test_the_header_says_how_to_start_an_agent_and_run_the_team() -> None:
    header = TEAM.read_text(encoding="utf-8").split("\nversion: 1\n", 1)[0]
    assert "python tests/a2a/a2a_test_server.py --port 9999" in header
    assert 'teamrun execute teams/remote-worker.yaml --input "Find facts about Rust"' in header


def test_the_remote_worker_team_runs_against_the_a2a_sdk_agent(a2a_agent: Callable[..., A2AAgent]) -> None:
    agent = a2a_agent(mode="STREAM")

    result = run_cli(
        ["execute", str(TEAM), "--input", "Find facts about Rust", "--json"], {"TEAMRUN_A2A_URL": agent.url}
    )

    assert result.code == 0, result.err
    shown = json.loads(result.out)
    assert shown["status"] == "done"
    assert [(d["agent"], d["status"], d["response"]) for d in shown["delegations"]] == [
        ("researcher", "ok", "part one, part two")
    ]
    assert shown["final_text"].startswith("[offline simulation]")
    assert "researcher (ok): part one, part two" in shown["final_text"]
    assert f"lead \u203a researcher: started (a2a:{agent.url})" in result.err  # the progress view shows the worker
    assert "lead \u203a researcher: ok (tokens and cost not reported)" in result.err
    assert [e["text"] for e in agent.records("execute")] == ["Find facts about Rust"]
