"""`teamrun answer` reads a whole number by the one rule of teamrun.bounds, as `teamrun serve` does (attack a4243b
7): an integer past ±(2^63-1) for an integer question is refused, exit 2, one line naming the bound; it was
recorded as the float 1.2345678901234568e+29 (exit 0) while the server refused the same answer 422."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from teamrun.cli import main
from teamrun.config.answers import AnswerOutOfBounds, schema_answer
from tests.people.test_answer_errors import _error, _one_question

HUGE = "123456789012345678901234567890"


@pytest.mark.parametrize("typed", [HUGE, f"-{HUGE}", f'{{"n": {HUGE}}}'])
def test_an_integer_past_the_bound_is_refused_by_teamrun_answer(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], typed: str
) -> None:
    schema = "{answer_schema: {type: integer}}" if typed.lstrip("-").isdigit() else "{answer_schema: {type: object}}"
    store, run_id, item = _one_question(tmp_path, capsys, "ask_count", schema)

    line = _error(main(["answer", "--store", store, "--", run_id, item, typed]), capsys)
    assert line.startswith("error: the answer does not fit the question's answer_schema: the answer"), line
    assert "past ±9223372036854775807" in line and HUGE not in line, line
    assert main(["runs", "show", run_id, "--store", store, "--json"]) == 0
    view = json.loads(capsys.readouterr().out)
    assert [i["status"] for i in view["pending"]] == ["pending"], view  # nothing recorded


def test_the_largest_integer_is_still_an_answer_and_digits_are_still_a_string() -> None:
    assert schema_answer({"type": "integer"}, "9223372036854775807") == 9223372036854775807
    assert schema_answer({"type": "string"}, HUGE) == HUGE  # the text reading fits a string schema
    with pytest.raises(AnswerOutOfBounds, match="past ±9223372036854775807"):
        schema_answer({"type": "integer"}, "-9223372036854775808")
