"""User tools the tests import by path (``sample_tools:<name>``), like a team file would."""

from __future__ import annotations

import asyncio
import datetime
import threading
import time
from typing import Literal

from pydantic import BaseModel


def lookup(product: str, max_results: int = 3, region: Literal["eu", "us"] = "eu") -> str:
    """Look up facts about one product.

    Searches the catalogue and returns short facts.

    Args:
        product: Name of the product, e.g. "Widget 3000".
        max_results (int): How many facts to return
            at most.
        region: Market to search.

    Returns:
        The facts, one per line.
    """
    return "\n".join(f"{product} fact {i} ({region})" for i in range(1, max_results + 1))


def days_until(when: datetime.date, *, today: datetime.date | None = None) -> int:
    """Count days until a date.

    :param when: The target date (ISO format).
    :param today: Count from this day instead of the real today.
    :returns: The number of days.
    """
    start = today or datetime.date(2025, 1, 1)
    return (when - start).days


async def fetch_page(url: str) -> str:
    """Fetch a page (pretend)."""
    await asyncio.sleep(0)
    return f"<html>{url}</html>"


def explode(reason: str) -> str:
    """Always fails."""
    raise ValueError(f"cannot do it: {reason}")


def slow_sync(seconds: float) -> str:
    """Sleeps in a thread for longer than its timeout."""
    time.sleep(seconds)
    return "finished"


RELEASE = threading.Event()
"""Lets :func:`blocks_until_released` return (tests set it)."""
FINISHED = threading.Event()
"""Set when :func:`blocks_until_released` returns."""


def blocks_until_released() -> str:
    """Blocks its thread until a test sets ``RELEASE`` (a two-minute guard ends it otherwise)."""
    RELEASE.wait(120)
    FINISHED.set()
    return "finished"


async def slow_async(seconds: float) -> str:
    """Sleeps on the event loop for longer than its timeout."""
    await asyncio.sleep(seconds)
    return "finished"


class Point(BaseModel):
    x: int
    y: int


def summarize(points: list[Point], label: str = "shape") -> dict[str, object]:
    """Summarize points into a dict."""
    return {
        "label": label,
        "count": len(points),
        "max_x": max(p.x for p in points),
        "when": datetime.date(2025, 5, 1),
    }


def big_output(size: int) -> str:
    """Returns a long string."""
    return "x" * size


def quits() -> str:
    """Calls sys.exit."""
    raise SystemExit(3)


def undocumented(a, b=2):  # type: ignore[no-untyped-def]
    return [a, b]


class Catalog:
    """A namespace of tools, to test dotted attributes."""

    @staticmethod
    def search(term: str) -> list[str]:
        """Search the catalog.

        Args:
            term: What to search for.
        """
        return [term, term.upper()]


NOT_CALLABLE = 42
