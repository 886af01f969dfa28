"""`teamrun validate` refuses a person's choice that the person's answer_schema refuses (attack report a42,
D10): `choices: [yes, no]` with `answer_schema: {type: boolean}` validated, and then no answer could pass."""

from __future__ import annotations

from pathlib import Path

import pytest

from teamrun.cli import main


def _team(tmp_path: Path, person: str) -> Path:
    team = tmp_path / "team.yaml"
    team.write_text(
        "version: 1\nname: pick\nsupervisor: desk\ndefaults: {model: offline}\n"
        f"agents:\n  desk: {{tools: [pick]}}\ntools:\n  pick: {{person: {person}}}\n",
        encoding="utf-8",
    )
    return team


def test_choices_a_boolean_schema_refuses_are_located_errors(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    team = _team(tmp_path, '{choices: ["yes", "no"], answer_schema: {type: boolean}}')

    assert main(["validate", str(team)]) == 2

    out = capsys.readouterr().out
    assert f"{team}:8:29: error: tools.pick.person.choices[0]: the choice 'yes' can never be answered" in out
    assert f"{team}:8:36: error: tools.pick.person.choices[1]: the choice 'no' can never be answered" in out


def test_a_choice_that_reads_as_another_value_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    team = _team(tmp_path, '{choices: ["1.0", "2"], answer_schema: {type: integer}}')  # 1.0 is the integer 1

    assert main(["validate", str(team)]) == 2

    out = capsys.readouterr().out
    assert "choices[0]: the choice '1.0' can never be answered" in out and "reads as 1" in out
    assert "choices[1]" not in out


@pytest.mark.parametrize(
    "person",
    [
        '{choices: ["true", "false"], answer_schema: {type: boolean}}',
        '{choices: ["1", "2"], answer_schema: {type: integer, minimum: 1}}',
        '{choices: ["123", "abc"], answer_schema: {type: string}}',  # "123" fits a string schema as the text
        '{choices: ["a", "b"], answer_schema: {enum: ["a", "b"]}}',
        '{choices: ["x", "y"]}',
    ],
)
def test_choices_the_schema_takes_are_valid(person: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    team = _team(tmp_path, person)

    code = main(["validate", str(team)])

    assert code == 0, capsys.readouterr().out


def test_a_choice_the_pattern_refuses_as_json_schema_reads_it_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`pattern` is ECMA 262's: its `\\d` is ASCII, so `teamrun answer` refuses the Arabic-Indic digits `١٢٣`
    (Python's `re` takes them); `teamrun validate` read the choice by Python's `re` and passed it."""
    team = _team(tmp_path, '{choices: ["١٢٣", "123"], answer_schema: {type: string, pattern: \'^\\d+$\'}}')

    assert main(["validate", str(team)]) == 2

    out = capsys.readouterr().out
    assert "choices[0]: the choice '١٢٣' can never be answered" in out
    assert "does not match the pattern ^\\d+$" in out
    assert "choices[1]" not in out
