"""`teamrun answer`, `approve` and `deny` take `--api-base`, as execute and resume do: the continued run's
endpoint, checked before anything is recorded (issue 42 item 18)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from teamrun.cli import main

TEAM = """version: 1
name: ask-and-deploy
supervisor: lead
tools:
  ask_ops: {person: {choices: [eu-west-1, us-east-1]}}
  deploy: {command: [echo, deployed], require_approval: true}
agents:
  lead: {delegates_to: [infra, release]}
  infra: {description: Picks the region., tools: [ask_ops]}
  release: {description: Deploys., tools: [deploy]}
"""


@pytest.fixture
def waiting(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> tuple[str, str, dict[str, str]]:
    """A run detached on a question and an approval: (store, run id, item id by kind)."""
    team = tmp_path / "team.yaml"
    team.write_text(TEAM, encoding="utf-8")
    store = str(tmp_path / "runs.db")
    code = main(["execute", str(team), "-i", "Ship it", "--store", store, "--json", "--progress", "none", "--detach"])
    out, err = capsys.readouterr()
    assert code == 4, err
    run_id = json.loads(out)["run_id"]
    assert main(["runs", "show", run_id, "--store", store, "--json"]) == 0
    pending = json.loads(capsys.readouterr().out)["pending"]
    return store, run_id, {item["kind"]: str(item["item"]) for item in pending}


@pytest.mark.parametrize("command", ["answer", "approve", "deny"])
def test_a_bad_api_base_is_refused_before_anything_is_recorded(
    waiting: tuple[str, str, dict[str, str]], command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    store, run_id, items = waiting
    item = items["question" if command == "answer" else "approval"]
    value = ["eu-west-1"] if command == "answer" else []
    code = main([command, run_id, item, *value, "--store", store, "--api-base", "localhost:8000"])
    err = capsys.readouterr().err
    assert code == 2, err
    assert err.startswith("error: --api-base:"), err
    assert main(["runs", "show", run_id, "--store", store, "--json"]) == 0
    assert len(json.loads(capsys.readouterr().out)["pending"]) == 2  # nothing answered


def test_answer_and_approve_continue_the_run_with_the_given_api_base(
    waiting: tuple[str, str, dict[str, str]], capsys: pytest.CaptureFixture[str]
) -> None:
    store, run_id, items = waiting
    base = ["--store", store, "--api-base", "http://127.0.0.1:9/v1", "--progress", "none"]
    assert main(["answer", run_id, items["question"], "eu-west-1", *base, "--no-resume"]) == 0
    code = main(["approve", run_id, items["approval"], *base, "--json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert json.loads(out)["status"] == "done"
