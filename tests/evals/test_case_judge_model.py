"""An eval case's judge still names its model (a team's `accept:` judge may leave it to defaults.model)."""

from __future__ import annotations

from pathlib import Path

import pytest

from teamrun.cli import main

TEAM = str(Path(__file__).resolve().parents[2] / "teams" / "research-report.yaml")


def test_a_case_judge_without_a_model_is_a_located_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cases = tmp_path / "cases.yaml"
    cases.write_text(
        "version: 1\ncases:\n  - name: one\n    input: hi\n    checks:\n      - judge: {rubric: Says hi.}\n",
        encoding="utf-8",
    )

    assert main(["eval", TEAM, str(cases)]) == 2
    err = capsys.readouterr().err
    assert f"{cases}:6:9: error: cases[0].checks[0].judge needs a model: (any LiteLLM model, or offline)" in err
    assert "Traceback" not in err
