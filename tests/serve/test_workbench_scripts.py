"""The workbench's scripts (issue 43 item 7), in headless Chromium: ES modules that name their events from one
table, one status palette for the Run panel, the runs list and the view, and a run drawn once however often its
events arrive or it is opened."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import httpx
from playwright.sync_api import Page, Route, expect

from teamrun.store import open_store
from tests.serve.conftest import REPO, TOKEN, until_status
from tests.serve.test_workbench_teams import AUTH, TASK, chromium, load, workbench

WEB = REPO / "runner" / "teamrun" / "serve" / "web"


def test_the_event_names_are_one_table_and_every_script_is_a_module() -> None:
    named = {
        path.name: sorted(set(re.findall(r"[\"']teamrun:[a-z-]+[\"']", path.read_text(encoding="utf-8"))))
        for path in WEB.glob("*.js")
    }
    page = (WEB / "index.html").read_text(encoding="utf-8")
    web_scripts = re.findall(r"<script[^>]*src=\"/web/[^\"]+\"[^>]*>", page)

    assert {name: found for name, found in named.items() if found} == {
        "events.js": [
            '"teamrun:answered"',
            '"teamrun:init"',
            '"teamrun:open"',
            '"teamrun:run-over"',
            '"teamrun:shown"',
            '"teamrun:store"',
            '"teamrun:teams"',
            '"teamrun:token"',
        ]
    }
    assert web_scripts == ['<script type="module" src="/web/app.js">']  # it imports the others


def test_the_page_starts_with_no_global_of_its_own_and_says_a_misspelt_event(serve: Any) -> None:
    server = serve([load("research-report")])
    with chromium() as browser:
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        problems: list[str] = []
        page.on("pageerror", lambda error: problems.append(str(error)))
        page.goto(server.url + "/")
        expect(page.locator("#team-graph svg")).to_have_count(1, timeout=30_000)
        names = ["TeamrunGraph", "TeamrunWorkbench", "loadPending", "startRun"]
        globals_ = page.evaluate("(names) => names.filter((n) => n in window)", names)
        said = page.evaluate(
            "import('/web/events.js').then((m) => {"
            " try { m.say('teamrun:opne'); return ''; } catch (e) { return e.message; } })"
        )
    assert globals_ == [] and problems == []
    assert said.startswith("no workbench event 'teamrun:opne'") and "teamrun:open" in said


def _doubled(route: Route) -> None:
    """The run's event stream with every event sent twice (the same SSE id), as a stream read again would."""
    response = route.fetch()
    blocks = [b for b in response.text().split("\n\n") if b.strip()]
    body = "".join(block + "\n\n" + (block + "\n\n" if block.startswith("id:") else "") for block in blocks)
    route.fulfill(status=200, body=body, headers={"content-type": "text/event-stream"})


def _open(page: Page, run_id: str) -> None:
    page.evaluate("(id) => window.dispatchEvent(new CustomEvent('teamrun:open', { detail: { id } }))", run_id)


def test_a_run_opened_twice_with_each_event_delivered_twice_is_drawn_once(serve: Any) -> None:
    """CI failure: "two `.tv-status` elements" in test_workbench_teams' first test (a run drawn as two segments)."""
    server = serve([load("research-report")], tokens=frozenset({TOKEN}))
    with httpx.Client(base_url=server.url, headers=AUTH, timeout=60) as client:
        run_id = client.post("/v1/runs", json={"team": "research-report", "input": TASK}).json()["id"]
        until_status(client, run_id, "done")
    with chromium() as browser:
        page = workbench(browser, server.url)
        page.route("**/events", _doubled)
        _open(page, run_id)
        _open(page, run_id)
        view = page.locator("#run-view")
        expect(view).to_have_attribute("data-status", "done", timeout=30_000)
        expect(view.locator(".tv-row[data-agent]")).to_have_count(3)
        expect(view.locator(".tv-summary")).to_have_count(1)
        statuses = view.locator(".tv-status").count()
        parts = view.locator('[data-fact="part"]').count()
    assert (statuses, parts) == (1, 0)


