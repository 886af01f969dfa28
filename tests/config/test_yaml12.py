"""Team files are read with YAML 1.2's core schema, as editors and check-jsonschema read them.

`country: NO` is the text "NO" (YAML 1.1 made it false and the prompt said
"False"); only true/false are booleans; `012` is twelve, not octal ten.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from teamrun.config.loader import load_config

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
SCALARS = HERE / "valid" / "yaml12_scalars.yaml"


def test_yaml_1_1_booleans_are_text() -> None:
    config = load_config(SCALARS).config
    assert config.vars == {
        "country": "NO",
        "switch": "off",
        "answer": "yes",
        "code": 12,
        "big": "1_000",
        "time": "1:30",
    }
    assert config.agents["lead"].description == "no"
    assert config.agents["lead"].max_tokens == 12


def test_the_prompt_says_what_the_file_says() -> None:
    from teamrun import load_team
    from teamrun.testing.scripted import ScriptedModel

    model = ScriptedModel({"lead": ["done"]})
    load_team(SCALARS, chat_model=model).run_sync("go")
    model.assert_complete()
    system = str(model.calls[0].messages[0]["content"])
    assert "Country NO, switch off, answer yes, code 12." in system


def test_a_yaml_1_1_boolean_where_a_boolean_belongs_says_why(cli: Callable[..., Any]) -> None:
    result = cli(["validate", "tests/config/invalid/type_yaml_boolean.yaml"])
    assert 'not the string "yes" (only true and false are booleans' in result.out


def test_check_jsonschema_reads_the_file_the_same_way() -> None:
    """The published schema and an independent YAML 1.2 reader (ruamel, in check-jsonschema) agree."""
    for path in (SCALARS, HERE / "invalid" / "type_yaml_boolean.yaml"):
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "check_jsonschema",
                "--schemafile",
                str(REPO / "schemas" / "team.schema.json"),
                str(path),
            ],
            capture_output=True,
            text=True,
            check=False,
        )
        assert done.returncode == (0 if path == SCALARS else 1), done.stdout + done.stderr
