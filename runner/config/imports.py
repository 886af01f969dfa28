"""Resolving ``module:attribute`` references to user code (tools, hooks, filters).

Only called when running a team or when ``teamrun validate --import-check``
asks for it: plain validation never executes user code.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any


class ImportProblem(Exception):
    """A reference cannot be imported; the message says which part is wrong."""


@contextmanager
def _on_path(base_dir: Path | None) -> Iterator[None]:
    entry = str(base_dir) if base_dir is not None else None
    added = entry is not None and entry not in sys.path
    if added:
        sys.path.insert(0, str(entry))
    try:
        yield
    finally:
        if added:
            sys.path.remove(str(entry))


def resolve_import_path(reference: str, *, base_dir: Path | None) -> Any:
    """Import ``package.module:attr.sub`` and return the attribute.

    ``base_dir`` (the team file's folder) is put on ``sys.path`` while importing,
    so a team's own ``tools.py`` next to it is found.
    """
    module_name, _, attribute = reference.partition(":")
    if not module_name or not attribute:
        raise ImportProblem(f"'{reference}' must look like 'package.module:function'")
    with _on_path(base_dir if base_dir is not None else Path.cwd()):
        try:
            target: Any = importlib.import_module(module_name)
        except ImportError as exc:
            raise ImportProblem(f"cannot import module '{module_name}': {exc}") from None
        except Exception as exc:  # user code failing at import time
            raise ImportProblem(f"importing '{module_name}' raised {type(exc).__name__}: {exc}") from None
    for part in attribute.split("."):
        try:
            target = getattr(target, part)
        except AttributeError:
            raise ImportProblem(f"module '{module_name}' has no attribute '{attribute}'") from None
    if not callable(target):
        raise ImportProblem(f"'{reference}' is not callable")
    return target
