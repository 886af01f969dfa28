"""Python tools used by the engine tests' team files."""

from __future__ import annotations

RAW_MARKER = "RAW-PAGE-MARKER"


def fetch_page(url: str) -> str:
    """Fetch a (very long) page.

    Args:
        url: Address of the page.
    """
    return f"{RAW_MARKER} {url} " + "x" * 30_000
