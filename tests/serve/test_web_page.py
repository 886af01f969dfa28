"""The page at `/`, in headless Chromium (the system browser, driven by playwright)."""

from __future__ import annotations

import shutil
from typing import Any

import httpx
from playwright.sync_api import expect, sync_playwright

import teamrun
from tests.serve.conftest import REPO, TOKEN

TASK = "Compare Rust and Go for command-line tools"


def chromium_path() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    assert found, "the Debian `chromium` package is needed for this test (.ci/install-and-test installs it)"
    return found


def test_the_page_runs_a_team_and_shows_the_agent_tree(serve: Any) -> None:
    team = teamrun.load_team(REPO / "teams" / "research-report.yaml", model="offline")
    expected = team.run_sync(TASK)
    server = serve([team], tokens=frozenset({TOKEN}))

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium_path(), args=["--no-sandbox"])
        try:
            page = browser.new_page()
            page.goto(server.url + "/")
            page.fill("#token", TOKEN)
            page.dispatch_event("#token", "change")
            expect(page.locator("#team option")).to_have_text(["research-report"])
            page.fill("#input", TASK)
            page.click("#run")

            expect(page.locator("#status")).to_have_text("done", timeout=60_000)
            view = page.locator("#run-view")  # the run is shown once: in the run view (issue 36)
            expect(view.locator(".tv-title .tv-status")).to_have_text("done")
            answer = view.locator("#tv-answer").inner_text()  # rendered as Markdown (issue 26)
            answer_items = view.locator("#tv-answer li").all_text_contents()
            tree = view.locator(".tv-tree")
            supervisor = tree.locator("li[data-agent]").first
            supervisor_name = supervisor.get_attribute("data-agent")
            workers = sorted(w.get_attribute("data-agent") or "" for w in supervisor.locator("li[data-agent]").all())
            statuses = {li.get_attribute("data-status") for li in tree.locator("li[data-agent]").all()}
            # each invocation's task, previewed on its timeline row (the supervisor's first, then its workers')
            tasks = [t.text_content() or "" for t in view.locator(".tv-who .tv-preview").all()]
            old_sections = page.locator("#tree, #answer, #delegations").count()
        finally:
            browser.close()

    lines = expected.final_text.splitlines()
    assert answer_items == [line.removeprefix("- ") for line in lines if line.startswith("- ")]
    assert all(line in answer for line in lines if not line.startswith("- "))
    assert supervisor_name == team.config.supervisor
    assert workers == sorted(d.agent for d in expected.delegations)
    assert statuses == {"ok"}
    assert len(tasks) == 1 + len(expected.delegations)  # each worker's task as it got it (its first line)
    assert all(any(t.startswith("· " + d.task.splitlines()[0][:50]) for t in tasks[1:]) for d in expected.delegations)
    assert old_sections == 0


def test_the_page_is_served_with_a_strict_content_security_policy(serve: Any) -> None:
    server = serve(
        [teamrun.load_team(REPO / "teams" / "research-report.yaml", model="offline")], tokens=frozenset({TOKEN})
    )

    page = httpx.get(server.url + "/")
    script = httpx.get(server.url + "/web/app.js")
    other = httpx.get(server.url + "/web/..%2Fapp.py")
    modules = {name: httpx.get(f"{server.url}/web/{name}").status_code for name in ("events.js", "dom.js", "newrun.js")}

    assert page.status_code == 200 and '<script type="module" src="/web/app.js">' in page.text
    assert "default-src 'self'" in page.headers["content-security-policy"]
    assert script.headers["content-type"].startswith("text/javascript")
    assert other.status_code == 404
    assert modules == {"events.js": 200, "dom.js": 200, "newrun.js": 200}  # the modules app.js imports
