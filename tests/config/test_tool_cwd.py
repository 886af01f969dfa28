"""``teamrun validate`` and a tool's ``cwd`` (issue 42 item 17): a folder that is not there is reported, located,
resolved as the run resolves it — relative to the directory of the team file, not where validate runs.
Only a plain path is judged: one written with ``${VAR}`` or a template is left to the run."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from teamrun.config.loader import check_file

TEAM = """\
version: 1
name: cwd
supervisor: lead
agents:
  lead: {{description: Greps notes., tools: [notes, server]}}
tools:
  notes:
    command: ["grep", "-rn", "x", "."]
    cwd: {command_cwd}
  server:
    mcp: {{command: ["{python}", "-c", "pass"], cwd: {server_cwd}}}
"""


def _check(tmp_path: Path, *, command_cwd: str = ".", server_cwd: str = ".") -> list[str]:
    team = tmp_path / "teams" / "team.yaml"
    team.parent.mkdir(exist_ok=True)
    team.write_text(TEAM.format(command_cwd=command_cwd, server_cwd=server_cwd, python=sys.executable))
    return [d.render().replace(str(tmp_path), "TMP") for d in check_file(team).diagnostics]


def test_a_missing_relative_cwd_is_an_error_at_its_value(tmp_path: Path) -> None:
    assert _check(tmp_path, command_cwd="samples") == [
        "TMP/teams/team.yaml:9:10: error: tools.notes.cwd: the working directory samples (relative to the team "
        "file's folder: TMP/teams/samples) does not exist; create it or point cwd at a folder"
    ]


def test_the_folder_is_found_beside_the_team_file_not_where_validate_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "teams" / "samples").mkdir(parents=True)
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")
    assert _check(tmp_path, command_cwd="samples", server_cwd="samples/") == []
    (tmp_path / "elsewhere" / "other").mkdir()
    assert len(_check(tmp_path, command_cwd="other")) == 1


def test_an_mcp_servers_cwd_and_a_file_that_is_not_a_folder(tmp_path: Path) -> None:
    (tmp_path / "teams").mkdir()
    (tmp_path / "teams" / "notes.txt").write_text("x")
    found = _check(tmp_path, command_cwd="notes.txt", server_cwd="gone")
    assert [line.split(": error: ")[1].split(":")[0] for line in found] == ["tools.notes.cwd", "tools.server.mcp.cwd"]
    assert "notes.txt (relative to the team file's folder: TMP/teams/notes.txt) is not a folder" in found[0]
    assert found[1].startswith("TMP/teams/team.yaml:11:")


def test_a_missing_absolute_cwd_is_a_warning(tmp_path: Path) -> None:
    (found,) = _check(tmp_path, command_cwd=str(tmp_path / "nowhere"))
    assert ": warning: tools.notes.cwd: the working directory TMP/nowhere does not exist" in found
    assert found.endswith("(it may exist where the team runs)")


@pytest.mark.parametrize(
    "cwd", ["'${TEAMRUN_TEST_NOTES_DIR:-nowhere}'", "'{{ vars.folder }}'", "'notes-{% if 1 %}x{% endif %}'"]
)
def test_a_cwd_with_a_variable_or_a_template_is_not_judged(tmp_path: Path, cwd: str) -> None:
    assert [line for line in _check(tmp_path, command_cwd=cwd) if "cwd" in line] == []
