"""How the workbench draws a run's outcome (issue 42 item 13), in headless Chromium: a run cancelled from the page
is cancelled, not failed; a failure is told once, as `trace view` tells it; a run waiting for an approval shows
the tokens its view adds up."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from playwright.sync_api import expect

import teamrun
from teamrun.errors import ModelError
from teamrun.llm.types import Message, ModelReply, ModelSettings, ToolSchema
from tests.serve.conftest import TOKEN, GatedModel, solo_team
from tests.serve.test_approvals import stamp_team
from tests.serve.test_workbench_teams import chromium, workbench


class BrokenModel:
    """Every call fails as a provider's 500 would."""

    async def complete(
        self,
        messages: Sequence[Message],
        *,
        settings: ModelSettings,
        tools: Sequence[ToolSchema] = (),
        response_format: Mapping[str, Any] | None = None,
    ) -> ModelReply:
        raise ModelError("the provider broke (HTTP 500)")


def test_a_run_cancelled_from_the_page_is_drawn_cancelled_not_failed(serve: Any, tmp_path: Path) -> None:
    model = GatedModel()
    server = serve([teamrun.load_team(solo_team(tmp_path), chat_model=model)], tokens=frozenset({TOKEN}))
    with chromium() as browser:
        page = workbench(browser, server.url)
        page.fill("#input", "wait")
        page.click("#run")
        view = page.locator("#run-view")
        expect(view.locator(".tv-bar.tv-llm")).to_have_count(1, timeout=30_000)  # the model call is in flight
        page.click("#cancel")
        expect(page.locator("#status")).to_have_text("cancelled", timeout=30_000)
        expect(view).to_have_attribute("data-status", "cancelled")
        levels = [li.get_attribute("data-level") for li in view.locator(".tv-problems li").all()]
        failed_bars = view.locator(".tv-bar.tv-failed").count()
        call = view.locator(".tv-bar.tv-llm").get_attribute("data-status")
    assert levels == ["cancelled"]  # was: "error lead: cancelled" beside it
    assert (failed_bars, call) == (0, "cancelled")  # was: red bars


def test_a_served_run_that_fails_tells_its_failure_once_on_its_span(serve: Any, tmp_path: Path) -> None:
    server = serve([teamrun.load_team(solo_team(tmp_path), chat_model=BrokenModel())], tokens=frozenset({TOKEN}))
    with chromium() as browser:
        page = workbench(browser, server.url)
        page.fill("#input", "go")
        page.click("#run")
        view = page.locator("#run-view")
        expect(page.locator("#status")).to_have_text("failed", timeout=30_000)
        expect(view.locator(".tv-row[data-agent]")).to_have_count(1)  # its events are drawn
        expect(view.locator(".tv-bar.tv-llm")).to_have_attribute("data-status", "error")
        problems = view.locator(".tv-problems li")
        expect(view.locator(".tv-problems h3")).to_have_text("Errors, limits and warnings (1)")  # was (2)
        expect(problems).to_contain_text("lead: the provider broke (HTTP 500)")
        problems.locator("[role=button]").click()  # on its span, as in `trace view`
        expect(view.locator("#tv-details h3")).to_contain_text("model call")


def test_a_run_waiting_for_an_approval_shows_the_tokens_its_view_adds_up(serve: Any, tmp_path: Path) -> None:
    server = serve([teamrun.load_team(stamp_team(tmp_path), model="offline")], tokens=frozenset({TOKEN}))
    with chromium() as browser:
        page = workbench(browser, server.url)
        page.fill("#input", "stamp it")
        page.click("#run")
        expect(page.locator("#approvals .approval")).to_have_count(1, timeout=30_000)
        summary = page.locator('#run-view .tv-summary [data-fact="tokens"] b')
        expect(summary).not_to_have_text("0", timeout=30_000)
        tokens = summary.inner_text()
        expect(page.locator("#tokens")).to_have_text(tokens)  # was: 0 while the summary said 901
        expect(page.locator("#cost")).to_have_text(page.locator('#run-view [data-fact="cost"] b').inner_text())
