"""The page at `/` with auth on, in headless Chromium: the token works as typed, and the run record (JSON) is read
with it (issue 22, serve item 7)."""

from __future__ import annotations

import json
from typing import Any

import httpx
from playwright.sync_api import expect, sync_playwright

import teamrun
from tests.serve.conftest import REPO, TOKEN
from tests.serve.test_web_page import chromium_path

TASK = "Compare Rust and Go for command-line tools"


def test_the_token_works_as_typed_and_the_run_record_is_read_with_it(serve: Any) -> None:
    server = serve(
        [teamrun.load_team(REPO / "teams" / "research-report.yaml", model="offline")], tokens=frozenset({TOKEN})
    )
    unauthorized: list[str] = []

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium_path(), args=["--no-sandbox"])
        try:
            page = browser.new_page()
            page.on("response", lambda r: unauthorized.append(r.url) if r.status == 401 else None)
            page.goto(server.url + "/")
            expect(page.locator("#error")).to_contain_text("cannot list teams")  # no token yet
            page.click("#token")
            page.keyboard.type(TOKEN)  # key by key; the field keeps the focus (no blur, no change event)
            expect(page.locator("#team option")).to_have_text(["research-report"])
            expect(page.locator("#token")).to_be_focused()
            expect(page.locator("#error")).to_have_text("")
            asked_before_run = len(unauthorized)

            page.fill("#input", TASK)
            page.click("#run")
            expect(page.locator("#status")).to_have_text("done", timeout=60_000)
            run_id = page.locator("#run-id").text_content() or ""
            page.click("#record")
            expect(page.locator("#record-json")).to_be_visible()
            shown = json.loads(page.locator("#record-json").text_content() or "")
            url_after = page.url
        finally:
            browser.close()

    record = httpx.get(f"{server.url}/v1/runs/{run_id}", headers={"Authorization": f"Bearer {TOKEN}"}).json()
    assert shown == record
    assert shown["id"] == run_id and shown["status"] == "done" and shown["final_text"]
    assert len(unauthorized) == asked_before_run, f"401s after the token was typed: {unauthorized}"
    assert url_after.startswith(server.url + "/") and "/v1/runs" not in url_after  # read in the page, no navigation
