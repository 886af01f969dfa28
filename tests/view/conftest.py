"""The run view in headless Chromium (the Debian `chromium`, driven by playwright)."""

from __future__ import annotations

import contextlib
import shutil
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import pytest
from playwright.sync_api import Browser, ConsoleMessage, Page, sync_playwright

from tests.observe.conftest import restore_structlog, write_team

__all__ = ["OpenPage", "Opened", "restore_structlog", "write_team"]


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
