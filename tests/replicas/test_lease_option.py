"""`teamrun serve --lease` takes 0 (alone) or a finite lease a heartbeat fits in: `nan` was taken (the lease row
said NaN, it never expired, and a killed replica's runs never moved), and so were `inf` and `0.1` (attack a46, 5)."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from teamrun.cli.app import cli


@pytest.mark.parametrize("lease", ["nan", "inf", "0.1", "1e9", "-1"])
def test_a_lease_that_is_no_time_a_heartbeat_fits_in_is_refused(tmp_path: Path, lease: str) -> None:
    team = tmp_path / "team.yaml"
    team.write_text("version: 1\nname: t\nsupervisor: lead\nagents:\n  lead: {model: offline}\n", encoding="utf-8")

    result = CliRunner().invoke(cli, ["serve", str(team), "--store", str(tmp_path / "s.db"), "--lease", lease])

    assert result.exit_code == 2, result.output
    assert "--lease" in result.output and "Traceback" not in result.output
    assert not (tmp_path / "s.db").exists()  # refused before anything starts
