"""How to install one of teamrun's optional extras, said as a command that works when pasted.

teamrun is installed from its checkout (README, Set up), not from a package index:
``pip install 'teamrun[serve]'`` would ask the index for a project of that name. When this
package runs from its checkout (an editable install, or ``PYTHONPATH=runner``) the hint names
that checkout; an installed copy does not know where it came from, so the hint says where to
run pip.
"""

from __future__ import annotations

import shlex
from pathlib import Path

__all__ = ["install_hint"]


def _checkout() -> Path | None:
    """The checkout this package runs from (``runner/teamrun`` under it), if it does."""
    root = Path(__file__).resolve().parents[2]
    try:
        pyproject = (root / "pyproject.toml").read_text(encoding="utf-8")
    except OSError:
        return None
    return root if 'name = "teamrun"' in pyproject else None


def install_hint(extra: str, *, here: bool = True) -> str:
    """The pip command that adds ``extra`` (``serve``, ``otel``, ``postgres``, ``ray``...).

    ``here=False``: for another machine (a Ray node), where this checkout's path means nothing.
    """
    root = _checkout() if here else None
    if root is None:
        return f"pip install '.[{extra}]' in the teamrun checkout"
    if root == Path.cwd().resolve():
        return f"pip install -e '.[{extra}]'"
    return f"pip install -e {shlex.quote(f'{root}[{extra}]')}"
