"""The page answers what a waiting run waits for (a server with a store), in headless Chromium."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
from playwright.sync_api import expect, sync_playwright

import teamrun
from teamrun.store import open_store
from teamrun.testing.scripted import ScriptedCall, ScriptedModel, tool_call
from tests.serve.conftest import TOKEN, until_run, until_status
from tests.serve.test_web_page import chromium_path


def ask_team(tmp_path: Path) -> Path:
    path = tmp_path / "ask.yaml"
    path.write_text(
        """\
version: 1
name: asker
supervisor: lead
agents:
  lead:
    description: Asks where to deploy.
    tools: [ask_region]
tools:
  ask_region:
    person: {choices: [eu-west-1, us-east-1]}
""",
        encoding="utf-8",
    )
    return path


def said(call: ScriptedCall) -> str:
    return f"deploying to {call.messages[-1].get('content')}"


def test_the_page_lists_a_waiting_runs_question_and_answers_it(serve: Any, tmp_path: Path) -> None:
    model = ScriptedModel({"lead": [tool_call("ask_region", question="Which region?"), said]})
    store = open_store(tmp_path / "runs.db")
    team = teamrun.load_team(ask_team(tmp_path), chat_model=model, store=store)
    server = serve([team], tokens=frozenset({TOKEN}), store=store)
    auth = {"Authorization": f"Bearer {TOKEN}"}
    with httpx.Client(base_url=server.url, headers=auth, timeout=120) as client:
        run_id = client.post("/v1/runs", json={"team": "asker", "input": "deploy"}).json()["id"]
        until_status(client, run_id, "waiting")

        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=chromium_path(), args=["--no-sandbox"])
            try:
                page = browser.new_page()
                page.goto(server.url + "/")
                page.fill("#token", TOKEN)
                page.dispatch_event("#token", "input")
                item = page.locator(f'#pending-list li[data-run="{run_id}"]')
                expect(item).to_have_count(1, timeout=30_000)
                question = item.locator(".pending-question").inner_text()
                choices = item.locator("select.pending-value option").all_text_contents()
                item.locator("select.pending-value").select_option("us-east-1")
                item.locator("button.pending-send").click()
                expect(page.locator("#pending-list li")).to_have_count(0, timeout=30_000)
                expect(page.locator("#pending-note")).to_have_text("nothing waits for a person")
            finally:
                browser.close()

        record = until_run(client, run_id, lambda r: r["status"] not in ("waiting", "running"), "its end")
    assert question == "Which region?" and choices == ["choose one…", "eu-west-1", "us-east-1"]
    assert record["status"] == "done" and record["final_text"] == "deploying to us-east-1"
