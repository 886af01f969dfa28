"""The workbench's answers to the attack on it (/work/attack/ui.md), in headless Chromium: costs written by the
one cost rule, the runs list following waiting runs, a refused answer's message kept, a run that cannot be
opened shown without made-up figures, a waiting run's cancel answered 409, the answer field's hint, the focus
outline of the view's bars."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
from playwright.sync_api import expect

from teamrun.store import open_store
from tests.serve.conftest import TOKEN
from tests.serve.test_workbench_teams import AUTH, chromium, load, workbench
from tests.waiting import wait_until

COSTS = {  # a stored run's cost -> how every place on the page writes it (teamrun.money.format_usd)
    "run-a": (0.00007005, "$0.000070"),
    "run-b": (0.000171, "$0.00017"),
    "run-c": (1.23456, "$1.2346"),
    "run-d": (0.0, "$0.0000"),
}


def test_the_runs_rows_and_the_run_header_write_costs_by_the_shared_rule(serve: Any, tmp_path: Path) -> None:
    store = open_store(tmp_path / "teamrun.db")
    for run_id, (cost, _) in COSTS.items():
        store.runs.start(run_id, "research-report", f"input of {run_id}")
        store.runs.finish(run_id, status="done", final_output="ok", usage={"total_tokens": 778}, cost=cost)
    server = serve([load("research-report")], store=store, tokens=frozenset({TOKEN}))
    with chromium() as browser:
        page = workbench(browser, server.url)
        rows = page.locator("#runs-list .run-row")
        expect(rows).to_have_count(len(COSTS), timeout=30_000)
        listed = {r.get_attribute("data-run"): r.locator(".run-cost").inner_text() for r in rows.all()}
        headers = {}
        held: list[Any] = []  # run-c's record is held back while it is read: the header must not show run-b's

        def hold(route: Any) -> None:
            held.append(route)

        page.route("**/v1/runs/run-c", hold)
        while_read = {}
        for run_id in COSTS:
            page.locator(f'#runs-list .run-row[data-run="{run_id}"]').click()
            expect(page.locator("#run-id")).to_have_text(run_id)
            if run_id == "run-c":
                for _ in range(300):  # the route's handler runs while the page is waited on
                    if held:
                        break
                    page.wait_for_timeout(100)
                assert held, "the page did not ask for run-c's record"
                while_read = {k: page.locator(f"#{k}").text_content() for k in ("status", "tokens", "cost")}
                held[0].continue_()
            expect(page.locator("#run-facts")).to_be_visible(timeout=30_000)
            expect(page.locator("#status")).to_have_text("done", timeout=30_000)
            headers[run_id] = page.locator("#cost").inner_text()
    assert listed == {run_id: text for run_id, (_, text) in COSTS.items()}
    assert headers == listed
    assert while_read == {"status": "-", "tokens": "-", "cost": "-"}  # before the fix: run-b's "done", "$0.00017"


ANSWERS = {"infra": "eu-west-1", "legal": "approved", "comms": "2026-12-24"}


def start_waiting(client: httpx.Client, text: str) -> tuple[str, list[dict[str, Any]]]:
    """Starts a launch-signoff run and waits until it waits for its 3 items."""
    run_id: str = client.post("/v1/runs", json={"team": "launch-signoff", "input": text}).json()["id"]

    def its_items() -> list[dict[str, Any]] | None:
        items = [i for i in client.get("/v1/pending").json()["data"] if i["run_id"] == run_id]
        waiting = client.get(f"/v1/runs/{run_id}").json()["status"] == "waiting"
        return items if waiting and len(items) == 3 else None

    return run_id, wait_until(its_items, f"run {run_id} waiting for its 3 items")


def test_the_runs_list_follows_a_waiting_run_answered_on_the_page_to_its_end(serve: Any, tmp_path: Path) -> None:
    store = open_store(tmp_path / "teamrun.db")
    server = serve([load("launch-signoff")], store=store, tokens=frozenset({TOKEN}))
    with httpx.Client(base_url=server.url, headers=AUTH, timeout=60) as client:
        run_id, items = start_waiting(client, "Launch Falcon")
    with chromium() as browser:
        page = workbench(browser, server.url)
        row = page.locator(f'#runs-list .run-row[data-run="{run_id}"]')
        expect(row.locator(".status-word")).to_have_text("waiting", timeout=30_000)
        for item in items:  # no run opened: the answers are given in Waiting for people only
            li = page.locator(f'#pending-list li[data-run="{run_id}"][data-item="{item["id"]}"]')
            field = li.locator(".pending-value")
            value = ANSWERS[item["agent"]]
            if field.evaluate("e => e.tagName") == "SELECT":
                field.select_option(value)
            else:
                field.fill(value)
            li.locator("button.pending-send").click()
            expect(li).to_have_count(0, timeout=60_000)
        expect(page.locator("#run-id")).to_have_text("-")  # still no run opened
        expect(row.locator(".status-word")).to_have_text("done", timeout=90_000)  # no click on Refresh
        note = page.locator("#runs-note").inner_text()
    assert "waiting" not in note


def test_an_answer_refused_because_it_was_answered_elsewhere_stays_said_after_the_list_redraws(
    serve: Any, tmp_path: Path
) -> None:
    store = open_store(tmp_path / "teamrun.db")
    server = serve([load("launch-signoff")], store=store, tokens=frozenset({TOKEN}))
    with httpx.Client(base_url=server.url, headers=AUTH, timeout=60) as client:
        run_id, items = start_waiting(client, "Launch Falcon")
        item = next(i for i in items if i["agent"] == "legal")
        with chromium() as browser:
            page = workbench(browser, server.url)
            li = page.locator(f'#pending-list li[data-run="{run_id}"][data-item="{item["id"]}"]')
            expect(li).to_have_count(1, timeout=30_000)
            # The page asks for the list every 3 s: while the person picks a value and sends it, the list they are
            # looking at is the one from before curl's answer (a refresh in between would take the item away
            # before the click; the person in this story had the page open before the other answer came).
            held: dict[str, str | None] = {"body": None, "hold": None}

            def pending_list(route: Any) -> None:
                if held["hold"] is not None:
                    route.fulfill(status=200, body=held["hold"], headers={"content-type": "application/json"})
                    return
                response = route.fetch()
                held["body"] = response.text()
                route.fulfill(response=response)

            page.route("**/v1/pending", pending_list)
            with page.expect_response(lambda r: r.url.endswith("/v1/pending")):  # one list asked through the route
                pass
            assert held["body"] is not None and item["id"] in held["body"]
            held["hold"] = held["body"]
            answered = client.post(f"/v1/runs/{run_id}/pending/{item['id']}", json={"answer": "approved", "by": "curl"})
            assert answered.status_code == 200, answered.text
            li.locator(".pending-value").select_option("approved")
            li.locator("button.pending-send").click()
            held["hold"] = None  # from now on the page sees the list as it is
            expect(li).to_have_count(0, timeout=60_000)  # the list was redrawn without it
            with page.expect_response(lambda r: r.url.endswith("/v1/pending")):  # and again (asked every 3 s)
                pass
            said = page.locator("#pending-said")
            expect(said).to_be_visible()
            text = said.inner_text()
            role = said.get_attribute("role")
    assert item["id"] in text and run_id in text and "already answered by curl" in text, text
    assert role == "alert"


def test_a_run_the_page_cannot_open_shows_why_and_no_made_up_figures(serve: Any, tmp_path: Path) -> None:
    store = open_store(tmp_path / "teamrun.db")
    store.runs.start("run-a", "research-report", "a stored run")
    store.runs.finish("run-a", status="done", final_output="ok", usage={"total_tokens": 778}, cost=0.00007005)
    server = serve([load("research-report")], store=store, tokens=frozenset({TOKEN}))
    seen: dict[str, dict[str, Any]] = {}
    with chromium() as browser:
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        page.goto(server.url + "/#run=run-a")  # no token typed
        note = page.locator("#run-view-note")
        expect(note).to_contain_text("cannot open the run", timeout=30_000)
        box = page.locator("#run-box")
        seen["401"] = {
            "note": note.inner_text(),
            "facts": page.locator("#run-facts").is_visible(),
            "cancel": page.locator("#cancel").is_visible(),
            "record": page.locator("#record").is_enabled(),
            "text": box.inner_text(),
        }
        page.fill("#token", TOKEN)  # the linked run opens once the token is typed, with its own figures
        page.dispatch_event("#token", "input")
        expect(page.locator("#status")).to_have_text("done", timeout=30_000)
        seen["done"] = {
            "facts": page.locator("#run-facts").inner_text(),
            "cancel": page.locator("#cancel").is_visible(),
            "record": page.locator("#record").is_enabled(),
        }
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        page.goto(server.url + "/#run=no-such-run")
        note = page.locator("#run-view-note")
        page.fill("#token", TOKEN)
        page.dispatch_event("#token", "input")
        expect(note).to_contain_text("(404", timeout=30_000)  # the 401 before the token, then this
        seen["404"] = {"note": note.inner_text(), "facts": page.locator("#run-facts").is_visible()}

    assert "401" in seen["401"]["note"] and "token" in seen["401"]["note"]
    assert seen["401"]["facts"] is False and seen["401"]["cancel"] is False and seen["401"]["record"] is False
    assert (
        "idle" not in seen["401"]["text"] and "$0" not in seen["401"]["text"] and "tokens 0" not in seen["401"]["text"]
    )
    assert " ".join(seen["done"]["facts"].split()) == "status done thread none tokens 778 cost $0.000070"
    assert seen["done"]["cancel"] is False and seen["done"]["record"] is True
    assert "404" in seen["404"]["note"] and "no run 'no-such-run'" in seen["404"]["note"]
    assert seen["404"]["facts"] is False


def test_cancel_on_a_waiting_run_ends_it_and_a_cancel_after_a_restart_says_it_is_over(
    serve: Any, tmp_path: Path
) -> None:
    """A waiting run is cancelled (tests/serve/test_cancel_waiting.py has the rest); once over, before or after a
    restart, a cancel of a stored run is a 409 saying its status, an unknown id a 404."""
    store = open_store(tmp_path / "teamrun.db")
    store.runs.start("run-over", "launch-signoff", "an old run")
    store.runs.finish("run-over", status="done", final_output="ok", usage={}, cost=0.0)
    first = serve([load("launch-signoff")], store=store, tokens=frozenset({TOKEN}))
    answers: dict[str, Any] = {}
    with httpx.Client(base_url=first.url, headers=AUTH, timeout=60) as client:
        run_id, items = start_waiting(client, "Launch Falcon")
        answers["held"] = client.post(f"/v1/runs/{run_id}/cancel")
    first.stop()
    second = serve([load("launch-signoff")], store=open_store(tmp_path / "teamrun.db"), tokens=frozenset({TOKEN}))
    with httpx.Client(base_url=second.url, headers=AUTH, timeout=60) as client:
        answers["get"] = client.get(f"/v1/runs/{run_id}")
        answers["stored"] = client.post(f"/v1/runs/{run_id}/cancel")
        answers["over"] = client.post("/v1/runs/run-over/cancel")
        answers["unknown"] = client.post("/v1/runs/no-such-run/cancel")
        item = next(i for i in items if i["agent"] == "legal")
        answers["answer"] = client.post(f"/v1/runs/{run_id}/pending/{item['id']}", json={"answer": "approved"})

    assert answers["held"].status_code == 202 and answers["held"].json()["status"] == "cancelled"
    assert answers["get"].status_code == 200 and answers["get"].json()["status"] == "cancelled"
    for key, status in (("stored", "cancelled"), ("over", "done")):
        assert answers[key].status_code == 409 and answers[key].json()["error"]["code"] == "run_not_running"
        assert f"(it is {status})" in answers[key].json()["error"]["message"]
    assert answers["unknown"].status_code == 404 and answers["unknown"].json()["error"]["code"] == "run_not_found"
    assert answers["answer"].status_code == 409, answers["answer"].text  # its questions ended with it
    assert answers["answer"].json()["error"]["code"] == "run_cancelled"


def test_the_answer_field_says_what_to_type_and_the_views_bars_have_the_3px_focus_outline(
    serve: Any, tmp_path: Path
) -> None:
    store = open_store(tmp_path / "teamrun.db")
    server = serve([load("launch-signoff"), load("research-report")], store=store, tokens=frozenset({TOKEN}))
    with httpx.Client(base_url=server.url, headers=AUTH, timeout=60) as client:
        run_id, items = start_waiting(client, "Launch Falcon")
        done = client.post("/v1/runs", json={"team": "research-report", "input": "Compare Zig and C"}).json()["id"]
        assert "event: result" in client.get(f"/v1/runs/{done}/events").text
    dated = next(i for i in items if i["agent"] == "comms")  # answer_schema: a string with a date pattern
    with chromium() as browser:
        page = workbench(browser, server.url)
        field = page.locator(f'#pending-list li[data-run="{run_id}"][data-item="{dated["id"]}"] .pending-value')
        expect(field).to_have_count(1, timeout=30_000)
        placeholder = field.get_attribute("placeholder") or ""
        page.locator(f'#runs-list .run-row[data-run="{done}"]').click()
        bars = page.locator("#run-view .tv-bar.tv-agent.tv-critical")
        expect(bars.first).to_be_visible(timeout=30_000)
        critical = bars.count()
        page.focus("#token")
        outlines = []
        for _ in range(200):  # Tab to the timeline, its one Tab stop (hang guard: 200 stops)
            page.keyboard.press("Tab")
            if page.evaluate("document.activeElement.matches('#run-view .tv-grid .tv-who')"):
                break
        page.keyboard.press("ArrowRight")  # along the row: its agent bar
        for _ in range(page.locator("#run-view .tv-row[data-agent]").count()):  # then down, row by row
            if page.evaluate("document.activeElement.matches('#run-view .tv-bar.tv-agent.tv-critical')"):
                outlines.append(
                    page.evaluate("(s => [s.outlineStyle, s.outlineWidth])(getComputedStyle(document.activeElement))")
                )
            page.keyboard.press("ArrowDown")
    assert placeholder == "a date like 2026-12-07", placeholder  # in words, not the pattern
    assert len(outlines) == critical and all(o == ["solid", "3px"] for o in outlines), outlines
