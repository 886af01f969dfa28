"""Problems found in a team file, each pinned to ``file:line:col``."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

Severity = Literal["error", "warning"]
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

    def render(self) -> str:
        return f"{self.file}:{self.line}:{self.column}: {self.severity}: {self.message}"


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


def listing(names: Sequence[str]) -> str:
    return ", ".join(sorted(names)) if names else "(none)"
