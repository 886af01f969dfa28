"""axe-core (bundled by the PyPI package ``axe-playwright-python``) run on a playwright page in Chromium.

``serious_problems(page)`` runs every axe rule on the page as it is now and returns one line per serious or
critical violation (rule, what it says, where), so a test can assert the list is empty and print it if not.
The script is injected through the DevTools protocol (``page.evaluate``), which the page's strict
Content-Security-Policy does not block.
"""

from __future__ import annotations

from typing import Any

from axe_playwright_python.sync_playwright import Axe
from playwright.sync_api import Page

__all__ = ["SERIOUS", "serious_problems", "violations"]

SERIOUS = frozenset({"serious", "critical"})
"""The impacts a page must not have (axe's scale: minor, moderate, serious, critical)."""


def violations(page: Page) -> list[dict[str, Any]]:
    """Every axe violation on ``page`` (all rules, WCAG 2.x A and AA and axe's best practices)."""
    found: list[dict[str, Any]] = Axe().run(page).response["violations"]
    return found


def serious_problems(page: Page) -> list[str]:
    """One line per serious or critical violation on the whole page, the embedded run view included:
    ``rule (impact): help — targets``."""
    lines = []
    for v in violations(page):
        if v.get("impact") not in SERIOUS:
            continue
        where = [" ".join(str(t) for t in node["target"]) for node in v["nodes"]]
        lines.append(f"{v['id']} ({v['impact']}): {v['help']} — {', '.join(where[:5])}")
    return lines
