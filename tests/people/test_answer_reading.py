"""How an answer is read, kept and said back: JSON Schema's rules (not Python's), no NUL, JSON not repr, only a
JSON ``true`` approves, and a secret answer typed at a terminal is not shown (issue 42, item 6)."""

from __future__ import annotations

import asyncio
import io
import json
import os
import threading
from pathlib import Path
from typing import Any

import pytest

from teamrun.cli import main
from teamrun.engine.durability.pending import _answer_of
from teamrun.store import open_store
from teamrun.store.pending import PendingRecord, PendingRepository
from teamrun.tools.people import (
    AnswerNotText,
    AnswerRefused,
    AskSite,
    PendingItem,
    TerminalDesk,
    _not_tracked,
    answer_text,
    read_answer,
)
from tests.people.test_answer_errors import _error, _one_question


def _question(schema: dict[str, Any] | None = None, **fields: Any) -> PendingItem:
    return PendingItem(kind="question", question="?", tool="ask", answer_schema=schema, **fields)


# -- JSON Schema's integers ------------------------------------------------------------------------
def test_an_integer_typed_as_2_0_is_the_integer_2() -> None:
    item = _question({"type": "integer", "minimum": 1})
    value = read_answer(item, "2.0")
    assert value == 2 and type(value) is int  # JSON Schema 2020-12 counts 2.0 as an integer; it is kept as 2
    assert read_answer(_question({"type": "object"}), '{"n": 3.0, "x": [1.0, 2.5]}') == {"n": 3, "x": [1, 2.5]}
    with pytest.raises(AnswerRefused, match='is not of type "integer"'):
        read_answer(item, "2.5")


def test_an_integer_answer_is_stored_and_said_as_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store, run_id, item = _one_question(tmp_path, capsys, "ask_seats", "{answer_schema: {type: integer}}")
    assert main(["answer", run_id, item, "2.0", "--store", store, "--by", "ops", "--no-resume"]) == 0
    assert f"{item} of run {run_id} answered (2) by ops" in capsys.readouterr().err
    stored = PendingRepository(open_store(store)).get(run_id, item)
    assert stored is not None and stored.answer == 2 and type(stored.answer) is int


# -- JSON, not Python's repr -------------------------------------------------------------------------
def test_an_answer_is_said_back_as_json_not_as_python_writes_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store, run_id, item = _one_question(tmp_path, capsys, "ask_go", "{answer_schema: {type: boolean}}")
    assert main(["answer", run_id, item, "true", "--store", store, "--by", "ops", "--no-resume"]) == 0
    assert f"{item} of run {run_id} answered (true) by ops" in capsys.readouterr().err
    item_without_schema = _question()
    assert answer_text(item_without_schema, _answer(True)) == "true"  # never Python's `True`


def _answer(value: Any) -> Any:
    from teamrun.tools.people import Answer

    return Answer(value, "ops")


# -- NUL ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("schema", [None, {"type": "string"}, {"type": "object"}])
def test_a_nul_is_refused_in_an_answer(schema: dict[str, Any] | None) -> None:
    typed = '{"a": "x\\u0000y"}' if schema == {"type": "object"} else "x\x00y"
    with pytest.raises(AnswerNotText, match="NUL"):
        read_answer(_question(schema), typed)


