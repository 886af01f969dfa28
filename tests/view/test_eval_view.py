"""`teamrun eval --format html`: each case links to its run's view, which opens in Chromium."""

from __future__ import annotations

import json
from pathlib import Path

from playwright.sync_api import expect

from teamrun.cli import main
from tests.evals.test_html_report import EXPECTED, TEAM, _cases
from tests.fakeserver import FakeOpenAI, text
from tests.view.conftest import OpenPage


def test_each_case_of_the_report_links_to_its_run_view(
    tmp_path: Path, fake_openai: FakeOpenAI, open_page: OpenPage
) -> None:
    fake_openai.handler("judge", lambda request: text(json.dumps({"score": 0.8, "reason": "compares them"})))
    report = tmp_path / "out" / "eval.html"
    report.parent.mkdir()
    assert (
        main(
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
        == 0
    )

    opened = open_page(report.as_uri())
    page = opened.page
    links = {
        row.get_attribute("data-case"): row.locator("a.view").get_attribute("href")
        for row in page.locator("tbody tr[data-case]").all()
    }
    assert links == {case: f"eval-traces/{case}.html" for case in EXPECTED}

    page.locator("tbody tr[data-case=cobol-missing] a.view").click()

    expect(page.locator(".tv-title .tv-status")).to_have_text("done")
    expect(page.locator(".tv-row[data-agent]")).to_have_count(3)  # lead, researcher, writer
    assert page.url.endswith("/out/eval-traces/cobol-missing.html")
    assert opened.problems == []


def test_a_failing_case_view_shows_its_input_answer_and_each_check_with_a_link_back(
    tmp_path: Path, fake_openai: FakeOpenAI, open_page: OpenPage
) -> None:
    fake_openai.handler("judge", lambda request: text(json.dumps({"score": 0.8, "reason": "compares them"})))
    report = tmp_path / "out" / "eval.html"
    report.parent.mkdir()
    cases = _cases(tmp_path, fake_openai)
    args = ["eval", TEAM, cases, "--format", "html", "-o", str(report), "--progress", "none", "--min-pass", "0"]
    assert main(args) == 0
    opened = open_page(report.as_uri())
    page = opened.page
    in_report = page.locator("#case-cobol-missing")
    answer = in_report.locator("details pre").nth(1).inner_text()
    failure = in_report.locator("li.fail").inner_text()  # "FAIL contains: ..."
    page.locator("tbody tr[data-case=cobol-missing] a.view").click()
    case = page.locator(".tv-case")
    expect(case.locator(".tv-case-title")).to_have_text("eval case cobol-missing FAIL")
    expect(case.locator(".tv-case-input")).to_have_text("Compare Rust and Go")
    expect(case.locator(".tv-case-answer")).to_have_text(answer)
    checks = case.locator(".tv-check")
    expect(checks).to_have_count(1)
    expect(checks).to_have_attribute("data-passed", "false")
    expect(checks.locator(".tv-verdict")).to_have_text("FAIL")  # a word, not only a colour
    assert ": " in failure
    expect(checks).to_have_text(failure)  # the check's name and its message, as the report says
    expect(page.locator(".tv-title .tv-status")).to_have_text("done")  # the run itself, below

    case.get_by_role("link", name="back to the eval report").click()
    assert page.url.endswith("/out/eval.html#case-cobol-missing")
    expect(page.locator("#case-cobol-missing")).to_be_visible()

    opened = open_page((report.parent / "eval-traces" / "rust-ok.html").as_uri())
    expect(opened.page.locator(".tv-case .tv-case-title")).to_have_text("eval case rust-ok PASS")
    expect(opened.page.locator(".tv-case .tv-check .tv-verdict")).to_have_text(["PASS"])
    assert opened.problems == []


def test_a_cost_ceiling_is_written_by_the_cost_rule_in_the_report_and_the_case_view(
    tmp_path: Path, open_page: OpenPage
) -> None:
    cases = tmp_path / "cases.yaml"
    cases.write_text(
        "version: 1\ncases:\n"
        "  - {name: tiny, input: Compare Rust and Go, max_cost_usd: 0.0000001}\n"
        "  - {name: exact, input: Compare Rust and Go, max_cost_usd: 0.012345}\n"
    )
    report = tmp_path / "out" / "report.html"
    report.parent.mkdir()
    team = str(Path(__file__).resolve().parents[2] / "teams" / "research-report.yaml")
    args = ["eval", team, str(cases), "--model", "offline", "--format", "html", "-o", str(report)]
    assert main([*args, "--progress", "none", "--min-pass", "0"]) == 0

    opened = open_page(report.as_uri())
    page = opened.page
    expect(page.locator("#case-tiny li")).to_have_text(["PASS cost <= $0.00000010"])  # not $1e-07
    expect(page.locator("#case-exact li")).to_have_text(["PASS cost <= $0.012345"])  # the limit, not rounded
    page.locator("tbody tr[data-case=tiny] a.view").click()
    expect(page.locator(".tv-case .tv-check")).to_have_text("PASS cost <= $0.00000010")
    assert opened.problems == []
