"""A run that suspends for a person says so in its progress: "waiting for a person", never "cancelled"
(issue 42 item 4). The engine ends the waiting tool call and delegation ``status: waiting``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from teamrun.cli import main
from tests.a2a.remote_fixtures import start_agent, stop, team_file

IN = " \N{SINGLE RIGHT-POINTING ANGLE QUOTATION MARK} "

TEAM = """version: 1
name: ask-offline
supervisor: coordinator
tools:
  ask_operator: {person: {choices: [eu-west-1, us-east-1]}}
agents:
  coordinator: {delegates_to: [infra]}
  infra: {description: Picks the region., tools: [ask_operator]}
"""


def _suspend(tmp_path: Path, capsys: pytest.CaptureFixture[str], *progress: str) -> str:
    team = tmp_path / "team.yaml"
    team.write_text(TEAM, encoding="utf-8")
    code = main(["execute", str(team), "-i", "Deploy", "--store", str(tmp_path / "runs.db"), "--detach", *progress])
    err = capsys.readouterr().err
    assert code == 4, err
    return err


def test_plain_progress_says_waiting_for_a_person_not_cancelled(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    err = _suspend(tmp_path, capsys, "--progress", "plain")
    assert f"coordinator{IN}infra: waiting for a person: tool ask_operator\n" in err
    assert "coordinator → infra: waiting for a person\n" in err
    assert "cancelled" not in err, err


def test_the_events_say_waiting(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    team = tmp_path / "team.yaml"
    team.write_text(TEAM, encoding="utf-8")
    code = main(
        ["--log-format", "json", "execute", str(team), "-i", "Deploy", "--store", str(tmp_path / "r.db"), "--detach"]
    )
    err = capsys.readouterr().err
    assert code == 4, err
    events = [json.loads(line) for line in err.splitlines() if line.startswith("{")]
    ends = {e["event"]: e for e in events if e["event"] in ("tool_end", "delegation_end")}
    assert (ends["tool_end"]["status"], ends["tool_end"]["error"]) == ("waiting", "waiting for a person")
    assert (ends["delegation_end"]["status"], ends["delegation_end"]["error"]) == ("waiting", "waiting for a person")


def test_the_tree_marks_the_waiting_worker(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    err = _suspend(tmp_path, capsys, "--progress", "tree")
    frame = err.rsplit("\x1b[J", 1)[-1]
    assert "◷ infra  waiting" in frame, frame
    assert "cancelled" not in frame, frame


@pytest.mark.outofprocess("an a2a-sdk agent under uvicorn in a subprocess")
def test_a_remote_worker_that_asks_for_input_is_waiting_for_a_person(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A2A `input-required` suspends the run like a person: tool too, the delegation says so, not cancelled."""
    agent = start_agent(tmp_path)
    try:
        team = team_file(tmp_path, agent.url)
        store = str(tmp_path / "runs.db")
        code = main(["execute", str(team), "-i", "ASK me", "--store", store, "--detach", "--progress", "plain"])
    finally:
        stop(agent.process)
    err = capsys.readouterr().err
    assert code == 4, err
    assert "lead → researcher: waiting for a person\n" in err
    assert "cancelled" not in err, err
