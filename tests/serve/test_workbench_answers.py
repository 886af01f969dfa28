"""Answering on the workbench (issue 42 item 16), in headless Chromium: a choice is the person's (nothing is
pre-selected), an answer's form is said in words, and an accepted answer is confirmed."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
from playwright.sync_api import expect

from teamrun.store import open_store
from tests.serve.conftest import TOKEN
from tests.serve.test_workbench_fixes import start_waiting
from tests.serve.test_workbench_teams import AUTH, chromium, load, workbench


def test_a_choice_is_not_made_for_the_person_a_date_is_said_in_words_and_an_answer_is_confirmed(
    serve: Any, tmp_path: Path
) -> None:
    store = open_store(tmp_path / "teamrun.db")
    server = serve([load("launch-signoff")], store=store, tokens=frozenset({TOKEN}))
    with httpx.Client(base_url=server.url, headers=AUTH, timeout=60) as client:
        run_id, items = start_waiting(client, "Launch Falcon")
    item = {i["agent"]: i for i in items}
    with chromium() as browser:
        page = workbench(browser, server.url)

        def row(agent: str) -> Any:
            return page.locator(f'#pending-list li[data-run="{run_id}"][data-item="{item[agent]["id"]}"]')

        expect(row("legal")).to_have_count(1, timeout=30_000)
        sign_off = row("legal").locator("select.pending-value")
        chosen = sign_off.input_value()
        posted: list[str] = []
        page.on("request", lambda r: posted.append(r.url) if r.method == "POST" else None)
        row("legal").locator("button.pending-send").click()  # nothing chosen: the page sends nothing
        missing = sign_off.evaluate("e => e.validity.valueMissing")
        date_hint = row("comms").locator(".pending-value").get_attribute("placeholder")
        row("infra").locator(".pending-value").select_option("eu-west-1")
        row("infra").locator("button.pending-send").click()
        expect(row("infra")).to_have_count(0, timeout=30_000)
        confirmed = page.locator("#pending-ok")
        expect(confirmed).to_have_text(
            f'Recorded: {item["infra"]["id"]} of run {run_id}: your answer "eu-west-1". The run goes on.'
        )
        role = confirmed.get_attribute("role")
    assert chosen == "" and missing is True  # was: "approved", pre-selected
    assert [url for url in posted if item["legal"]["id"] in url] == []
    assert date_hint == "a date like 2026-12-07"  # was: text matching the pattern ^\d{4}-\d{2}-\d{2}$
    assert role == "status"