def test_a_continued_run_keeps_its_parts_when_its_events_come_twice(serve: Any, tmp_path: Path) -> None:
    """A real continuation (a later run_start of the same span) still starts a part; a repeated line does not."""
    lines = [json.loads(line) for line in (REPO / "tests" / "view" / "continued_run.jsonl").read_text().splitlines()]
    server = serve([load("research-report")])
    with chromium() as browser:
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        page.goto(server.url + "/")
        expect(page.locator("#team option")).not_to_have_count(0, timeout=30_000)
        parts = page.evaluate(
            """(lines) => {
              const box = document.createElement("div"); document.body.append(box);
              const doubled = lines.flatMap((l) => [l, JSON.parse(JSON.stringify(l))]);
              TeamrunView.mount(box, { records: doubled, ended: true });
              const parts = [...box.querySelectorAll('[data-fact="part"] b')].map((b) => b.textContent);
              return [box.querySelectorAll(".tv-summary").length, parts];
            }""",
            lines,
        )
    assert parts == [4, ["1 of 4", "2 of 4 (continued)", "3 of 4 (continued)", "4 of 4 (continued)"]]


STATUSES = ["running", "waiting", "done", "failed", "budget_exhausted", "cancelled", "interrupted"]


def test_every_status_has_one_colour_in_the_run_panel_the_runs_list_and_the_view(serve: Any, tmp_path: Path) -> None:
    store = open_store(tmp_path / "teamrun.db")
    server = serve([load("research-report")], store=store, tokens=frozenset({TOKEN}))
    runs = [
        {
            "id": f"run-{s}",
            "team": "research-report",
            "status": s,
            "thread": None,
            "tokens": 0,
            "cost": 0.0,
            "input": s,
            "source": "store",
            "events": False,
            "started_at": "2026-12-07T00:00:00Z",
        }
        for s in STATUSES
    ]

    def listed(route: Route) -> None:
        if route.request.url.endswith("/v1/runs"):
            listing = json.dumps({"object": "list", "data": runs})
            route.fulfill(status=200, body=listing, content_type="application/json")
            return
        run = next(r for r in runs if route.request.url.endswith("/" + r["id"]))
        route.fulfill(status=200, body=json.dumps(run), content_type="application/json")

    colour = "(e) => [getComputedStyle(e).color, getComputedStyle(e).backgroundColor]"
    seen: dict[str, dict[str, Any]] = {}
    with chromium() as browser:
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        page.route(re.compile(r".*/v1/runs(/run-[a-z_]+)?$"), listed)
        page.goto(server.url + "/")
        page.fill("#token", TOKEN)
        page.dispatch_event("#token", "input")
        expect(page.locator("#runs-list .run-row")).to_have_count(len(STATUSES), timeout=30_000)
        for status in STATUSES:
            page.locator(f'#runs-list .run-row[data-run="run-{status}"]').click()
            expect(page.locator("#status")).to_have_text(status, timeout=30_000)
            expect(page.locator("#run-view .tv-title .tv-status")).to_have_text(status)
            row = page.locator(f'#runs-list .run-row[data-run="run-{status}"]')
            expect(row).to_have_attribute("aria-current", "true")  # the list redrawn for the opened run: read it now
            seen[status] = {
                "panel": page.locator("#status").evaluate(colour),
                "list": row.locator(".status-word").evaluate(colour),
                "view": page.locator("#run-view .tv-title .tv-status").evaluate(colour),
            }
    for status, where in seen.items():
        assert where["panel"] == where["list"] == where["view"], (status, where)
    assert seen["waiting"]["view"] != seen["done"]["view"]  # was: waiting green in the view, purple in the panel
    assert seen["cancelled"]["view"] != seen["failed"]["view"]  # cancelled is not a failure
    assert seen["interrupted"]["view"] != seen["done"]["view"]  # an interrupted run did not end ok
