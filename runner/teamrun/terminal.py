"""Text from a model, a provider, a person or a file made safe to show on a terminal.

:func:`inert` is the one rule for what a terminal is shown: every terminal printer (the progress lines and
tree, ``runs show``, ``trace show``, ``threads show``, the pending-item listings, a question asked inline, an
approval's arguments, an answer printed on a terminal) passes what it prints through it, so an answer or an
error holding ``ESC ] 0 ; ... BEL`` cannot set the terminal's title (nor OSC 52 write its clipboard, nor CSI
clear the screen): each control character but newline and tab is shown as U+FFFD. A bidi control a line
leaves open (an unclosed U+202E RIGHT-TO-LEFT OVERRIDE) is closed at the line's end, so it cannot reverse
the lines after it (a prompt, a listing's next row). :func:`cell` and :func:`isolate` (one line each) show
newlines as U+FFFD too.

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

A bottom module (no teamrun imports): ``tools`` (the terminal desk), ``config``, ``observe`` and ``cli`` all
use it; ``observe.bidi`` re-exports it.
"""

from __future__ import annotations

import json
import re
from typing import Any

__all__ = ["cell", "for_terminal", "inert", "isolate", "visible_json"]

_CONTROLS = dict.fromkeys([*range(0x00, 0x20), *range(0x7F, 0xA0)], "\N{REPLACEMENT CHARACTER}")
"""C0 and C1 control characters (ESC starts a terminal escape sequence): shown as U+FFFD in a cell."""
_INERT = {code: shown for code, shown in _CONTROLS.items() if chr(code) not in "\n\t"}
"""The same, but for newline and tab: what :func:`inert` replaces."""

_EMBEDDINGS = frozenset("\u202a\u202b\u202d\u202e")  # LRE, RLE, LRO, RLO
_POP_EMBEDDING = "\u202c"  # PDF
_OPENERS = frozenset("\u2066\u2067\u2068")  # LRI, RLI, FSI
_POP = "\u2069"  # PDI
_BIDI_CONTROLS = _EMBEDDINGS | _OPENERS | {_POP_EMBEDDING, _POP}


def inert(text: str) -> str:
    """``text`` safe to print on a terminal: each C0 and C1 control character but newline and tab (ESC, BEL,
    CR, the one-byte CSI U+009B...) shown as U+FFFD; a CR LF line end is kept as a newline; each line closes
    the bidi embeddings, overrides and isolates it opens (:func:`_closed`)."""
    text = text.replace("\r\n", "\n").translate(_INERT)
    if _BIDI_CONTROLS.isdisjoint(text):
        return text
    return "\n".join(map(_closed, text.split("\n")))


def for_terminal(text: str, stream: object) -> str:
    """``text`` as printed on ``stream``: :func:`inert` when it is a terminal, as it is for a pipe or a file
    (``teamrun execute ... > answer.txt`` keeps the answer byte for byte)."""
    try:
        tty = bool(stream.isatty())  # type: ignore[attr-defined]
    except (AttributeError, ValueError):
        tty = False
    return inert(text) if tty else text


def _closed(line: str) -> str:
    """``line`` with what its bidi controls leave open closed at its end (PDF for an embedding or override,
    PDI for an isolate) and each PDI that closes nothing of its own left out; a line already balanced (a
    listing's isolated cells) is returned as it is."""
    if _BIDI_CONTROLS.isdisjoint(line):
        return line
    kept, open_ = _balanced(line)
    closers = "".join(_POP if opener in _OPENERS else _POP_EMBEDDING for opener in reversed(open_))
    return kept + closers


def _balanced(text: str) -> tuple[str, list[str]]:
    """``text`` without the PDIs that close nothing it opened, and the controls it leaves open (outermost
    first). A PDI closes the embeddings opened inside its isolate too; a PDF closes an embedding only inside
    the isolate it was opened in (as the Unicode bidirectional algorithm has it)."""
    stack: list[str] = []
    kept: list[str] = []
    for char in text:
        if char in _OPENERS or char in _EMBEDDINGS:
            stack.append(char)
        elif char == _POP:
            if not any(opener in _OPENERS for opener in stack):
                continue
            while stack.pop() not in _OPENERS:
                pass
        elif char == _POP_EMBEDDING and stack and stack[-1] in _EMBEDDINGS:
            stack.pop()
        kept.append(char)
    return "".join(kept), stack


def isolate(name: str) -> str:
    """``name`` between FSI and PDI when it holds a character outside ASCII; else ``name``.

    A PDI in ``name`` that closes nothing of the name's own is left out (it would end the isolate early);
    isolates the name opens and leaves open are closed inside it. Control characters (a newline too) are
    shown as U+FFFD, as in :func:`cell`.
    """
    name = name.translate(_CONTROLS)
    if name.isascii():
        return name
    kept, open_ = _balanced(name)
    return "\u2068" + kept + _POP * sum(opener in _OPENERS for opener in open_) + _POP


def cell(text: str, width: int) -> str:
    """``text`` as one cell of a table printed on a terminal: on one line (runs of whitespace become one space),
    at most ``width`` characters (cut with an ellipsis), control characters shown as U+FFFD (an input holding
    ``ESC [ 2 J`` must not clear the terminal), isolated (:func:`isolate`) so it cannot turn the columns after it."""
    text = " ".join(text.split()).translate(_CONTROLS)
    return isolate(text if len(text) <= width else text[: width - 1] + "\N{HORIZONTAL ELLIPSIS}")


_UNSEEN = re.compile("[\u0080-\u009f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]")
"""Characters JSON may carry raw that a reader cannot see: C1 controls, bidi marks and controls, line and
paragraph separators."""


def visible_json(value: Any, *, indent: int | None = None) -> str:
    """``value`` as JSON for a person to read (an approval's arguments): not ASCII-escaped, but each character
    a reader cannot see (a C1 control, a bidi control such as U+202E RIGHT-TO-LEFT OVERRIDE, a line separator)
    written as its ``\\uXXXX`` escape, so what a person approves reads as the arguments the tool gets (JSON
    escapes C0 controls itself)."""
    text = json.dumps(value, indent=indent, ensure_ascii=False, default=str)
    return _UNSEEN.sub(lambda m: f"\\u{ord(m.group()):04x}", text)
