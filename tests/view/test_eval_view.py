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
