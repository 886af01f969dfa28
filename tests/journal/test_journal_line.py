"""`teamrun execute --store X` says "journaled in X" only when the store took the run's record."""

from __future__ import annotations

from pathlib import Path

import pytest

from teamrun.cli import main

REPO = Path(__file__).resolve().parents[2]
TEAM = str(REPO / "teams" / "research-report.yaml")


def test_the_journal_line_is_said_only_for_a_store_that_took_the_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("TEAMRUN_STORE", raising=False)
    path = tmp_path / "runs.db"
    assert main(["execute", TEAM, "-i", "warm up", "--store", str(path), "--progress", "plain"]) == 0
    said = capsys.readouterr().err
    assert f"journaled in sqlite:///{path}" in said

    read_only = f"sqlite:///file:{path}?mode=ro&uri=true"
    assert main(["execute", TEAM, "-i", "Compare Rust and Go", "--store", read_only, "--progress", "plain"]) == 0
    said = capsys.readouterr().err
    assert "run journal could not be written" in said
    assert "journaled in" not in said
