"""axe-core (bundled by the PyPI package ``axe-playwright-python``) over a page of the run view, in Chromium.

``serious_violations(page)``: one line per serious or critical violation (rule, impact, help, where), so a test
asserts the list is empty and prints it if not. The script goes in through the DevTools protocol
(``page.evaluate``), which the page's Content-Security-Policy does not block.
(tests/serve/axe_check.py does the same for the served workbench; the two may be merged.)
"""

from __future__ import annotations

from axe_playwright_python.sync_playwright import Axe
from playwright.sync_api import Page

__all__ = ["serious_violations"]


def _where(node: dict[str, object]) -> str:
    targets = node.get("target") or []
    return " ".join(map(str, targets)) if isinstance(targets, list) else str(targets)


def serious_violations(page: Page) -> list[str]:
    """Every serious or critical axe violation on ``page`` as it is now (WCAG 2.x A/AA and best practices)."""
    found = Axe().run(page).response["violations"]
    return [
        f"{v['id']} ({v['impact']}): {v['help']} — " + "; ".join(_where(n) for n in v["nodes"][:5])
        for v in found
        if v.get("impact") in ("serious", "critical")
    ]
