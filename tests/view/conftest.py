"""The run view in headless Chromium (the Debian `chromium`, driven by playwright)."""

from __future__ import annotations

import contextlib
import shutil
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

import pytest
from playwright.sync_api import Browser, ConsoleMessage, Page, sync_playwright

from tests.fakeserver import FakeOpenAI
from tests.observe.conftest import TeamWriter, restore_structlog, write_team
from tests.observe.teams import script_fan_out
from tests.view.pages import record_view

__all__ = ["FanOutPage", "OpenPage", "Opened", "RunPage", "ViewedRun", "restore_structlog", "write_team"]


@dataclass
class Opened:
    """A page and what its console said (errors and warnings), for the no-console-errors checks."""

    page: Page
    problems: list[str] = field(default_factory=list)


OpenPage = Callable[[str], Opened]


@pytest.fixture
def open_page() -> Iterator[OpenPage]:
    """``open_page(url)``: a new 1400x1000 page at ``url``, recording console errors and page errors.

    The browser starts at the first call, not before the test: playwright's sync API keeps an event loop
    running in the thread, and the test runs teamrun (``asyncio.run``) before it looks at the page.
    """
    stack = contextlib.ExitStack()
    browser: list[Browser] = []

    def open_(url: str) -> Opened:
        if not browser:
            found = shutil.which("chromium") or shutil.which("chromium-browser")
            assert found, "the Debian `chromium` package is needed for this test (.ci/run installs it)"
            playwright = stack.enter_context(sync_playwright())
            browser.append(playwright.chromium.launch(executable_path=found, args=["--no-sandbox"]))
            stack.callback(browser[0].close)
        page = browser[0].new_page(viewport={"width": 1400, "height": 1000})
        opened = Opened(page)

        def console(message: ConsoleMessage) -> None:
            if message.type in ("error", "warning"):
                opened.problems.append(f"{message.type}: {message.text}")

        page.on("console", console)
        page.on("pageerror", lambda error: opened.problems.append(f"page error: {error}"))
        page.goto(url)
        return opened

    with stack:
        yield open_


class ViewedRun(NamedTuple):
    """A run recorded with content: its trace file, its page, and the page opened."""

    trace: Path
    page_file: Path
    opened: Opened


RunPage = Callable[..., ViewedRun]
FanOutPage = Callable[[float], ViewedRun]


@pytest.fixture
def run_page(tmp_path: Path, open_page: OpenPage, restore_structlog: None) -> RunPage:
    """``run_page(team, task, code=0)``: ``teamrun execute`` of the team file with a content trace (``run.jsonl``,
    ending with exit code ``code``), its view written (``run.html``) and opened in the browser."""

    def record(team: Path, task: str, *, code: int = 0) -> ViewedRun:
        trace, page_file = record_view(team, tmp_path, task, code=code)
        return ViewedRun(trace, page_file, open_page(page_file.as_uri()))

    return record


@pytest.fixture
def fan_out_page(fake_openai: FakeOpenAI, write_team: TeamWriter, run_page: RunPage) -> FanOutPage:
    """``fan_out_page(delay)``: the lead asks alpha, beta and gamma at once (each model reply after ``delay``
    seconds), recorded and opened by ``run_page``."""

    def record(delay: float) -> ViewedRun:
        script_fan_out(fake_openai, delay=delay)
        return run_page(write_team(), "compare a, b and c")

    return record
