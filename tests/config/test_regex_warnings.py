"""Issue 22.31: a regex Python warns about (`[[a]`: "possible nested set") is our located warning, never
Python's FutureWarning on stderr naming a line of teamrun; an invalid one stays a located error.

Run in a fresh interpreter, as the user runs `teamrun validate`: Python prints a warning once per place,
so only a new process shows what a user would see.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

TEAM = """\
version: 1
name: regexes
supervisor: lead
agents:
  lead:
    delegates_to: [w]
    delegation:
      message_filter: {drop_matching: ["[[a]"]}
    accept:
      - regex: "x[a-z--b]"
    output_schema:
      type: object
      properties:
        code: {type: string, pattern: "[a&&b]"}
      patternProperties:
        "^x[[:alpha:]]": {type: string}
  w: {}
"""


def _teamrun(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO / "runner"), "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    env.pop("PYTHONWARNINGS", None)
    return subprocess.run(
        [sys.executable, "-m", "teamrun.cli", *args], capture_output=True, text=True, env=env, cwd=cwd, timeout=120
    )


def test_regexes_python_warns_about_are_located_warnings_of_ours(tmp_path: Path) -> None:
    (tmp_path / "team.yaml").write_text(TEAM, encoding="utf-8")

    done = _teamrun("validate", "team.yaml", cwd=tmp_path)

    assert done.returncode == 0, done.stdout
    assert done.stderr == ""
    hint = (
        "; a later Python may read this '[' (or the doubled '-', '&', '~', '|') as set syntax: write it as "
        "'\\[' (or '\\-'...) to match the character itself"
    )
    assert done.stdout.splitlines() == [
        "team.yaml:8:40: warning: agents.lead.delegation.message_filter.drop_matching[0]: regular expression "
        f"'[[a]': possible nested set at position 1{hint}",
        "team.yaml:10:16: warning: agents.lead.accept[0].regex: regular expression 'x[a-z--b]': possible set "
        f"difference at position 5{hint}",
        "team.yaml:14:39: warning: agents.lead.output_schema.properties.code.pattern: regular expression "
        f"'[a&&b]': possible set intersection at position 2{hint}",
        "team.yaml:16:9: warning: agents.lead.output_schema.patternProperties.^x[[:alpha:]]: regular expression "
        f"'^x[[:alpha:]]': possible nested set at position 3{hint}",
        "1 file valid (4 warnings)",
    ]


def test_running_the_team_says_the_warning_once_and_python_says_nothing(tmp_path: Path) -> None:
    (tmp_path / "team.yaml").write_text(TEAM.split("    accept:")[0] + "  w: {}\n", encoding="utf-8")

    done = _teamrun("execute", "team.yaml", "-i", "hello [a] world", "--progress", "none", cwd=tmp_path)

    assert done.returncode == 0, done.stderr
    assert done.stderr.splitlines() == [
        "team.yaml:8:40: warning: agents.lead.delegation.message_filter.drop_matching[0]: regular expression "
        "'[[a]': possible nested set at position 1; a later Python may read this '[' (or the doubled '-', '&', "
        "'~', '|') as set syntax: write it as '\\[' (or '\\-'...) to match the character itself"
    ]


def test_an_invalid_regex_is_still_a_located_error(tmp_path: Path) -> None:
    (tmp_path / "team.yaml").write_text(TEAM.replace('"[[a]"', '"[b--]"'), encoding="utf-8")

    done = _teamrun("validate", "team.yaml", cwd=tmp_path)

    assert done.returncode == 2
    assert (
        "team.yaml:8:40: error: agents.lead.delegation.message_filter.drop_matching[0]: invalid regular "
        "expression '[b--]': bad character range b-- at position 1"
    ) in done.stdout
