"""Issue 45 in the run view (Chromium): a call that fell back says so on its bar and in its details with the model
that answered; cached input tokens are counted in a call's figures and the summary; a rate-limit wait
(``llm_wait``) is drawn as a wait, not as the model's time."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import expect

from teamrun.llm import breaker, ratelimit
from teamrun.llm.breaker import BreakerRegistry
from teamrun.llm.ratelimit import RateLimits
from tests.fakeserver import FakeOpenAI, http_error, text, tool_calls
from tests.observe.handmade import line
from tests.view.conftest import OpenPage
from tests.view.pages import record_view, view_of

WHY = "openai/backup after openai/primary failed: server error (HTTP 500)"


def _fallen_back() -> list[dict[str, Any]]:
    """A lead's two model calls on ``openai/primary`` (falling back to ``openai/backup``): the first waits 2 s for the
    rate limit, then openai/backup answers it (96 of 120 input tokens cached); the second is answered by the first."""
    lead = ["lead"]
    first = {"input_tokens": 120, "output_tokens": 3, "total_tokens": 123, "cached_tokens": 96}
    second = {"input_tokens": 40, "output_tokens": 10, "total_tokens": 50}
    both = {"input_tokens": 160, "output_tokens": 13, "total_tokens": 173, "cached_tokens": 96}
    return [
        line("run_start", 0.0, span="s1", team="t"),
        line("agent_start", 0.0, span="s2", parent="s1", path=lead, model="openai/primary"),
        line("llm_start", 1.0, span="c1", parent="s2", path=lead, model="openai/primary"),
        line("llm_wait", 1.0, span="c1", path=lead, model="openai/primary", seconds=2.0, reason="requests_per_minute"),
        line(
            "llm_end",
            4.0,
            span="c1",
            parent="s2",
            path=lead,
            status="ok",
            usage=first,
            cost=0.001,
            model="openai/backup",
            fallback=WHY,
            waited_s=2.0,
            finish_reason="stop",
        ),
        line("llm_start", 5.0, span="c2", parent="s2", path=lead, model="openai/primary"),
        line("llm_end", 6.0, span="c2", parent="s2", path=lead, status="ok", usage=second, cost=0.002),
        line("agent_end", 6.0, span="s2", parent="s1", path=lead, status="ok", usage=both, cost=0.003),
        line("run_end", 6.0, span="s1", status="done", usage=both, cost=0.003),
    ]


def test_a_call_that_fell_back_says_so_on_its_bar_and_in_its_details(tmp_path: Path, open_page: OpenPage) -> None:
    opened = open_page(view_of(_fallen_back(), tmp_path).as_uri())
    page = opened.page
    calls = page.locator(".tv-row[data-agent=lead] .tv-bar.tv-llm")
    expect(calls).to_have_count(2)
    fell, stayed = calls.nth(0), calls.nth(1)
    assert "tv-fallback" in (fell.get_attribute("class") or "").split()
    assert "tv-fallback" not in (stayed.get_attribute("class") or "").split()
    expect(fell).to_have_attribute("aria-label", f"model call openai/backup · ok · fallback: {WHY}")
    expect(stayed).to_have_attribute("aria-label", "model call openai/primary · ok")
    mark = page.locator(".tv-row[data-agent=lead] .tv-mark-fallback")
    expect(mark).to_have_count(1)
    expect(mark).to_have_attribute("title", f"fallback: {WHY}")

    fell.click()
    details = page.locator(".tv-details")
    expect(details.locator("h3")).to_contain_text("model call openai/backup")
    facts = dict(zip(details.locator("dt").all_inner_texts(), details.locator("dd").all_inner_texts(), strict=True))
    assert facts["answered by"] == "openai/backup"
    assert facts["asked first"] == "openai/primary"
    assert facts["fallback"] == WHY
    assert facts["tokens"] == "123 (in 120, 96 cached, out 3)"
    assert facts["rate-limit wait"] == "2.00 s (not model time)"
    assert facts["model time"] == "1.00 s"
    assert "waited 2.00 s for openai/primary's rate limit (requests per minute), not model time" in details.inner_text()
    assert opened.problems == []


def test_cached_tokens_are_in_the_summary_and_a_rate_limit_wait_is_drawn_as_a_wait(
    tmp_path: Path, open_page: OpenPage
) -> None:
    opened = open_page(view_of(_fallen_back(), tmp_path).as_uri())
    page = opened.page
    expect(page.locator(".tv-fact[data-fact=tokens]")).to_have_text("tokens173 (160 in, 96 cached, 13 out)")
    wait = page.locator(".tv-row[data-agent=lead] .tv-bar.tv-ratewait")
    expect(wait).to_have_count(1)
    expect(wait).to_have_attribute(
        "title", "waiting 2.00 s for openai/primary's rate limit (requests per minute): not model time"
    )
    call = page.locator(".tv-row[data-agent=lead] .tv-bar.tv-llm").nth(0)
    waited, whole = wait.bounding_box(), call.bounding_box()
    assert waited is not None and whole is not None
    assert abs(waited["x"] - whole["x"]) < 2  # the wait starts with the call and takes 2 of its 3 seconds
    assert abs(waited["width"] - whole["width"] * 2 / 3) < 3
    assert page.locator(".tv-legend .tv-sw-ratewait").count() == 1
    assert opened.problems == []


class _SteppedClock:
    """The rate limits' clock: a wait moves it on at once (no real sleep)."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.now += max(seconds, 0.0)


def test_a_recorded_run_that_fell_back_and_waited_shows_both(
    tmp_path: Path,
    open_page: OpenPage,
    fake_openai: FakeOpenAI,
    second_openai: FakeOpenAI,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The same, from a run on two fake providers (its trace's own lines): the first answers 500 and allows one
    request a minute, so the second and third calls wait for it, then fall back."""
    clock = _SteppedClock()
    monkeypatch.setattr(ratelimit, "_process_rate_limits", RateLimits(clock=clock, sleep=clock.sleep))
    monkeypatch.setattr(breaker, "_process_breakers", BreakerRegistry())
    second = second_openai
    fake_openai.handler("primary", lambda _request: http_error(500))
    second.script(
        "backup",
        [tool_calls(("ask_writer", {"task": "a haiku"})), text("an old pond"), text("the writer wrote it")],
    )
    team = tmp_path / "team.yaml"
    team.write_text(
        textwrap.dedent(f"""\
            version: 1
            name: falls
            supervisor: lead
            defaults:
              model: openai/primary
              api_base: {fake_openai.url}
              num_retries: 0
              rate_limit: {{requests_per_minute: 1}}
              fallbacks:
                - {{model: openai/backup, api_base: "{second.url}", num_retries: 0}}
            agents:
              lead: {{instructions: Lead., delegates_to: [writer]}}
              writer: {{instructions: Write.}}
            """),
        encoding="utf-8",
    )
    _, page_file = record_view(team, tmp_path, "Write a haiku.")
    opened = open_page(page_file.as_uri())
    page = opened.page
    why = "openai/backup after openai/primary failed: server error (HTTP 500)"
    fell = page.locator(".tv-bar.tv-llm.tv-fallback")
    expect(fell).to_have_count(3)
    for i in range(3):
        expect(fell.nth(i)).to_have_attribute("aria-label", f"model call openai/backup · ok · fallback: {why}")
    expect(page.locator(".tv-bar.tv-ratewait")).to_have_count(2)  # the first call took the minute's one slot
    expect(page.locator(".tv-mark-fallback")).to_have_count(3)
    assert opened.problems == []
