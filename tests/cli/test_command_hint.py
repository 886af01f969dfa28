"""Issue 22.25: `validate`'s hint for `command: "ls -la"` is the argv list that runs (`["ls", "-la"]`),
not a list of one string that validates and then fails at run time with "command not found"."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from teamrun.cli import main

TEAM = """\
version: 1
name: lister
supervisor: solo
agents:
  solo:
    tools: [list_files]
tools:
  list_files:
    description: List the files of the team's folder.
    command: {command}
    cwd: .
"""


def test_following_the_hint_gives_a_command_that_runs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    team = tmp_path / "team.yaml"
    team.write_text(TEAM.format(command='"ls -a"'), encoding="utf-8")

    assert main(["validate", str(team)]) == 2
    out = capsys.readouterr().out
    assert (
        f'{team}:10:14: error: tools.list_files.command must be a list, not the string "ls -a" '
        '(write ["ls", "-a"]: one item per argument: commands never run through a shell)'
    ) in out

    suggested = re.search(r"\(write (\[.*?\]):", out)
    assert suggested is not None
    team.write_text(TEAM.format(command=suggested.group(1)), encoding="utf-8")
    assert main(["validate", str(team)]) == 0
    capsys.readouterr()
    assert main(["execute", str(team), "-i", "what is here?", "--json", "--progress", "none"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["status"] == "done"
    assert "team.yaml" in result["final_text"] and "command not found" not in result["final_text"]


@pytest.mark.parametrize(
    ("command", "hint"),
    [
        ('"grep -rn {{ pattern }} notes/"', '(write ["grep", "-rn", "{{ pattern }}", "notes/"]: one item per argument'),
        ("\"find . -name '*.md'\"", '(write ["find", ".", "-name", "*.md"]: one item per argument'),
        (
            '"ls -la | wc -l"',
            '(write ["sh", "-c", "ls -la | wc -l"]: commands never run through a shell; this one needs one)',
        ),
        (
            '"grep {{ pattern }} notes/*.md"',
            "(one item per argument: commands never run through a shell, so pipes, "
            "redirections, globs and $VARS do nothing here; put the pipeline in a script",
        ),
    ],
)
def test_the_hint_splits_as_a_shell_would_and_keeps_templates_whole(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], command: str, hint: str
) -> None:
    team = tmp_path / "team.yaml"
    team.write_text(
        TEAM.format(command=command).replace("    cwd: .\n", "    parameters: {pattern: {type: string}}\n"),
        encoding="utf-8",
    )

    assert main(["validate", str(team)]) == 2
    assert hint in capsys.readouterr().out
