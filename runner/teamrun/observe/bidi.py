"""Names shown inside a line of text, isolated for the Unicode bidirectional algorithm.

A name (an agent's, a model's, a tool's, a team's) may hold right-to-left
letters or bidi controls: an unclosed U+202E (RIGHT-TO-LEFT OVERRIDE) in a
name would otherwise reverse the figures drawn after it on the same line, and
an Arabic name would pull the numbers next to it into its own run. Each name
is put between U+2068 (FIRST STRONG ISOLATE) and U+2069 (POP DIRECTIONAL
ISOLATE): whatever it holds stays inside. The console tree, ``trace show``
and the run view (``view.js``'s ``iso``, the same rule) all use it.

Names of ASCII characters only (every name the team file allows) are left as
they are: they cannot change the direction of anything.
"""

from __future__ import annotations

__all__ = ["cell", "isolate"]

_CONTROLS = dict.fromkeys([*range(0x00, 0x20), *range(0x7F, 0xA0)], "\N{REPLACEMENT CHARACTER}")
"""C0 and C1 control characters (ESC starts a terminal escape sequence): shown as U+FFFD in a cell."""
_OPENERS = frozenset("\u2066\u2067\u2068")  # LRI, RLI, FSI
_POP = "\u2069"  # PDI


def isolate(name: str) -> str:
    """``name`` between FSI and PDI when it holds a character outside ASCII; else ``name``.

    A PDI in ``name`` that closes nothing of the name's own is left out (it would end the isolate early);
    isolates the name opens and leaves open are closed inside it.
    """
    if name.isascii():
        return name
    depth = 0
    kept: list[str] = []
    for char in name:
        if char in _OPENERS:
            depth += 1
        elif char == _POP:
            if not depth:
                continue
            depth -= 1
        kept.append(char)
    return "\u2068" + "".join(kept) + _POP * depth + _POP


def cell(text: str, width: int) -> str:
    """``text`` as one cell of a table printed on a terminal: on one line (runs of whitespace become one space),
    at most ``width`` characters (cut with an ellipsis), control characters shown as U+FFFD (an input holding
    ``ESC [ 2 J`` must not clear the terminal), isolated (:func:`isolate`) so it cannot turn the columns after it."""
    text = " ".join(text.split()).translate(_CONTROLS)
    return isolate(text if len(text) <= width else text[: width - 1] + "\N{HORIZONTAL ELLIPSIS}")
