"""Threads on the page at `/`, in headless Chromium: one thread id, two inputs, one conversation."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from playwright.sync_api import Page, expect, sync_playwright

import teamrun
from tests.serve.conftest import REPO, TOKEN
from tests.serve.test_threads import served
from tests.serve.test_web_page import chromium_path

RESEARCH = REPO / "teams" / "research-report.yaml"


def send(page: Page, text: str) -> str:
    """Sends ``text`` and waits for the run (a new one) to finish; returns its answer."""
    before = page.locator("#run-id").text_content()
    page.fill("#input", text)
    page.click("#run")
    expect(page.locator("#run-id")).not_to_have_text(before or "-", timeout=60_000)
    expect(page.locator("#status")).to_have_text("done", timeout=60_000)
    expect(page.locator("#run-view .tv-tree > ul > li.tv-agent")).to_have_attribute("data-status", "ok")
    return page.locator("#run-view #tv-answer").text_content() or ""


def test_inputs_sent_with_one_thread_id_form_one_conversation(tmp_path: Path) -> None:
    with served(str(RESEARCH), "--store", str(tmp_path / "threads.db")) as url, sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium_path(), args=["--no-sandbox"])
        try:
            page = browser.new_page()
            page.goto(url + "/")
            page.fill("#token", TOKEN)
            page.dispatch_event("#token", "change")
            expect(page.locator("#team option")).to_have_text(["research-report"])
            expect(page.locator("#thread")).to_be_enabled()
            page.fill("#thread", "web-conv")

            first = send(page, "Compare Rust and Go for command-line tools")
            first_thread = page.locator("#run-thread").text_content()
            second = send(page, "Which one compiles faster?")
            second_thread = page.locator("#run-thread").text_content()

            page.fill("#thread", "")
            alone = send(page, "Which one compiles faster?")
            alone_thread = page.locator("#run-thread").text_content()
        finally:
            browser.close()

    assert first_thread == second_thread == "web-conv"
    assert "Earlier in this conversation" not in first
    assert (
        "Earlier in this conversation (1 turn(s)); it began with: Compare Rust and Go for command-line tools" in second
    )
    assert alone_thread == "none" and "Earlier in this conversation" not in alone


def test_without_a_store_the_thread_field_is_off_and_says_why(serve: Any) -> None:
    server = serve([teamrun.load_team(RESEARCH, model="offline")], tokens=frozenset({TOKEN}))

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium_path(), args=["--no-sandbox"])
        try:
            page = browser.new_page()
            page.goto(server.url + "/")
            expect(page.locator("#thread-note")).to_contain_text("--store")
            disabled = page.locator("#thread").is_disabled()
            page.fill("#token", TOKEN)
            page.dispatch_event("#token", "change")
            expect(page.locator("#team option")).to_have_text(["research-report"])
            page.fill("#input", "Compare Rust and Go")
            page.click("#run")
            expect(page.locator("#status")).to_have_text("done", timeout=60_000)
            run_thread = page.locator("#run-thread").text_content()
        finally:
            browser.close()

    assert disabled
    assert run_thread == "none"