def test_a_nul_in_a_cli_answer_is_one_line_and_nothing_is_recorded(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store, run_id, item = _one_question(tmp_path, capsys, "ask_name", "{answer_schema: {type: object}}")
    line = _error(main(["answer", run_id, item, '{"name": "a\\u0000b"}', "--store", store]), capsys)
    assert line.startswith("error: the answer contains a NUL character")
    assert main(["runs", "show", run_id, "--store", store, "--json"]) == 0
    assert [i["status"] for i in json.loads(capsys.readouterr().out)["pending"]] == ["pending"]


# -- pattern: ECMA 262, as JSON Schema says ---------------------------------------------------------------
@pytest.mark.parametrize(
    ("pattern", "typed", "fits"),
    [
        (r"^\d+$", "123", True),
        (r"^\d+$", "١٢٣", False),  # Arabic-Indic digits: Python's \d takes them, ECMA's does not
        (r"^\d{3}$", "123\n", False),  # Python's $ accepts a trailing newline, ECMA's does not
        (r"^\w+$", "héllo", False),  # ECMA's \w is ASCII
        (r"^[a-z]+$", "abc\n", False),
        (r"^a.c$", "a\rc", False),  # ECMA's . stops at every line terminator
        (r"^a\sb$", "a\u00a0b", True),  # ECMA's \s takes the no-break space
        (r"^eu-[a-z]+-\d$", "eu-west-1", True),
    ],
)
def test_a_pattern_matches_as_json_schema_says(pattern: str, typed: str, fits: bool) -> None:
    item = _question({"type": "string", "pattern": pattern})
    if fits:
        assert read_answer(item, typed) == typed
    else:
        with pytest.raises(AnswerRefused, match="does not match the pattern"):
            read_answer(item, typed)


# -- approvals: only a JSON true -----------------------------------------------------------------------
@pytest.mark.parametrize(
    ("stored", "approved"),
    [
        ({"approved": True, "note": None}, True),
        ({"approved": "yes", "note": None}, False),
        ({"approved": 1, "note": None}, False),
        ({"approved": "false", "note": None}, False),
        (True, True),
        ("yes", False),
    ],
)
def test_only_a_json_true_approves(stored: Any, approved: bool) -> None:
    record = PendingRecord(
        run_id="r",
        item_id="a1",
        call_key="k",
        kind="approval",
        agent="lead",
        question="may deploy run?",
        spec={},
        status="answered",
        answer=stored,
        answered_by="ops",
        asked_at=0.0,
        answered_at=1.0,
        used=False,
    )
    assert _answer_of(record).value is approved


# -- a secret typed at a terminal ---------------------------------------------------------------------
class _Prompted(io.StringIO):
    """stderr that says when the prompt was flushed (the desk reads after it)."""

    def __init__(self) -> None:
        super().__init__()
        self.prompted = threading.Event()

    def flush(self) -> None:
        super().flush()
        if self.getvalue().endswith("answer: "):
            self.prompted.set()


@pytest.mark.parametrize("secret", [True, False])
def test_a_secret_answer_typed_at_a_terminal_is_not_echoed(secret: bool) -> None:
    master, slave = os.openpty()
    stdin = os.fdopen(slave, "r", encoding="utf-8")
    stderr = _Prompted()
    desk = TerminalDesk(stdin=stdin, stderr=stderr)
    site = AskSite("", "", 0, 0, "lead", desk, _not_tracked)

    def typist() -> None:
        assert stderr.prompted.wait(30)
        os.write(master, b"s3cret-4711\n")

    threading.Thread(target=typist, daemon=True).start()
    try:
        answer = asyncio.run(desk.ask(_question(secret=secret), site))
        assert answer.value == "s3cret-4711"
        os.set_blocking(master, False)
        try:
            echoed = os.read(master, 1024)
        except BlockingIOError:
            echoed = b""
        if secret:
            assert b"s3cret" not in echoed, echoed
            assert "(typing is not shown)" in stderr.getvalue()
            import termios

            assert termios.tcgetattr(slave)[3] & termios.ECHO  # echo is back on after the answer
        else:
            assert b"s3cret-4711" in echoed  # the terminal shows what is typed (the test sees its echo)
    finally:
        stdin.close()
        os.close(master)


@pytest.mark.parametrize("sent", ["yes", "true", 1, "1"])
def test_a_served_approval_is_a_json_boolean_only(sent: Any) -> None:
    from pydantic import ValidationError

    from teamrun.serve.answers import PendingAnswer

    with pytest.raises(ValidationError, match="approve"):
        PendingAnswer.model_validate({"approve": sent})
    assert PendingAnswer.model_validate({"approve": True}).approve is True
