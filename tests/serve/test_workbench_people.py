"""People in the loop on the workbench (teams/launch-signoff.yaml, offline, a store), in headless Chromium:
the run waits, its questions show, axe-core finds no serious problem at a phone's width and a wide one, and
the answers given on the page continue the run to its end, followed in the view."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from playwright.sync_api import Page, expect

from teamrun.store import open_store
from tests.serve.axe_check import serious_problems
from tests.serve.conftest import TOKEN
from tests.serve.test_workbench_teams import chromium, load, run_from_page, workbench

ANSWERS = {"ask_operator": "eu-west-1", "ask_legal": "approved", "ask_owner": "2026-12-24"}


def answer(page: Page, run_id: str, item: str, value: str) -> None:
    row = page.locator(f'#pending-list li[data-run="{run_id}"][data-item="{item}"]')
    field = row.locator(".pending-value")
    if field.evaluate("e => e.tagName") == "SELECT":
        field.select_option(value)
    else:
        field.fill(value)
    row.locator("button.pending-send").click()
    expect(row).to_have_count(0, timeout=60_000)


def test_a_run_waits_for_people_its_questions_are_answered_on_the_page_and_it_ends_done(
    serve: Any, tmp_path: Path
) -> None:
    store = open_store(tmp_path / "teamrun.db")
    server = serve([load("launch-signoff")], store=store, tokens=frozenset({TOKEN}))
    problems: dict[int, list[str]] = {}
    with chromium() as browser:
        page = workbench(browser, server.url)
        run_id = run_from_page(page, "launch-signoff", "Launch the v2 dashboard")
        expect(page.locator("#status")).to_have_text("waiting", timeout=60_000)
        items = page.locator(f'#pending-list li[data-run="{run_id}"]')
        expect(items).to_have_count(3, timeout=60_000)
        questions = {li.get_attribute("data-item"): li.locator(".pending-question").inner_text() for li in items.all()}
        row = page.locator(f'#runs-list .run-row[data-run="{run_id}"]')
        expect(row.locator(".status-word")).to_have_text("waiting", timeout=30_000)
        expect(page.locator("#run-view .tv-title .tv-status")).to_have_text("waiting")

        layout: dict[int, dict[str, Any]] = {}
        for width in (1280, 360):  # a run open and its questions shown
            page.set_viewport_size({"width": width, "height": 900})
            problems[width] = serious_problems(page)
            runs, run = page.locator("#runs").bounding_box(), page.locator("#run-box").bounding_box()
            assert runs is not None and run is not None
            layout[width] = {
                "side by side": runs["x"] + runs["width"] <= run["x"],
                "stacked": runs["y"] + runs["height"] <= run["y"],
                "fits": page.evaluate("document.documentElement.scrollWidth") <= width,
            }

        tools = {}
        for li in items.all():
            tools[li.get_attribute("data-item") or ""] = li.locator(".pending-head").inner_text()
        for item, head in sorted(tools.items()):
            agent = next(a for a in ("infra", "legal", "comms") if a in head)
            tool = {"infra": "ask_operator", "legal": "ask_legal", "comms": "ask_owner"}[agent]
            answer(page, run_id, item, ANSWERS[tool])

        expect(page.locator("#status")).to_have_text("done", timeout=90_000)
        # the view draws one summary per stretch of the run (it waited, then continued): the last one ended done
        expect(page.locator("#run-view .tv-title .tv-status").last).to_have_text("done", timeout=30_000)
        expect(page.locator("#pending-note")).to_have_text("nothing waits for a person", timeout=30_000)
        final = page.locator("#run-view #tv-answer").inner_text()
        expect(row.locator(".status-word")).to_have_text("done", timeout=30_000)

    assert len(questions) == 3 and all(questions.values())
    assert problems == {1280: [], 360: []}, problems
    assert layout[1280] == {"side by side": True, "stacked": False, "fits": True}
    assert layout[360] == {"side by side": False, "stacked": True, "fits": True}
    assert "eu-west-1" in final and "2026-12-24" in final
