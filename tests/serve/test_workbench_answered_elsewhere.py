"""The Run panel follows the run's record (the attacker's D1): a waiting run answered elsewhere (over HTTP here,
as with ``teamrun answer``) turned ``done`` in the API and the Runs row while the panel kept ``waiting`` with its
Cancel, and a Cancel refused ("not running (it is done)") left it so. In headless Chromium, with a store."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
from playwright.sync_api import Page, expect

import teamrun
from teamrun.store import open_store
from tests.serve.conftest import TOKEN, until_status
from tests.serve.test_workbench_teams import chromium, run_from_page, workbench

ASK = """version: 1
name: ask1
description: One agent asks one question.
supervisor: solo
defaults:
  model: offline
agents:
  solo:
    instructions: Ask the operator which region to use (ask_operator), then answer with it.
    tools: [ask_operator]
    budget: {max_steps: 3}
tools:
  ask_operator:
    description: Ask the operator which region.
    person:
      choices: [eu, us]
"""
AUTH = {"Authorization": f"Bearer {TOKEN}"}


def started_waiting(serve: Any, tmp_path: Path) -> tuple[Any, Any]:
    (tmp_path / "ask1.yaml").write_text(ASK, encoding="utf-8")
    store = open_store(tmp_path / "teamrun.db")
    team = teamrun.load_team(tmp_path / "ask1.yaml", store=store)
    return serve([team], store=store, tokens=frozenset({TOKEN})), store


def answer_over_http(url: str, run_id: str) -> None:
    with httpx.Client(base_url=url, headers=AUTH, timeout=120) as client:
        [item] = client.get("/v1/pending", params={"run_id": run_id}).json()["data"]
        said = client.post(f"/v1/runs/{run_id}/pending/{item['id']}", json={"answer": "eu"})
        assert said.status_code == 200, said.text
        until_status(client, run_id, "done")


def waiting_on_the_page(page: Page) -> str:
    run_id = run_from_page(page, "ask1", "answered elsewhere")
    expect(page.locator("#status")).to_have_text("waiting", timeout=60_000)
    expect(page.locator("#cancel")).to_be_visible()
    return run_id


def test_a_waiting_run_answered_elsewhere_turns_done_in_the_run_panel(serve: Any, tmp_path: Path) -> None:
    server, _ = started_waiting(serve, tmp_path)
    with chromium() as browser:
        page = workbench(browser, server.url)
        run_id = waiting_on_the_page(page)
        answer_over_http(server.url, run_id)  # not from the page: the panel hears of it through the runs list
        expect(page.locator(f'#runs-list .run-row[data-run="{run_id}"] .status-word')).to_have_text(
            "done", timeout=60_000
        )
        expect(page.locator("#status")).to_have_text("done", timeout=60_000)
        expect(page.locator("#cancel")).to_be_hidden()
        expect(page.locator("#run-view .tv-title .tv-status").last).to_have_text("done", timeout=30_000)
        assert "eu" in page.locator("#run-view #tv-answer").inner_text()


def test_a_cancel_refused_because_the_run_is_over_shows_the_run_as_it_is(serve: Any, tmp_path: Path) -> None:
    server, _ = started_waiting(serve, tmp_path)
    with chromium() as browser:
        page = workbench(browser, server.url)
        run_id = waiting_on_the_page(page)
        # a status the run never has (with "running" the list could catch it resumed and tell the panel): its row
        # is not listed, so only the refusal tells the panel
        page.select_option("#runs-status", "failed")
        expect(page.locator(f'#runs-list .run-row[data-run="{run_id}"]')).to_have_count(0, timeout=30_000)
        answer_over_http(server.url, run_id)
        expect(page.locator("#status")).to_have_text("waiting")  # nothing told the panel yet
        page.click("#cancel")
        expect(page.locator("#error")).to_contain_text("is not running (it is done)", timeout=30_000)
        expect(page.locator("#status")).to_have_text("done", timeout=30_000)
        expect(page.locator("#cancel")).to_be_hidden()
