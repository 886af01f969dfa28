"""`teamrun eval` end to end through the CLI: table, JUnit (read by junitparser), HTML, baseline, judge."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import Any

import junitparser
import pytest

from teamrun.cli import main
from teamrun.evals.schema_gen import render_schema
from tests.fakeserver import FakeOpenAI, text

REPO = Path(__file__).resolve().parents[2]
TEAM = str(REPO / "teams" / "research-report.yaml")


def _cases(tmp_path: Path, body: str, name: str = "cases.yaml") -> str:
    path = tmp_path / name
    path.write_text(textwrap.dedent(body), encoding="utf-8")
    return str(path)


def _judge_by_content(request: dict[str, Any]) -> Any:
    """The judge scores 0.9 when the graded answer talks about Rust, 0.2 otherwise."""
    prompt = request["messages"][-1]["content"]
    answer = prompt.split("Answer to grade:", 1)[1]
    good = "Rust" in answer
    return text(json.dumps({"score": 0.9 if good else 0.2, "reason": "mentions Rust" if good else "off topic"}))


def _mixed_cases(tmp_path: Path, server: FakeOpenAI) -> str:
    (tmp_path / "mychecks.py").write_text(
        "def mentions_notes(answer, case):\n    return ('notes/' in answer, 'no notes cited')\n", encoding="utf-8"
    )
    return _cases(
        tmp_path,
        f"""\
        version: 1
        defaults:
          checks:
            - regex: "(?i)offline simulation"
        cases:
          - name: contains-ok
            input: Compare Rust and Go
            checks:
              - contains: rust
                ignore_case: true
              - python: mychecks:mentions_notes
          - name: contains-missing
            input: Compare Rust and Go
            checks:
              - contains: COBOL
          - name: judge-pass
            input: Compare Rust and Go
            checks:
              - judge: {{rubric: "The answer compares Rust with Go.", model: openai/judge,
                         api_base: "{server.url}", threshold: 0.7}}
          - name: judge-fail
            input: Compare pip and uv
            checks:
              - judge: {{rubric: "The answer compares Rust with Go.", model: openai/judge,
                         api_base: "{server.url}", threshold: 0.7}}
          - name: json-answer
            input: Compare Rust and Go
            checks:
              - json_schema: {{type: object}}
        """,
    )


def _table_rows(out: str) -> dict[str, list[str]]:
    rows = {}
    for line in out.splitlines()[2:]:
        if not line.strip():
            break
        cells = line.split()
        rows[cells[0]] = cells[1:]
    return rows


def test_eval_table_marks_passing_and_failing_cases_with_a_judge_on_the_fake_server(
    tmp_path: Path, fake_openai: FakeOpenAI, capsys: pytest.CaptureFixture[str]
) -> None:
    fake_openai.handler("judge", _judge_by_content)
    cases = _mixed_cases(tmp_path, fake_openai)

    code = main(["eval", TEAM, cases, "--concurrency", "3"])
    captured = capsys.readouterr()

    assert code == 1  # 2 of 5 pass, under the default --min-pass 1.0
    rows = _table_rows(captured.out)
    assert {name: cells[0] for name, cells in rows.items()} == {
        "contains-ok": "PASS",
        "contains-missing": "FAIL",
        "judge-pass": "PASS",
        "judge-fail": "FAIL",
        "json-answer": "FAIL",
    }
    assert rows["contains-ok"][1] == "3/3"
    assert 'contains "COBOL": not found in the answer' in captured.out
    assert "judge openai/judge >= 0.7: score 0.2 (< 0.7): off topic" in captured.out
    assert "the answer is not JSON" in captured.out
    assert "2/5 passed (40%)" in captured.out
    assert "eval: 5/5 cases done, 3 failed" in captured.err
    judged = fake_openai.requests("judge")
    assert len(judged) == 2 and "compares Rust with Go" in judged[0].request["messages"][-1]["content"]
    fake_openai.assert_complete()

    assert main(["eval", TEAM, cases, "--min-pass", "0.4", "--progress", "none"]) == 0


def test_junit_report_is_read_by_junitparser(tmp_path: Path, fake_openai: FakeOpenAI) -> None:
    fake_openai.handler("judge", _judge_by_content)
    cases = _mixed_cases(tmp_path, fake_openai)
    report = tmp_path / "eval.xml"

    assert main(["eval", TEAM, cases, "--format", "junit", "-o", str(report), "--progress", "none"]) == 1

    xml = junitparser.JUnitXml.fromfile(str(report))
    suites = list(xml)
    assert len(suites) == 1 and suites[0].tests == 5 and suites[0].failures == 3
    outcome = {case.name: [type(r).__name__ for r in case.result] for case in suites[0]}
    assert outcome == {
        "contains-ok": [],
        "contains-missing": ["Failure"],
        "judge-pass": [],
        "judge-fail": ["Failure"],
        "json-answer": ["Failure"],
    }
    failed = next(case for case in suites[0] if case.name == "judge-fail")
    assert "score 0.2" in failed.result[0].message


def test_html_report_is_one_page_with_every_case(tmp_path: Path, fake_openai: FakeOpenAI) -> None:
    fake_openai.handler("judge", _judge_by_content)
    cases = _mixed_cases(tmp_path, fake_openai)
    page = tmp_path / "eval.html"

    main(["eval", TEAM, cases, "--format", "html", "-o", str(page), "--progress", "none"])

    html = page.read_text(encoding="utf-8")
    assert html.startswith("<!DOCTYPE html>") and "<script" not in html and "http" not in html.split("<body>")[1]
    for name in ("contains-ok", "contains-missing", "judge-pass", "judge-fail", "json-answer"):
        assert f'id="case-{name}"' in html
    assert "[offline simulation] Task: Compare pip and uv" in html
    assert "score 0.9" in html


def test_baseline_marks_a_regression_and_an_improvement(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    before = _cases(
        tmp_path,
        """\
        version: 1
        cases:
          - {name: steady, input: Compare Rust and Go, checks: [{contains: Rust}]}
          - {name: breaks, input: Compare Rust and Go, checks: [{contains: Rust}]}
          - {name: mends, input: Compare Rust and Go, checks: [{contains: Haskell}]}
        """,
    )
    previous = tmp_path / "previous.json"
    assert main(["eval", TEAM, before, "--format", "json", "-o", str(previous), "--min-pass", "0"]) == 0
    after = _cases(
        tmp_path,
        """\
        version: 1
        cases:
          - {name: steady, input: Compare Rust and Go, checks: [{contains: Rust}]}
          - {name: breaks, input: Compare Rust and Go, checks: [{contains: Haskell}]}
          - {name: mends, input: Compare Rust and Go, checks: [{contains: Go}]}
        """,
        "after.yaml",
    )
    capsys.readouterr()

    assert main(["eval", TEAM, after, "--baseline", str(previous), "--progress", "none"]) == 1
    out = capsys.readouterr().out

    rows = _table_rows(out)
    assert rows["breaks"][:2] == ["FAIL", "0/1"] and "REGRESSED" in rows["breaks"]
    assert "IMPROVED" in rows["mends"]
    assert "REGRESSED" not in rows["steady"] and "IMPROVED" not in rows["steady"]
    assert "1 regressed, 1 improved" in out

    assert main(["eval", TEAM, after, "--baseline", str(previous), "--format", "json", "--progress", "none"]) == 1
    data = json.loads(capsys.readouterr().out)
    assert {c["name"]: c["change"] for c in data["cases"]} == {
        "steady": "same",
        "breaks": "regression",
        "mends": "improvement",
    }
    assert data["baseline"]["regressions"] == 1


def test_a_case_over_its_token_ceiling_is_stopped_and_fails(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cases = _cases(
        tmp_path,
        """\
        version: 1
        cases:
          - {name: tight, input: Compare Rust and Go, max_tokens: 500, checks: [{contains: Rust}]}
          - {name: roomy, input: Compare Rust and Go, max_tokens: 100000, checks: [{contains: Rust}]}
        """,
    )

    assert main(["eval", TEAM, cases, "--format", "json", "--progress", "none"]) == 1
    data = {c["name"]: c for c in json.loads(capsys.readouterr().out)["cases"]}

    assert data["roomy"]["passed"] and data["roomy"]["tokens"] > 500
    tight = data["tight"]
    assert not tight["passed"] and tight["status"] == "budget_exhausted"
    assert tight["stopped_by"].startswith("cases[0].max_tokens (500)")
    assert [c["name"] for c in tight["checks"] if not c["passed"]] == ["run done", "tokens <= 500"]


def test_record_then_replay_gives_the_same_verdicts_without_the_server(
    tmp_path: Path, fake_openai: FakeOpenAI, capsys: pytest.CaptureFixture[str]
) -> None:
    fake_openai.handler("judge", _judge_by_content)
    cases = _mixed_cases(tmp_path, fake_openai)
    cassette = tmp_path / "eval.cassette.jsonl"
    assert main(["eval", TEAM, cases, "--format", "json", "--record", str(cassette), "--progress", "none"]) == 1
    recorded = json.loads(capsys.readouterr().out)
    fake_openai.stop()  # nothing may reach it now

    assert main(["eval", TEAM, cases, "--format", "json", "--replay", str(cassette), "--progress", "none"]) == 1
    replayed = json.loads(capsys.readouterr().out)

    def verdicts(data: dict[str, Any]) -> list[Any]:
        return [(c["name"], c["passed"], c["answer"], c["checks"]) for c in data["cases"]]

    assert verdicts(replayed) == verdicts(recorded)
    assert len(fake_openai.requests("judge")) == 2


def test_a_bad_cases_file_is_reported_with_file_line_col(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cases = _cases(
        tmp_path,
        """\
        version: 1
        cases:
          - name: one
            input: hi
            checks:
              - contain: x
              - regex: "("
          - name: one
            inptu: hi
        """,
    )

    assert main(["eval", TEAM, cases]) == 2
    err = capsys.readouterr().err
    assert f"{cases}:6:9: error: unknown key 'contain' in cases[0].checks[0]; did you mean 'contains'?" in err
    assert f"{cases}:7:16: error: cases[0].checks[1].regex is not a valid regular expression" in err
    assert f"{cases}:8:11: error: case name 'one' is used twice" in err
    assert f"{cases}:9:5: error: unknown key 'inptu' in cases[1]; did you mean 'input'?" in err
    assert "Traceback" not in err


def test_the_example_cases_pass_offline(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["eval", TEAM, str(REPO / "examples" / "eval" / "research-cases.yaml")]) == 0
    assert "3/3 passed (100%)" in capsys.readouterr().out


def test_the_committed_cases_schema_is_generated_from_the_models() -> None:
    committed = (REPO / "schemas" / "cases.schema.json").read_text(encoding="utf-8")
    assert committed == render_schema(), "run `python -m teamrun.evals.schema_gen > schemas/cases.schema.json`"


def test_the_cases_file_shown_in_the_docs_is_valid() -> None:
    from teamrun.evals.cases import check_cases_text

    page = (REPO / "docs" / "eval.md").read_text(encoding="utf-8")
    blocks = [b.split("\n```", 1)[0] for b in page.split("```yml\n")[1:]]
    assert blocks
    for block in blocks:
        diagnostics, _ = check_cases_text(block, "docs/eval.md example")
        assert [d.render() for d in diagnostics] == []
