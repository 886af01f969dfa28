"""Fixtures for the team-file validation tests (owner: runner/config, runner/cli validate)."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.cli_run import CliResult, run_cli

REPO = Path(__file__).resolve().parents[2]
"""The repository root: the tests run the CLI from here, with repo-relative paths."""
HERE = Path(__file__).resolve().parent
VALID_DIR = HERE / "valid"
INVALID_DIR = HERE / "invalid"


@pytest.fixture(autouse=True)
def _team_env(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Run from the repo root with no TEAMRUN_* variables, so interpolation is predictable."""
    for name in list(os.environ):
        if name.startswith("TEAMRUN_"):
            monkeypatch.delenv(name)
    monkeypatch.chdir(REPO)
    yield


@pytest.fixture
def cli() -> Callable[[list[str]], CliResult]:
    return run_cli
