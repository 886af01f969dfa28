"""The eval HTML report, opened in headless Chromium: every case, its result, and a trace link that resolves."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

from playwright.sync_api import sync_playwright

from teamrun.cli import main
from tests.fakeserver import FakeOpenAI, text
from tests.serve.test_web_page import chromium_path

REPO = Path(__file__).resolve().parents[2]
TEAM = str(REPO / "teams" / "research-report.yaml")
EXPECTED = {"rust-ok": "PASS", "cobol-missing": "FAIL", "judged": "PASS"}


def _cases(tmp_path: Path, server: FakeOpenAI) -> str:
    path = tmp_path / "cases.yaml"
    path.write_text(
        textwrap.dedent(f"""\
        version: 1
        cases:
          - name: rust-ok
            input: Compare Rust and Go
            checks: [{{contains: rust, ignore_case: true}}]
          - name: cobol-missing
            input: Compare Rust and Go
            checks: [{{contains: COBOL}}]
          - name: judged
            input: Compare Rust and Go
            checks:
              - judge: {{rubric: "The answer compares Rust with Go.", model: openai/judge,
                         api_base: "{server.url}", threshold: 0.5}}
        """),
        encoding="utf-8",
    )
    return str(path)


def _open(page_file: Path) -> dict[str, Any]:
    """What Chromium shows of the report: each row's case, result and trace link, and every URL it requested."""
    requested: list[str] = []
    with sync_playwright() as p:
        browser = p.chromium.launch(
            executable_path=chromium_path(), args=["--no-sandbox", "--disable-background-networking"]
        )
        try:
            page = browser.new_page()
            page.on("request", lambda request: requested.append(request.url))
            page.goto(page_file.as_uri())
            rows = []
            for row in page.locator("tbody tr[data-case]").all():
                link = row.locator("a.trace")
                rows.append(
                    {
                        "case": row.get_attribute("data-case"),
                        "result": row.locator("td.result").inner_text(),
                        "href": link.get_attribute("href"),
                        "resolved": link.evaluate("a => a.href"),
                        "section": page.locator(f"#case-{row.get_attribute('data-case')} h3").inner_text(),
                    }
                )
        finally:
            browser.close()
    return {"rows": rows, "requested": requested}


def test_the_report_shows_every_case_with_its_result_and_a_working_trace_link(
    tmp_path: Path, fake_openai: FakeOpenAI
) -> None:
    fake_openai.handler("judge", lambda request: text(json.dumps({"score": 0.8, "reason": "compares them"})))
    report = tmp_path / "out" / "eval.html"
    report.parent.mkdir()

    code = main(
        [
            "eval",
            TEAM,
            _cases(tmp_path, fake_openai),
            "--format",
            "html",
            "-o",
            str(report),
            "--progress",
            "none",
            "--min-pass",
            "0",
        ]
    )

    assert code == 0
    shown = _open(report)
    assert {row["case"]: row["result"] for row in shown["rows"]} == EXPECTED
    for row in shown["rows"]:
        assert row["section"] == f"{row['case']} {EXPECTED[row['case']]}"
        assert row["href"] == f"eval-traces/{row['case']}.jsonl"  # relative: the folder can be moved as a whole
        trace = Path(unquote(urlparse(row["resolved"]).path))
        assert trace.is_file() and trace.parent == report.parent / "eval-traces"
        lines = [json.loads(line) for line in trace.read_text(encoding="utf-8").splitlines()]
        assert lines[0]["kind"] == "trace" and lines[-1]["kind"] == "run_end"
        assert lines[-1]["data"]["status"] == "done"
    assert all(url.startswith("file://") for url in shown["requested"])  # self-contained: nothing fetched


def test_traces_dir_is_honoured_for_any_format(tmp_path: Path, fake_openai: FakeOpenAI) -> None:
    fake_openai.handler("judge", lambda request: text(json.dumps({"score": 0.2, "reason": "no"})))

    code = main(
        [
            "eval",
            TEAM,
            _cases(tmp_path, fake_openai),
            "--format",
            "json",
            "-o",
            str(tmp_path / "r.json"),
            "--traces",
            str(tmp_path / "traces"),
            "--progress",
            "none",
            "--min-pass",
            "0",
        ]
    )

    assert code == 0
    assert sorted(p.name for p in (tmp_path / "traces").iterdir()) == sorted(f"{c}.jsonl" for c in EXPECTED)
