"""Problems found in a team file, each pinned to ``file:line:col``."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

Severity = Literal["error", "warning"]
_UNPRINTABLE = re.compile(
    r"[\x00-\x08\x0a-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069\ud800-\udfff]"
)
"""Escaped in a message: controls, line separators, lone surrogates, and bidi marks and controls (an unclosed
U+202E RIGHT-TO-LEFT OVERRIDE quoted from the file would reverse the rest of the line on a terminal)."""

JsonPath = tuple[str | int, ...]
"""Where a value sits in the loaded document, e.g. ``("agents", "lead", "tools", 0)``."""


@dataclass(frozen=True, order=True)
class Diagnostic:
    """One problem: where it is and what to do about it."""

    file: str
    line: int
    """1-based line number."""
    column: int
    """1-based column number."""
    message: str
    severity: Severity = "error"
    rule: str = "schema"
    """Which check found it: ``yaml``, ``schema``, ``reference``, ``cycle``, ``template``, ..."""

    def __post_init__(self) -> None:
        # One diagnostic is one line of text in every format: line breaks, control
        # characters, bidi controls and lone surrogates quoted from the file are shown escaped.
        if _UNPRINTABLE.search(self.message):
            object.__setattr__(self, "message", _UNPRINTABLE.sub(_escape, self.message))

    def render(self) -> str:
        return f"{self.file}:{self.line}:{self.column}: {self.severity}: {self.message}"


def _escape(match: re.Match[str]) -> str:
    return match.group(0).encode("unicode_escape", "backslashreplace").decode("ascii")


def dotted(path: JsonPath) -> str:
    """``("agents", "lead", "tools", 0)`` → ``agents.lead.tools[0]``."""
    out = ""
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out or "the document"


def did_you_mean(word: str, choices: Sequence[str]) -> str:
    """A ``"; did you mean 'x'?"`` suffix when a choice is close to ``word``, else ``""``."""
    import difflib

    close = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    return f"; did you mean '{close[0]}'?" if close else ""


def shorten(text: str, limit: int = 60) -> str:
    """``text`` cut to about ``limit`` characters for quoting in a message."""
    return text if len(text) <= limit else text[: limit - 3] + "..."


def listing(names: Sequence[str]) -> str:
    return ", ".join(sorted(names)) if names else "(none)"
