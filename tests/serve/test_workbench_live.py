"""The workbench's runs list live and by keyboard, its conversation panel, and a 300-worker run, in headless
Chromium: live runs stay at the top and update without a click; Tab reaches the rows, Enter and Space open
them, the focus is visible; a thread's turns are read and the next one is sent from the panel; a big run is
found with the list's filter and its workers drawn in the view."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

import httpx
from playwright.sync_api import Page, expect

import teamrun
from teamrun.store import open_store
from teamrun.testing import ScriptedModel, tool_calls
from teamrun.testing.scripted import tool_call
from tests.serve.axe_check import serious_problems
from tests.serve.conftest import TOKEN, GatedModel, solo_team
from tests.serve.test_approvals import last_tool_result, stamp_team
from tests.serve.test_workbench_teams import AUTH, chromium, load, run_from_page, workbench

WORKERS = 300
FAN_OUT = """\
version: 1
name: fan-out
description: Hands each item to a worker.
supervisor: lead
agents:
  lead:
    description: Splits the work.
    delegates_to: [worker]
    budget: {{max_steps: 4, max_delegations: {n}}}
    delegation: {{parallel: true, max_concurrency: 50}}
  worker:
    description: Does one item.
"""


def focus_outline(page: Page) -> str:
    """The outline of the focused element, as the browser draws it (``none`` when it draws none)."""
    return str(page.evaluate("getComputedStyle(document.activeElement).outlineStyle"))


def test_live_runs_stay_on_top_update_without_a_click_and_rows_open_by_keyboard(serve: Any, tmp_path: Path) -> None:
    store = open_store(tmp_path / "teamrun.db")
    gated = GatedModel("the **gated** answer")
    server = serve(
        [load("research-report"), teamrun.load_team(solo_team(tmp_path, name="gated"), chat_model=gated)],
        store=store,
        tokens=frozenset({TOKEN}),
    )
    with httpx.Client(base_url=server.url, headers=AUTH, timeout=60) as client:
        live = client.post("/v1/runs", json={"team": "gated", "input": "wait for the gate"}).json()["id"]
        done = client.post("/v1/runs", json={"team": "research-report", "input": "Compare Zig and C"}).json()["id"]
        assert "event: result" in client.get(f"/v1/runs/{done}/events").text

    with chromium() as browser:
        page = workbench(browser, server.url)
        rows = page.locator("#runs-list .run-row")
        expect(rows).to_have_count(2, timeout=30_000)
        order = [r.get_attribute("data-run") for r in rows.all()]  # the live one first, though it is older
        expect(rows.first.locator(".status-word")).to_have_text("running")

        page.focus("#token")
        for _ in range(80):  # Tab through the page until a run row has the focus (hang guard: 80 stops)
            page.keyboard.press("Tab")
            if page.evaluate("document.activeElement.classList.contains('run-row')"):
                break
        reached = page.evaluate("document.activeElement.dataset.run")
        outline = focus_outline(page)
        page.keyboard.press("Enter")
        expect(page.locator("#run-id")).to_have_text(live)
        view = page.locator("#run-view")
        expect(view.locator(".tv-title .tv-status")).to_have_text("running")
        expect(page.locator("#status")).to_have_text("running")
        expect(page.locator("#cancel")).to_be_enabled()
        expect(page.locator("#cancel")).to_be_visible()
        row_live = page.locator(f'#runs-list .run-row[data-run="{live}"]')
        expect(row_live).to_have_attribute("aria-current", "true")

        gated.gate.set()
        expect(row_live.locator(".status-word")).to_have_text("done", timeout=30_000)  # no click: the list updates
        expect(view.locator(".tv-title .tv-status")).to_have_text("done", timeout=30_000)
        expect(view.locator("#tv-answer strong")).to_have_text("gated")
        expect(page.locator("#cancel")).to_be_disabled()
        expect(page.locator("#cancel")).to_be_hidden()  # a finished run has no Cancel

        page.locator(f'#runs-list .run-row[data-run="{done}"]').focus()
        page.keyboard.press("Space")
        expect(page.locator("#run-id")).to_have_text(done)
        expect(view.locator(".tv-title .tv-status")).to_have_text("done")
        expect(view.locator("#tv-answer")).to_contain_text("Compare Zig and C")
        axe_wide = serious_problems(page)

    assert order == [live, done]
    assert reached == live and outline != "none"
    assert axe_wide == []


def test_the_conversation_panel_shows_a_threads_turns_and_sends_the_next(serve: Any, tmp_path: Path) -> None:
    store = open_store(tmp_path / "teamrun.db")
    server = serve([load("research-report")], store=store, tokens=frozenset({TOKEN}))
    with chromium() as browser:
        page = workbench(browser, server.url, width=360)
        expect(page.locator("#thread")).to_be_enabled()
        page.fill("#thread", "web-conv")
        first = run_from_page(page, "research-report", "Compare Rust and Go for command-line tools")
        expect(page.locator("#status")).to_have_text("done", timeout=60_000)
        turns = page.locator("#chat-turns > li")
        expect(page.locator("#chat-thread")).to_have_text("web-conv")
        expect(turns).to_have_count(2, timeout=30_000)

        page.fill("#chat-input", "Which one compiles faster?")
        page.press("#chat-input", "Enter")
        expect(page.locator("#run-id")).not_to_have_text(first, timeout=30_000)
        second = page.locator("#run-id").text_content()
        expect(turns).to_have_count(4, timeout=60_000)
        said = [t.locator(".turn-text").inner_text() for t in turns.all()]
        who = [t.locator(".turn-who").inner_text() for t in turns.all()]
        row = page.locator(f'#runs-list .run-row[data-run="{second}"]')
        expect(row).to_contain_text("web-conv", timeout=30_000)
        axe_narrow = serious_problems(page)

    assert who == ["you", "lead", "you", "lead"]
    assert said[0] == "Compare Rust and Go for command-line tools" and said[2] == "Which one compiles faster?"
    assert "Earlier in this conversation" not in said[1]
    assert "Earlier in this conversation (1 turn(s)); it began with: Compare Rust and Go" in " ".join(said[3].split())
    assert axe_narrow == []


def test_a_300_worker_run_is_found_with_the_list_filter_and_drawn_in_the_view(serve: Any, tmp_path: Path) -> None:
    team_file = tmp_path / "fan-out.yaml"
    team_file.write_text(textwrap.dedent(FAN_OUT.format(n=WORKERS)), encoding="utf-8")
    calls = [("ask_worker", {"task": f"item {i}"}) for i in range(WORKERS)]
    model = ScriptedModel(
        {"lead": [tool_calls(*calls), f"{WORKERS} items done"], "worker": [f"item {i} done" for i in range(WORKERS)]}
    )
    server = serve([teamrun.load_team(team_file, chat_model=model), load("research-report")], tokens=frozenset({TOKEN}))
    task = "Do the 300 items: " + "each one carefully, " * 10
    with httpx.Client(base_url=server.url, headers=AUTH, timeout=120) as client:
        other = client.post("/v1/runs", json={"team": "research-report", "input": "Compare Rust and Go"}).json()["id"]
        big = client.post("/v1/runs", json={"team": "fan-out", "input": task}).json()["id"]
        for run in (other, big):
            assert "event: result" in client.get(f"/v1/runs/{run}/events").text

    with chromium() as browser:
        page = workbench(browser, server.url)
        rows = page.locator("#runs-list .run-row")
        expect(rows).to_have_count(2, timeout=30_000)
        page.select_option("#runs-team", "fan-out")
        expect(rows).to_have_count(1)
        preview = rows.first.locator(".run-input").inner_text()
        rows.first.click()
        expect(page.locator("#run-id")).to_have_text(big)
        view = page.locator("#run-view")
        expect(view.locator(".tv-title .tv-status")).to_have_text("done", timeout=60_000)
        expect(view.locator(".tv-row[data-agent=worker]")).to_have_count(WORKERS, timeout=60_000)
        expect(view.locator("#tv-answer")).to_contain_text(f"{WORKERS} items done")
        page.select_option("#runs-team", "")
        expect(rows).to_have_count(2)

    assert preview.endswith("…") and len(preview) == 140 and task.startswith(preview[:-1])


def test_without_a_store_a_tool_call_waiting_for_approval_is_approved_from_the_run_panel(
    serve: Any, tmp_path: Path
) -> None:
    model = ScriptedModel({"lead": [tool_call("stamp", path=str(tmp_path / "stamp.txt")), last_tool_result]})
    server = serve([teamrun.load_team(stamp_team(tmp_path), chat_model=model)], tokens=frozenset({TOKEN}))
    with chromium() as browser:
        page = workbench(browser, server.url)
        expect(page.locator("#pending-note")).to_contain_text("--store")
        run_from_page(page, "stamper", "stamp it")
        asked = page.locator("#approvals .approval")
        expect(asked).to_have_count(1, timeout=60_000)
        question = asked.inner_text()
        asked.get_by_role("button", name="Approve").click()
        expect(page.locator("#status")).to_have_text("done", timeout=60_000)
        expect(asked).to_have_count(0)
        answer = page.locator("#run-view #tv-answer").inner_text()

    assert "Allow stamp(" in question and "stamp.txt" in question
    assert "stamped " in answer and (tmp_path / "stamp.txt").read_text() == "ran"
