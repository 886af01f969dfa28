"""Long things on a narrow page (issue 42 item 14), in headless Chromium at a phone's width: a long URL in a team's
description, an agent's long name in the view's Agent filter, a 10,000-character input in the run's summary."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from playwright.sync_api import expect

import teamrun
from tests.serve.conftest import TOKEN
from tests.serve.test_workbench_teams import chromium, workbench

URL = "https://example.com/" + "a-long-path-segment/" * 6 + "x" * 10  # 150 characters, no place to break
AGENT = "researcher_of_the_quarterly_market_figures"
INPUT = ("All of this is the input. " * 400)[:10_000]


def long_team(tmp_path: Path) -> teamrun.Team:
    path = tmp_path / "long.yaml"
    path.write_text(
        f"""\
version: 1
name: long
description: Reads {URL} and reports.
supervisor: lead
agents:
  lead:
    description: Coordinates.
    delegates_to: [{AGENT}]
  {AGENT}:
    description: Looks things up.
""",
        encoding="utf-8",
    )
    return teamrun.load_team(path, model="offline")


def test_long_things_keep_the_page_as_wide_as_a_phone_and_a_long_input_is_clamped(serve: Any, tmp_path: Path) -> None:
    server = serve([long_team(tmp_path)], tokens=frozenset({TOKEN}))
    width = "() => document.documentElement.scrollWidth"
    with chromium() as browser:
        page = workbench(browser, server.url, width=360)
        expect(page.locator("#team-description")).to_contain_text(URL)
        page_width = page.evaluate(width)
        page.fill("#input", INPUT)
        page.click("#run")
        view = page.locator("#run-view")
        expect(view).to_have_attribute("data-status", "done", timeout=60_000)
        expect(view.locator(f".tv-f-agent option[value={AGENT}]")).to_have_count(1)
        select_width = view.locator(".tv-f-agent").evaluate("e => e.getBoundingClientRect().width")
        shown = view.locator(".tv-input")
        clamped = shown.evaluate("e => e.getBoundingClientRect().height")
        line = shown.evaluate("e => parseFloat(getComputedStyle(e).lineHeight)")
        view.locator(".tv-input-all").click()
        opened = shown.evaluate("e => e.getBoundingClientRect().height")
        text = shown.inner_text()
        run_width = page.evaluate(width)
    assert page_width <= 360, page_width  # was 526 px
    assert run_width <= 360, run_width
    assert select_width <= 200, select_width  # was as wide as its longest option
    assert clamped <= 4.5 * line < opened, (clamped, line, opened)  # was every line of it, pushing the timeline down
    assert text == "input: " + INPUT  # show all: the whole of it
