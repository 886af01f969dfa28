"""A run that waited for a person and is answered later keeps its first start as its start: `runs show` says the
same `started_at` before and after `teamrun answer` (and `resume`) continued it (attack a42people D15, through the
CLI; the served side: tests/serve/test_run_created_when_continued.py).

The run's start is moved back in the store (to 2020) before it is answered, so a continuation that wrote its own
time would show without waiting for the clock.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from teamrun.cli import main
from tests.serve.test_run_created_when_continued import backdate

TEAM = """version: 1
name: ask
supervisor: ops
defaults: {model: offline}
tools:
  q: {person: {}}
agents:
  ops: {tools: [q], budget: {max_steps: 3}}
"""


def _shown(run_id: str, db: Path, capsys: pytest.CaptureFixture[str]) -> dict[str, object]:
    assert main(["runs", "show", run_id, "--store", str(db), "--json"]) == 0
    return dict(json.loads(capsys.readouterr().out))


def test_answering_a_waiting_run_later_keeps_its_start(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    team = tmp_path / "team.yaml"
    team.write_text(TEAM, encoding="utf-8")
    db = tmp_path / "runs.db"
    args = ["execute", str(team), "-i", "go", "--store", str(db), "--json", "--progress", "none", "--detach"]
    assert main(args) == 4
    run_id = json.loads(capsys.readouterr().out)["run_id"]
    backdate(db, run_id)
    waiting = _shown(run_id, db, capsys)

    assert main(["answer", run_id, "q1", "blue", "--store", str(db)]) == 0
    capsys.readouterr()
    done = _shown(run_id, db, capsys)

    assert waiting["status"] == "waiting" and done["status"] == "done", (waiting, done)
    assert str(waiting["started_at"]).startswith("2020-01-02"), waiting
    assert done["started_at"] == waiting["started_at"], done
    assert done["attempts"] == 2
