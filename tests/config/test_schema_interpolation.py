"""The published schema accepts `${VAR:-12}` where a number or true/false goes, as teamrun does.

Editors (yaml-language-server) and check-jsonschema validate the file as
written, before substitution; teamrun substitutes first and types the value,
so its own validation still wants a number after substitution.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
SCHEMA = REPO / "schemas" / "team.schema.json"
VALID = sorted([*(HERE / "valid").glob("*.yaml"), *(REPO / "teams").glob("*.y*ml")])

TEAM = """\
version: 1
name: env-numbers
supervisor: ${SUPERVISOR:-lead}
limits:
  max_steps: ${N:-5}
  max_cost_usd: ${BUDGET:-0.5}
agents:
  lead:
    model: offline
    temperature: ${TEMPERATURE:-0.2}
    stream: ${STREAM:-false}
    delegates_to: [worker]
    delegation:
      parallel: ${PARALLEL:-true}
      max_concurrency: ${CONCURRENCY}
      output_mode: ${OUTPUT_MODE:-last_message}
  worker: {}
"""


def _check_jsonschema(*files: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "check_jsonschema", "--schemafile", str(SCHEMA), *map(str, files)],
        capture_output=True,
        text=True,
        check=False,
    )


def test_check_jsonschema_accepts_env_references_in_number_and_boolean_fields(
    tmp_path: Path, cli: Callable[..., Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    team = tmp_path / "team.yaml"
    team.write_text(TEAM)
    done = _check_jsonschema(team)
    assert done.returncode == 0, done.stdout + done.stderr
    monkeypatch.setenv("CONCURRENCY", "3")
    assert cli(["validate", str(team)]).out == "1 file valid\n"


def test_check_jsonschema_accepts_every_valid_example() -> None:
    done = _check_jsonschema(*VALID)
    assert done.returncode == 0, done.stdout + done.stderr


def test_a_reference_is_not_any_text(tmp_path: Path) -> None:
    team = tmp_path / "team.yaml"
    team.write_text(TEAM.replace("${N:-5}", "five"))
    done = _check_jsonschema(team)
    assert done.returncode == 1
    assert "max_steps" in done.stdout


def test_teamrun_types_the_value_after_substitution(tmp_path: Path, cli: Callable[..., Any]) -> None:
    team = tmp_path / "team.yaml"
    team.write_text(TEAM.replace("${N:-5}", "${N:-five}"))
    assert _check_jsonschema(team).returncode == 0  # the schema cannot know what N holds...
    result = cli(["validate", str(team)])  # ...teamrun substitutes first, then checks the type
    assert result.code == 2
    expected = f'{team}:5:14: error: limits.max_steps must be an integer, not the string "five"'
    assert result.out.splitlines()[0] == expected
