"""`teamrun answer` says who answered an item first with control characters made inert: `by` is text from
anyone who answered (another CLI's `--by`, or an older server that took control characters over HTTP), and an
escape in it reached the operator's terminal raw (attack report a42, D2: OSC 52 writes the clipboard)."""

from __future__ import annotations

from pathlib import Path

import pytest

from teamrun.cli import main
from tests.people.test_answer_errors import _one_question

ESCAPE = "a\x1b]52;c;SGk=\x07b"


def test_who_answered_first_is_said_with_control_characters_inert(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store, run_id, item = _one_question(tmp_path, capsys, "ask_colour", "{}")
    assert main(["answer", run_id, item, "blue", "--by", ESCAPE, "--store", store, "--progress", "none"]) == 0
    capsys.readouterr()

    code = main(["answer", run_id, item, "red", "--store", store, "--progress", "none"])

    err = capsys.readouterr().err
    assert code == 2, err
    assert "already answered by a" in err
    assert "\x1b" not in err and "\x07" not in err
