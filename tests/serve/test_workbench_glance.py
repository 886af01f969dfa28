"""The workbench at a glance (issue 42 item 15), in headless Chromium: the Runs list in sight under New run, Run
answered at a phone's width, a #run=<id> link followed on the page."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from playwright.sync_api import expect

from teamrun.store import open_store
from tests.serve.conftest import TOKEN
from tests.serve.test_workbench_teams import chromium, load, workbench

VISIBLE = """(e) => { const r = e.getBoundingClientRect();
  const side = document.querySelector('.wb-side').getBoundingClientRect();
  return r.top >= Math.max(0, side.top) && r.bottom <= Math.min(innerHeight, side.bottom); }"""


def stored(tmp_path: Path, count: int) -> Any:
    store = open_store(tmp_path / "teamrun.db")
    for i in range(count):
        store.runs.start(f"run-{i}", "research-report", f"input of run {i}")
        store.runs.finish(f"run-{i}", status="done", final_output="ok", usage={"total_tokens": 10}, cost=0.0)
    return store


def test_the_runs_list_is_in_sight_under_new_run_at_1280x800(serve: Any, tmp_path: Path) -> None:
    server = serve([load("research-report")], store=stored(tmp_path, 8), tokens=frozenset({TOKEN}))
    with chromium() as browser:
        page = workbench(browser, server.url)
        page.set_viewport_size({"width": 1280, "height": 800})
        rows = page.locator("#runs-list .run-row")
        expect(rows).to_have_count(8, timeout=30_000)
        expect(page.locator("#team-graph svg")).to_have_count(1)
        in_sight = sum(1 for row in rows.all() if row.evaluate(VISIBLE))
    assert in_sight >= 4, in_sight  # was 2


def test_run_at_a_phones_width_takes_the_reader_to_the_run(serve: Any, tmp_path: Path) -> None:
    server = serve([load("research-report")], tokens=frozenset({TOKEN}))
    with chromium() as browser:
        page = workbench(browser, server.url, width=390)
        page.fill("#input", "Compare Rust and Go")
        page.click("#run")
        expect(page.locator("#run-id")).not_to_have_text("-", timeout=30_000)
        expect(page.locator("#run-box")).to_be_focused()  # was: the focus stayed on Run, the run far below
        expect(page.locator("#run-box")).to_be_in_viewport()


def test_a_run_link_followed_on_the_page_opens_that_run(serve: Any, tmp_path: Path) -> None:
    server = serve([load("research-report")], store=stored(tmp_path, 2), tokens=frozenset({TOKEN}))
    with chromium() as browser:
        page = workbench(browser, server.url)
        page.evaluate("location.hash = '#run=run-0'")
        expect(page.locator("#run-id")).to_have_text("run-0", timeout=30_000)  # was: read only as the page loaded
        page.evaluate("location.hash = '#run=run-1'")
        expect(page.locator("#run-id")).to_have_text("run-1", timeout=30_000)
        expect(page.locator("#status")).to_have_text("done")
