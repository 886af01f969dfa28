"""Reading a team file's raw loaded data defensively, for the semantic checks.

The checks run even when the schema found problems, so a value of the wrong
type is simply skipped (the schema has already reported it).
"""

from __future__ import annotations

from typing import Any

__all__ = ["mapping", "names", "number", "sequence"]


def mapping(value: Any) -> dict[str, Any]:
    """``value`` when it is a mapping, else an empty one."""
    return value if isinstance(value, dict) else {}


def sequence(value: Any) -> list[Any]:
    """``value`` when it is a list, else an empty one."""
    return value if isinstance(value, list) else []


def number(value: Any) -> int | float | None:
    """``value`` when it is a number (not a boolean), else ``None``."""
    # never float(): an integer of 400 digits is valid YAML and does not fit a float
    return value if isinstance(value, int | float) and not isinstance(value, bool) else None


def names(value: Any) -> list[tuple[int, str]]:
    """``(index, item)`` of a list's string items (nothing when ``value`` is not a list)."""
    if not isinstance(value, list):
        return []
    return [(i, item) for i, item in enumerate(value) if isinstance(item, str)]
