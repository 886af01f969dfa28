"""Budgets that cannot mean what they say are warnings (exit 0), errors with --strict."""

from __future__ import annotations

from pathlib import Path

import pytest

from teamrun.cli import main

TEAM = """\
version: 1
name: budgets
supervisor: lead
limits: {max_cost_usd: 1.0, max_tool_calls: 10}
agents:
  lead:
    delegates_to: [w]
    delegation: {parallel: false, max_concurrency: 3}
  w: {description: W., budget: {max_cost_usd: 5, max_tool_calls: 4}}
"""


def test_budget_warnings(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    team = tmp_path / "team.yaml"
    team.write_text(TEAM)

    assert main(["validate", str(team)]) == 0
    assert capsys.readouterr().out == (
        f"{team}:8:52: warning: max_concurrency has no effect with parallel: false (delegations run one at a time)\n"
        f"{team}:9:47: warning: agents.w.budget.max_cost_usd (5) is above limits.max_cost_usd (1.0); "
        "the run's limit is reached first\n"
        "1 file valid (2 warnings)\n"
    )
    assert main(["validate", "--strict", str(team)]) == 2
