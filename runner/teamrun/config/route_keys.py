"""How a workflow `route` turns its field's value into a branch name.

Shared by the model (which picks the branch at run time) and by `teamrun validate` (which checks
the branches a field's schema can name); a bottom-layer module, so validate never builds a model.
"""

from __future__ import annotations

from typing import Any

__all__ = ["branch_key"]


def branch_key(value: Any) -> str:
    """The branch name a route field's value names: ``true``, ``false`` and ``null`` as JSON (and YAML)
    write them, so a boolean field picks a ``true:`` or ``false:`` branch; any other value as its text."""
    if value is None or isinstance(value, bool):
        return "null" if value is None else ("true" if value else "false")
    return str(value)
