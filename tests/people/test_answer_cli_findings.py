"""`teamrun answer` / `approve` / `runs show` corners an outside tester found (attack report a42, D7-D9, D11, D12).

Offline model throughout: an agent calls each of its tools once, then answers with what they returned.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from teamrun.cli import main

VALUES = """version: 1
name: vals
supervisor: ops
defaults: {model: offline}
tools:
  t_int: {person: {answer_schema: {type: integer}}}
  t_enum: {person: {answer_schema: {enum: [1, "a", null]}}}
  t_str: {person: {answer_schema: {type: string, maxLength: 5}}}
  t_neg: {person: {answer_schema: {type: integer, maximum: 0}}}
agents:
  ops: {tools: [t_int, t_enum, t_str, t_neg], budget: {max_steps: 4}}
"""

APPROVAL = """version: 1
name: side
supervisor: desk
defaults: {model: offline}
tools:
  stamp: {command: [echo, ok], require_approval: true}
agents:
  desk: {tools: [stamp], budget: {max_steps: 3}}
"""


def _suspended(tmp_path: Path, body: str, capsys: pytest.CaptureFixture[str]) -> tuple[str, str, Path]:
    team = tmp_path / "team.yaml"
    team.write_text(body, encoding="utf-8")
    store = str(tmp_path / "runs.db")
    code = main(["execute", str(team), "-i", "go", "--store", store, "--json", "--progress", "none", "--detach"])
    out, err = capsys.readouterr()
    assert code == 4, err
    return json.loads(out)["run_id"], store, team


def _items(store: str, run_id: str, capsys: pytest.CaptureFixture[str]) -> dict[str, str]:
    """Tool name → item id of the run's pending items."""
    assert main(["runs", "show", run_id, "--store", store, "--json"]) == 0
    return {item["tool"]: item["item"] for item in json.loads(capsys.readouterr().out)["pending"]}


def _refusal(code: int, capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err
    assert code == 2, err
    assert "Traceback" not in err
    return err


# -- D7 ----------------------------------------------------------------------------------------------------
def test_runs_show_of_a_run_waiting_for_an_approval_says_approve_not_answer(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run_id, store, _ = _suspended(tmp_path, APPROVAL, capsys)

    assert main(["runs", "show", run_id, "--store", store]) == 0

    out = capsys.readouterr().out
    assert f"teamrun approve {run_id} ITEM" in out and f"teamrun deny {run_id} ITEM" in out
    assert "teamrun answer" not in out


# -- D8 ----------------------------------------------------------------------------------------------------
def test_schema_refusals_say_values_as_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run_id, store, _ = _suspended(tmp_path, VALUES, capsys)
    items = _items(store, run_id, capsys)

    said = _refusal(main(["answer", run_id, items["t_int"], '"3"', "--store", store, "--no-resume"]), capsys)
    assert '"3" is not of type "integer"' in said, said
    assert "'3'" not in said and "'integer'" not in said

    said = _refusal(main(["answer", run_id, items["t_enum"], "true", "--store", store, "--no-resume"]), capsys)
    assert 'true is not one of [1, "a", null]' in said, said
    assert "True" not in said and "None" not in said


def test_a_long_refused_answer_is_cut_and_its_length_said(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run_id, store, _ = _suspended(tmp_path, VALUES, capsys)
    items = _items(store, run_id, capsys)

    said = _refusal(main(["answer", run_id, items["t_str"], "y" * 120_000, "--store", store, "--no-resume"]), capsys)

    assert len(said) < 1000, len(said)
    assert "120000 characters" in said, said


# -- D9 ----------------------------------------------------------------------------------------------------
def test_a_negative_number_is_an_answer_not_an_option(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run_id, store, _ = _suspended(tmp_path, VALUES, capsys)
    items = _items(store, run_id, capsys)

    code = main(["answer", run_id, items["t_neg"], "-5", "--store", store, "--no-resume"])

    err = capsys.readouterr().err
    assert code == 0, err
    assert "answered (-5)" in err
    assert main(["answer", run_id, items["t_int"], "--bogus", "--store", store, "--no-resume"]) == 2
    assert "No such option" in capsys.readouterr().err  # a mistyped option is still one


# -- D11 ---------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "argv",
    [
        ["answer", "abc", "q1", "x"],
        ["approve", "abc", "a1"],
        ["deny", "abc", "a1"],
        ["resume", "abc"],
    ],
)
def test_a_mistyped_store_is_refused_and_not_created(
    argv: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = tmp_path / "typo" / ".teamrun" / "runs.db"

    said = _refusal(main([*argv, "--store", str(store)]), capsys)

    assert "there is no store at" in said, said
    assert list(tmp_path.iterdir()) == []


# -- D12 ---------------------------------------------------------------------------------------------------
def test_an_answer_recorded_before_the_continuation_fails_points_to_resume(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    body = """version: 1
name: secvar
supervisor: desk
defaults: {model: offline}
tools:
  ask: {person: {}}
agents:
  desk: {instructions: "Use ${MY_VALUE} when deploying.", tools: [ask], budget: {max_steps: 3}}
"""
    monkeypatch.setenv("MY_VALUE", "v1")
    run_id, store, _ = _suspended(tmp_path, body, capsys)
    monkeypatch.delenv("MY_VALUE")

    code = main(["answer", run_id, "q1", "ok", "--store", store, "--progress", "none"])
    first = capsys.readouterr().err
    assert code == 2, first
    assert "answer is recorded" in first and f"teamrun resume {run_id}" in first, first

    code = main(["answer", run_id, "q1", "ok", "--store", store, "--progress", "none"])
    again = capsys.readouterr().err
    assert code == 2
    assert "already answered" in again and f"teamrun resume {run_id}" in again, again

    assert main(["runs", "show", run_id, "--store", store, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["status"] == "waiting"  # not left `running` by the failed attempt
    assert main(["resume", run_id, "--store", store, "--progress", "none"]) == 2  # still no MY_VALUE
    capsys.readouterr()
    assert main(["runs", "show", run_id, "--store", store, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["status"] == "waiting"  # nor by a failed `teamrun resume`
    monkeypatch.setenv("MY_VALUE", "v1")
    assert main(["resume", run_id, "--store", store, "--progress", "none", "--json"]) == 0
    finished = json.loads(capsys.readouterr().out)
    assert finished["status"] == "done" and "ask: ok" in finished["final_text"]
