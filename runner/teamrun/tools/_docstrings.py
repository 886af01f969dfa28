"""Read a tool function's docstring: its summary and what each parameter means.

Two common styles are understood; anything else just yields the summary.

Google style::

    Args:
        pattern (str): Regular expression to look for.
        path: Where to look. Continuation lines
            are joined.

reST / Sphinx style::

    :param pattern: Regular expression to look for.
    :param str path: Where to look.
"""

from __future__ import annotations

import inspect
import re
from dataclasses import dataclass, field

__all__ = ["DocstringInfo", "parse_docstring"]

_GOOGLE_SECTION = re.compile(r"^(Args|Arguments|Parameters|Params|Keyword Args|Keyword Arguments|Kwargs):\s*$")
_ANY_SECTION = re.compile(r"^[A-Z][A-Za-z ]*:\s*$")
_GOOGLE_ENTRY = re.compile(r"^\*{0,2}(?P<name>[A-Za-z_][A-Za-z0-9_]*)\s*(\([^)]*\))?\s*:\s*(?P<text>.*)$")
_REST_PARAM = re.compile(
    r"^:(param|parameter|arg|argument|key|keyword)\s+(?:[^:]*\s)?(?P<name>[A-Za-z_][A-Za-z0-9_]*)\s*:\s*(?P<text>.*)$"
)
_REST_FIELD = re.compile(r"^:[A-Za-z]+[^:]*:")


@dataclass(frozen=True)
class DocstringInfo:
    """What a docstring says."""

    summary: str = ""
    """The first paragraph, on one line."""
    params: dict[str, str] = field(default_factory=dict)
    """Parameter name → description, on one line each."""


def parse_docstring(doc: str | None) -> DocstringInfo:
    """Summary and parameter descriptions of a docstring (``None`` gives empty ones)."""
    if not doc:
        return DocstringInfo()
    lines = inspect.cleandoc(doc).splitlines()
    params = _google_params(lines)
    params.update({k: v for k, v in _rest_params(lines).items() if k not in params})
    return DocstringInfo(summary=_summary(lines), params=params)


def _summary(lines: list[str]) -> str:
    """The first paragraph, stopping early at a section header or a reST field."""
    taken: list[str] = []
    for line in lines:
        stripped = line.strip()
        if not stripped or _ANY_SECTION.match(stripped) or _REST_FIELD.match(stripped):
            if taken or stripped:
                break
            continue
        taken.append(stripped)
    return " ".join(taken)


def _google_params(lines: list[str]) -> dict[str, str]:
    """Entries of Google-style ``Args:`` sections."""
    params: dict[str, str] = {}
    in_section = False
    entry_indent: int | None = None
    current: str | None = None
    for line in lines:
        stripped = line.strip()
        indent = len(line) - len(line.lstrip())
        if _GOOGLE_SECTION.match(line):
            in_section, entry_indent, current = True, None, None
            continue
        if not in_section:
            continue
        if not stripped:
            current = None
            continue
        if indent == 0:  # a new section (Returns:, Raises:, ...) or prose ends it
            in_section = False
            continue
        if entry_indent is None:
            entry_indent = indent
        match = _GOOGLE_ENTRY.match(stripped)
        if indent <= entry_indent and match:
            current = match["name"]
            params[current] = match["text"].strip()
        elif current is not None and indent > entry_indent:
            params[current] = f"{params[current]} {stripped}".strip()
    return params


def _rest_params(lines: list[str]) -> dict[str, str]:
    """``:param name: text`` fields, with indented continuation lines joined."""
    params: dict[str, str] = {}
    current: str | None = None
    for line in lines:
        stripped = line.strip()
        match = _REST_PARAM.match(stripped)
        if match:
            current = match["name"]
            params[current] = match["text"].strip()
        elif current is not None and stripped and line[:1].isspace() and not _REST_FIELD.match(stripped):
            params[current] = f"{params[current]} {stripped}".strip()
        else:
            current = None
    return params
