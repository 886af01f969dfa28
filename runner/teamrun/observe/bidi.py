"""Text from a model, a provider or a file made safe to show on a terminal.

:func:`inert` is the one rule for control characters: every terminal printer (the progress lines and tree,
``runs show``, ``trace show``, ``threads show``, the pending-item listings, an answer printed on a terminal)
passes what it prints through it, so an answer or an error holding ``ESC ] 0 ; ... BEL`` cannot set the
terminal's title (nor OSC 52 write its clipboard, nor CSI clear the screen): each control character but
newline and tab is shown as U+FFFD. :func:`cell` and :func:`isolate` (one line each) show newlines so too.

Names shown inside a line of text are isolated for the Unicode bidirectional algorithm.

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

__all__ = ["cell", "for_terminal", "inert", "isolate"]

_CONTROLS = dict.fromkeys([*range(0x00, 0x20), *range(0x7F, 0xA0)], "\N{REPLACEMENT CHARACTER}")
"""C0 and C1 control characters (ESC starts a terminal escape sequence): shown as U+FFFD in a cell."""
_INERT = {code: shown for code, shown in _CONTROLS.items() if chr(code) not in "\n\t"}
"""The same, but for newline and tab: what :func:`inert` replaces."""


def inert(text: str) -> str:
    """``text`` safe to print on a terminal: each C0 and C1 control character but newline and tab (ESC, BEL,
    CR, the one-byte CSI U+009B...) shown as U+FFFD; a CR LF line end is kept as a newline."""
    return text.replace("\r\n", "\n").translate(_INERT)


def for_terminal(text: str, stream: object) -> str:
    """``text`` as printed on ``stream``: :func:`inert` when it is a terminal, as it is for a pipe or a file
    (``teamrun execute ... > answer.txt`` keeps the answer byte for byte)."""
    try:
        tty = bool(stream.isatty())  # type: ignore[attr-defined]
    except (AttributeError, ValueError):
        tty = False
    return inert(text) if tty else text


_OPENERS = frozenset("\u2066\u2067\u2068")  # LRI, RLI, FSI
_POP = "\u2069"  # PDI


def isolate(name: str) -> str:
    """``name`` between FSI and PDI when it holds a character outside ASCII; else ``name``.

    A PDI in ``name`` that closes nothing of the name's own is left out (it would end the isolate early);
    isolates the name opens and leaves open are closed inside it. Control characters (a newline too) are
    shown as U+FFFD, as in :func:`cell`.
    """
    name = name.translate(_CONTROLS)
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
