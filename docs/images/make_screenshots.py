#!/usr/bin/env python
"""Regenerate the run-view screenshots in this folder (``python docs/images/make_screenshots.py``).

``--view-only``: only the run view's pictures (run-view.png, run-view-details.png at 1360 px, run-view-narrow.png
at 800 px), not the served page's (serve-*.png).

A team of three researchers runs against the scripted fake provider from
``tests/fakeserver.py`` (no key, no network): one calls a tool, one is retried
after a 429, one fails; the lead reaches its step limit. ``teamrun trace view``
draws its trace, and ``teamrun serve``'s workbench shows a few runs; headless Chromium
takes the pictures.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import textwrap
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path[:0] = [str(ROOT / "runner"), str(ROOT)]
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ["TEAMRUN_DOCS_KEY"] = "sk-docs-0123456789"
os.environ["NO_PROXY"] = os.environ["no_proxy"] = "127.0.0.1,localhost"

TEAM = """\
version: 1
name: market-scan
supervisor: lead
defaults: {{api_base: "{url}", api_key_env: TEAMRUN_DOCS_KEY, num_retries: 2}}
agents:
  lead:
    model: openai/gpt-4o
    description: Plans the scan and writes the summary.
    instructions: Split the question across your researchers, then summarise.
    delegates_to: [pricing, reviews, competitors]
    delegation: {{parallel: true}}
    budget: {{max_steps: 1}}
  pricing:
    model: openai/gpt-4o-mini
    description: Looks up prices.
    tools: [price_list]
  reviews: {{model: openai/gpt-4o-mini, description: Reads user reviews.}}
  competitors: {{model: openai/gpt-4o-mini, description: Lists competitors.}}
tools:
  price_list:
    command: ["echo", "basic $9/month, pro $29/month ({{{{ product }}}})"]
    parameters: {{product: {{type: string}}}}
"""

ANSWER = """## Market scan: note-taking apps

**Pricing** is in line with the market: *basic* at $9/month, *pro* at $29/month.

- Reviews praise the sync and the search
- Competitor research **failed** (provider error): rerun it before deciding

> Step limit reached: this summary uses what the researchers returned.
"""


def main() -> None:
    from playwright.sync_api import sync_playwright

    from teamrun.cli import main as teamrun
    from tests.fakeserver import FakeOpenAI, http_error, text, tool_calls

    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    assert chromium, "needs the system chromium"
    with tempfile.TemporaryDirectory() as folder, FakeOpenAI() as server:
        tmp = Path(folder)
        server.script(
            "gpt-4o",
            [
                tool_calls(
                    ("ask_pricing", {"task": "Prices of Notely"}),
                    ("ask_reviews", {"task": "What do users say about Notely?"}),
                    ("ask_competitors", {"task": "Who competes with Notely?"}),
                    delay=0.35,
                ),
                text(ANSWER, delay=0.5),
            ],
        )
        server.handler("gpt-4o-mini", _workers(text, tool_calls, http_error))
        team = tmp / "team.yaml"
        team.write_text(textwrap.dedent(TEAM.format(url=server.url)), encoding="utf-8")
        trace = tmp / "run.jsonl"
        teamrun(
            [
                "execute",
                str(team),
                "-i",
                "Scan the market for Notely",
                "--progress",
                "none",
                "--trace",
                str(trace),
                "--trace-content",
            ]
        )
        page_file = tmp / "run.html"
        assert teamrun(["trace", "view", str(trace), "-o", str(page_file)]) == 0
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
            page = browser.new_page(viewport={"width": 1360, "height": 900}, device_scale_factor=1)
            page.goto(page_file.as_uri())
            page.screenshot(path=str(HERE / "run-view.png"), full_page=True)
            page.locator(".tv-row[data-agent=pricing] .tv-bar.tv-llm").first.click()
            page.screenshot(path=str(HERE / "run-view-details.png"))
            narrow = browser.new_page(viewport={"width": 800, "height": 1000}, device_scale_factor=1)
            narrow.goto(page_file.as_uri())
            narrow.locator(".tv-timeline").scroll_into_view_if_needed()
            narrow.screenshot(path=str(HERE / "run-view-narrow.png"))
            if "--view-only" not in sys.argv[1:]:
                _serve_page(browser, tmp)
            browser.close()


def _serve_page(browser, tmp: Path) -> None:  # type: ignore[no-untyped-def]
    """`teamrun serve`'s workbench with a store: a few runs of three teams (one waiting for people), a threaded
    run opened in the view; serve-workbench.png (wide) and serve-workbench-narrow.png (a phone's width)."""
    import httpx

    import teamrun
    from teamrun.serve import ServeSettings
    from teamrun.store import open_store
    from tests.serve.conftest import RunningServer

    teams = [
        teamrun.load_team(ROOT / "teams" / f"{name}.yaml", model="offline")
        for name in ("research-report", "launch-signoff", "support-triage")
    ]
    server = RunningServer(teams, ServeSettings(store=open_store(tmp / "teamrun.db"))).start()
    try:
        with httpx.Client(base_url=server.url, timeout=60) as client:
            for body in (
                {"team": "launch-signoff", "input": "Launch the v2 dashboard"},
                {"team": "support-triage", "input": "I was charged twice this month"},
                {"team": "research-report", "input": "Compare Rust and Go", "thread": "lang-choice"},
                {"team": "research-report", "input": "Which one compiles faster?", "thread": "lang-choice"},
            ):
                run = client.post("/v1/runs", json=body).json()["id"]
                client.get(f"/v1/runs/{run}/events")
        for width, height, name in ((1360, 1200, "serve-workbench.png"), (360, 2400, "serve-workbench-narrow.png")):
            page = browser.new_page(viewport={"width": width, "height": height}, device_scale_factor=1)
            page.goto(server.url + f"/#run={run}")
            page.wait_for_selector("#run-view .tv-row")
            page.wait_for_selector("#chat-turns > li")
            page.wait_for_selector("#pending-list > li")
            page.evaluate("window.scrollTo(0, 0)")
            page.screenshot(path=str(HERE / name))
            page.close()
    finally:
        server.stop()


def _workers(text, tool_calls, http_error):  # type: ignore[no-untyped-def]
    """The three researchers' replies, by the task each was given (they share one model name)."""
    seen: dict[str, int] = {}

    def answer(request):  # type: ignore[no-untyped-def]
        task = next(m["content"] for m in request["messages"] if m["role"] == "user")
        turn = seen[task] = seen.get(task, 0) + 1
        if "Prices" in task:
            return (
                tool_calls(("price_list", {"product": "Notely"}), delay=0.3)
                if turn == 1
                else text("basic $9/month, pro $29/month", delay=0.4)
            )
        if "users say" in task:
            return http_error(429, retry_after=0.3) if turn == 1 else text("Users like sync and search.", delay=0.6)
        return http_error(500, message="upstream exploded", delay=0.2)

    return answer


if __name__ == "__main__":
    main()
