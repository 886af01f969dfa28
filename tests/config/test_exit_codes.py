"""`ok_exit_codes` (issue 33.12): validate knows the field (the invalid corpus holds its errors)."""

from __future__ import annotations

from pathlib import Path

import pytest

from teamrun.cli import main

TEAM = """\
version: 1
name: exit-codes
supervisor: lead
agents:
  lead:
    tools: [search]
tools:
  search:
    command: ["grep", "-rn", "--", "{{ term }}", "notes/"]
    parameters: {term: {type: string}}
    ok_exit_codes: CODES
"""


def test_codes_that_leave_out_0_are_a_warning(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    team = tmp_path / "team.yaml"
    team.write_text(TEAM.replace("CODES", "[1]"), encoding="utf-8")

    assert main(["validate", str(team)]) == 0
    assert capsys.readouterr().out == (
        f"{team}:11:20: warning: tools.search.ok_exit_codes leaves out 0, so a command that succeeds is an "
        "error; list it too (e.g. [0, 1])\n"
        "1 file valid (1 warning)\n"
    )
    assert main(["validate", "--strict", str(team)]) == 2


def test_codes_with_0_are_valid_without_a_word(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    team = tmp_path / "team.yaml"
    team.write_text(TEAM.replace("CODES", "[0, 1]"), encoding="utf-8")

    assert main(["validate", str(team)]) == 0
    assert capsys.readouterr().out == "1 file valid\n"
