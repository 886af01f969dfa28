"""Settings that do nothing are located warnings (exit 0), errors with --strict."""

from __future__ import annotations

from pathlib import Path

import pytest

from teamrun.cli import main

TEAM = """\
version: 1
name: no-ops
supervisor: lead
accept:
  - contains: ""
agents:
  lead:
    memory: thread
    delegates_to: [w]
  w:
    description: W.
    memory: thread
    accept: [{contains: "", ignore_case: true}, {contains: "x"}]
"""


def test_empty_contains_and_supervisor_memory_warn(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    team = tmp_path / "team.yaml"
    team.write_text(TEAM)

    assert main(["validate", str(team)]) == 0
    assert capsys.readouterr().out == (
        f"{team}:5:15: warning: accept[0].contains is empty, so this check always passes\n"
        f"{team}:8:13: warning: agents.lead.memory: thread does nothing on the supervisor: its conversation is "
        "the thread itself (memory applies to workers)\n"
        f"{team}:13:25: warning: agents.w.accept[0].contains is empty, so this check always passes\n"
        "1 file valid (3 warnings)\n"
    )
    assert main(["validate", "--strict", str(team)]) == 2


def test_worker_memory_and_real_contains_do_not_warn(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    team = tmp_path / "team.yaml"
    team.write_text(
        TEAM.replace('contains: ""', 'contains: "ok"')
        .replace('{contains: "",', '{contains: "y",')
        .replace("    memory: thread\n    delegates_to", "    delegates_to")
    )

    assert main(["validate", "--strict", str(team)]) == 0
    assert capsys.readouterr().out == "1 file valid\n"
