"""Regular expressions written in team files: compiled once, judged without printing Python warnings.

Python's :mod:`re` prints a ``FutureWarning`` on stderr for a pattern whose
meaning a later Python may change (``[[a]`` "possible nested set",
``[a-z--b]`` "possible set difference"), naming a line of teamrun's code. A
user reads our diagnostics, not Python's warnings: :func:`judge_regex`
records the warning and returns it as a caution the checks report at the
pattern's place in the file (``teamrun validate``, and the warnings of a run).
The compiled pattern then sits in :mod:`re`'s cache, so a later
``re.compile`` of it (the engine, at run time) prints nothing either.
"""

from __future__ import annotations

import functools
import re
import warnings
from dataclasses import dataclass

__all__ = ["RegexVerdict", "judge_regex"]


@dataclass(frozen=True)
class RegexVerdict:
    """What compiling one pattern said."""

    error: str | None = None
    """Why the pattern does not compile (``re.error``'s words), or None."""
    caution: str | None = None
    """A warning Python gave while compiling it, as our words (``possible nested set at position 1: ...``)."""


@functools.lru_cache(maxsize=1024)
def judge_regex(pattern: str) -> RegexVerdict:
    """Compile ``pattern`` with Python's warnings recorded instead of printed (cached: one verdict per pattern)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            re.compile(pattern)
        except re.error as exc:
            return RegexVerdict(error=str(exc))
        except RecursionError:
            return RegexVerdict(error="nested too deeply")
        except OverflowError as exc:
            return RegexVerdict(error=str(exc) or "a repeat count is too large")
    said = [str(w.message) for w in caught]
    if not said:
        return RegexVerdict()
    first = said[0]
    text = first[:1].lower() + first[1:]
    if issubclass(caught[0].category, FutureWarning):
        text += (
            "; a later Python may read this '[' (or the doubled '-', '&', '~', '|') as set syntax: "
            "write it as '\\[' (or '\\-'...) to match the character itself"
        )
    return RegexVerdict(caution=text)
