"""teams/launch-signoff.yaml as its header and docs/people.md say: offline, detached, answered three times."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from teamrun.cli import main

TEAM = Path(__file__).resolve().parents[2] / "teams" / "launch-signoff.yaml"
ANSWERS = {"infra": "eu-west-1", "legal": "approved", "comms": "2027-03-01"}


def test_the_launch_team_suspends_offline_and_three_answers_finish_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = str(tmp_path / "runs.db")
    code = main(
        ["execute", str(TEAM), "-i", "Launch Falcon", "--store", store, "--detach", "--json", "--progress", "none"]
    )
    out, err = capsys.readouterr()
    assert code == 4, err
    run_id = json.loads(out)["run_id"]

    assert main(["runs", "list", "--store", store]) == 0
    listing = capsys.readouterr().out
    assert f"{run_id}  waiting" in listing
    assert "infra asks Launch Falcon [eu-west-1 | us-east-1 | ap-south-1]" in listing
    assert main(["runs", "list", "--store", store, "--json"]) == 0
    items = {i["agent"]: i["item"] for i in json.loads(capsys.readouterr().out)[0]["pending"]}
    assert set(items) == set(ANSWERS)

    assert main(["answer", run_id, items["comms"], "next week", "--store", store]) == 2  # not YYYY-MM-DD
    assert "does not match" in capsys.readouterr().err
    codes = [
        main(["answer", run_id, items[agent], ANSWERS[agent], "--store", store, "--progress", "none"])
        for agent in ("infra", "legal", "comms")
    ]
    out = capsys.readouterr().out

    assert codes == [4, 4, 0]
    assert out.startswith("[offline simulation] Task: Launch Falcon")
    for agent, answer in ANSWERS.items():
        assert answer in out, agent
