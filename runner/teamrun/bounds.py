"""What a model (or a client) may send: the one set of rules for JSON that crosses a boundary into teamrun.

A model's tool-call arguments arrive as a raw string the engine has not read yet; :func:`check_arguments` says
whether it may be read at all, before any tool, workspace, board or delegation sees it (:func:`check_json`
does the same for a structured answer, any JSON value). The HTTP boundary
(:mod:`teamrun.serve.security`) checks request bodies with the same text rule (:func:`lone_surrogate`). The
rules, each with the name a refusal gives it:

- ``size``: at most :data:`MAX_ARGUMENT_BYTES` bytes of UTF-8 (the server's default request body limit);
- ``depth``: lists and objects nested at most :data:`MAX_DEPTH` deep (the arguments object is the first level),
  counted on the raw text before it is parsed (``json.loads`` itself gives up on deep nesting with a
  ``RecursionError``);
- ``json``: a JSON object (empty arguments read as ``{}``);
- ``text``: strings and keys are Unicode that UTF-8 can carry: no lone UTF-16 surrogate (JSON's ``"\\ud800"``
  escape lets one in);
- ``number``: numbers are finite: no ``NaN``, ``Infinity`` (which :mod:`json` accepts) nor a literal past the
  largest double (``1e999``);
- ``integer``: integers within ±:data:`MAX_INTEGER` (a signed 64-bit integer), so no sum, comparison or
  conversion of one overflows.

A check returns what it found (:class:`OutOfBounds`), never raises, and never echoes the value: a refusal
names the place (``a.1.b``) and the rule. A bottom-layer module: it imports nothing from teamrun.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Literal

__all__ = [
    "LONE_SURROGATE",
    "MAX_ARGUMENT_BYTES",
    "MAX_DEPTH",
    "MAX_INTEGER",
    "OutOfBounds",
    "Rule",
    "check_arguments",
    "check_json",
    "check_value",
    "json_kind",
    "lone_surrogate",
    "printable",
]

MAX_ARGUMENT_BYTES = 1_048_576
"""Largest tool-call arguments, in bytes of UTF-8 (1 MiB, as ``teamrun serve``'s default request body)."""

MAX_DEPTH = 64
"""Deepest nesting of lists and objects in tool-call arguments (the arguments object itself is level 1)."""

MAX_INTEGER = 2**63 - 1
"""Largest magnitude of an integer (a signed 64-bit integer's); a larger one is refused, not rounded."""

Rule = Literal["size", "depth", "json", "text", "number", "integer"]

LONE_SURROGATE = "holds a lone UTF-16 surrogate (half of a pair, e.g. \\udfff), which is not text: send valid Unicode"
"""What a sender is told when its text holds a lone surrogate (after the place: ``input``, ``messages.0.content``)."""

_INTEGER_DIGITS = len(str(MAX_INTEGER))
_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_BRACKET = re.compile(r"[\[\]{}]")


@dataclass(frozen=True)
class OutOfBounds:
    """Why some JSON may not be used: the rule it breaks, where, and what to send instead (never the value)."""

    rule: Rule
    message: str
    """For the sender: the place, what is wrong, what to send instead."""
    where: str = ""
    """The dotted place (``a.1.b``; a key's place ends ``(the key)``); empty for the whole."""


@dataclass(frozen=True)
class _HugeInteger:
    """An integer literal too long to be read as a number (read as this instead, then refused)."""

    digits: int


def check_arguments(raw: str) -> OutOfBounds | None:
    """What is out of bounds in a tool call's raw JSON arguments, or ``None`` when they may be read."""
    if not raw.strip():
        return None
    found, value = _read(raw, "the arguments")
    if found is None and not isinstance(value, dict):
        return OutOfBounds("json", "the arguments must be a JSON object")
    return found


def check_json(text: str, subject: str = "the JSON") -> OutOfBounds | None:
    """What is out of bounds in a JSON document a model wrote (any value: a structured answer), or ``None``;
    ``subject`` names it in the message (``"the answer"``)."""
    return _read(text, subject)[0]


def _read(raw: str, subject: str) -> tuple[OutOfBounds | None, Any]:
    """The first rule ``raw`` breaks (or ``None``), and its value when it could be read."""
    size = len(raw.encode("utf-8", "surrogatepass"))
    if size > MAX_ARGUMENT_BYTES:
        return OutOfBounds("size", f"{size} bytes in {subject}, past the {MAX_ARGUMENT_BYTES} allowed: send less"), None
    if _deeper_than(raw, MAX_DEPTH):
        return _too_deep(subject), None
    try:
        value = json.loads(raw, parse_int=_integer)
    except RecursionError:
        return _too_deep(subject), None
    except json.JSONDecodeError as exc:
        reason = exc.msg.removesuffix(" at")
        return OutOfBounds("json", f"not valid JSON in {subject} ({reason} at char {exc.pos})"), None
    except ValueError as exc:  # never expected (integers are read by _integer); still a refusal, not a traceback
        return OutOfBounds("json", f"{subject} could not be read as JSON ({exc})"), None
    return check_value(value, subject=subject), value


def check_value(value: Any, path: str = "", *, subject: str = "the value") -> OutOfBounds | None:
    """The first place where parsed JSON ``value`` breaks the text, number, integer or depth rule, or ``None``.

    Walks without recursion, so a value nested deeper than Python's recursion limit is found, not raised.
    """
    for node, where, depth, is_key in _walk(value, path):
        if depth > MAX_DEPTH and isinstance(node, dict | list):
            return _too_deep(subject)
        found = _node_problem(node, where, is_key)
        if found is not None:
            return found
    return None


def lone_surrogate(value: Any, path: str = "") -> str | None:
    """Where ``value`` (parsed JSON) holds a lone UTF-16 surrogate (``"\\udfff"``), as a dotted path; else ``None``.

    JSON's ``\\uXXXX`` escapes let a sender put half of a surrogate pair in a string: Python parses it into a
    string that no model provider (nor UTF-8) can carry.
    """
    for node, where, _, is_key in _walk(value, path):
        if isinstance(node, str) and _has_surrogate(node):
            return _place(where, is_key)
    return None


def printable(text: str) -> str:
    """``text`` safe to put in a response, an event or a log: a lone surrogate shows as its escape (``\\udfff``)."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


# -- the rules ----------------------------------------------------------------------------------------------


def _node_problem(node: Any, where: str, is_key: bool) -> OutOfBounds | None:
    if isinstance(node, str):
        if _has_surrogate(node):
            place = _place(where, is_key)
            return OutOfBounds("text", f"{place} {LONE_SURROGATE}", place)
        return None
    place = where or "(the value)"
    if isinstance(node, float) and not math.isfinite(node):
        return OutOfBounds(
            "number",
            f"{place} is not a finite number (NaN, Infinity or past ±1.8e308): send finite numbers only",
            place,
        )
    if isinstance(node, _HugeInteger) or (isinstance(node, int) and not isinstance(node, bool)):
        digits = node.digits if isinstance(node, _HugeInteger) else len(str(abs(node)))
        if isinstance(node, _HugeInteger) or abs(node) > MAX_INTEGER:
            return OutOfBounds(
                "integer",
                f"{place} is an integer of {digits} digits, past ±{MAX_INTEGER}: send a smaller number, "
                "or a string if every digit matters",
                place,
            )
    return None


def _too_deep(subject: str) -> OutOfBounds:
    return OutOfBounds(
        "depth", f"lists and objects nested more than {MAX_DEPTH} deep in {subject}: send a flatter value"
    )


def _integer(literal: str) -> int | _HugeInteger:
    """An integer literal as ``json.loads`` reads it, unless it is too long to be within the bounds at all."""
    digits = len(literal.lstrip("-"))
    return _HugeInteger(digits) if digits > _INTEGER_DIGITS else int(literal)


def _deeper_than(raw: str, limit: int) -> bool:
    """Whether the raw JSON text opens more than ``limit`` lists or objects inside each other (strings skipped)."""
    depth = 0
    for bracket in _BRACKET.findall(_STRING.sub("", raw)):
        if bracket in "[{":
            depth += 1
            if depth > limit:
                return True
        else:
            depth -= 1
    return False


def _walk(value: Any, path: str) -> Iterator[tuple[Any, str, int, bool]]:
    """Every node of ``value`` in document order: (the node, its dotted place, its depth, whether it is a key)."""
    stack: list[tuple[Any, str, int, bool]] = [(value, path, 1, False)]
    while stack:
        node, where, depth, is_key = stack.pop()
        yield node, where, depth, is_key
        if isinstance(node, dict):
            children: list[tuple[Any, str, int, bool]] = []
            for key, item in node.items():
                place = f"{where}.{printable(str(key))}" if where else printable(str(key))
                children += [(str(key), place, depth, True), (item, place, depth + 1, False)]
            stack.extend(reversed(children))
        elif isinstance(node, list):
            stack.extend(
                reversed([(item, f"{where}.{i}" if where else str(i), depth + 1, False) for i, item in enumerate(node)])
            )


def _place(where: str, is_key: bool) -> str:
    if is_key:
        return where + " (the key)"
    return where or "(the value)"


def _has_surrogate(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def json_kind(value: object) -> str:
    """What ``value`` was sent as, in JSON's words ("a number", "an array", "null"...), for messages about a value
    that came as JSON: ``42`` and ``4.2`` are both a number (A2A's metadata reads every number as a float)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list | tuple):
        return "an array"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__
