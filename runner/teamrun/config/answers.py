"""How a person's answer is read against an ``answer_schema``: the one rule ``teamrun answer`` (and the terminal)
read an answer by, and ``teamrun validate`` reads each of a person's ``choices`` by.

The answer is read as JSON when that fits the schema (``true``, ``3``, ``{"a": 1}``, ``"quoted"``), else as
the text typed (``123`` for a string schema is the string ``"123"``). ``NaN``/``Infinity`` and numbers that
read as infinity are no JSON, so they are read as text. A reading that breaks :mod:`teamrun.bounds` (an integer
past ±(2^63-1), nesting past 64) is not taken: when the text does not fit either, the answer is refused saying so
(as ``teamrun serve`` refuses it), never rounded to a float. An integral float is the integer (``2.0`` is ``2``).
A ``pattern`` matches as JSON Schema means it (ECMA 262), not as Python's :mod:`re` does. No I/O here:
:func:`teamrun.tools.people.read_answer` adds what a recorded answer needs (valid text, the choices, not empty).
"""

from __future__ import annotations

import functools
import json
import math
import re
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import jsonschema

from teamrun.bounds import check_value

__all__ = [
    "AnswerOutOfBounds",
    "SchemaMisfit",
    "answer_readings",
    "ecma_regex",
    "integral",
    "schema_answer",
    "shown_value",
]


class SchemaMisfit(ValueError):
    """No reading of an answer fits the schema; the message says why (``where: problem``, values as JSON)."""

    def __init__(self, problem: jsonschema.ValidationError) -> None:
        self.problem = problem
        where = "/".join(str(p) for p in problem.path)
        super().__init__(f"{(where + ': ') if where else ''}{_schema_problem(problem)}")


class AnswerOutOfBounds(SchemaMisfit):
    """The answer read as JSON breaks :mod:`teamrun.bounds` (an integer past ±(2^63-1)...), and read as text it does
    not fit the schema either; the message is the bound's (``the answer: ...``), never the value."""

    def __init__(self, message: str) -> None:
        ValueError.__init__(self, message)
        self.problem = jsonschema.ValidationError(message)


def answer_readings(text: str) -> list[Any]:
    """The ways ``text`` can be read, in order: as JSON when it is (finite) JSON, then as the text itself."""
    readings: list[Any] = []
    try:
        reading = json.loads(text, parse_constant=_not_json)
    except ValueError:
        pass
    else:
        if _finite(reading):  # `1e999` reads as infinity: no JSON carries it to the model, read as text
            readings.append(reading)
    readings.append(text)
    return readings


def schema_answer(schema: Mapping[str, Any], text: str, *, check: Callable[[Any], None] | None = None) -> Any:
    """The answer as the schema wants it: the first of :func:`answer_readings` the schema takes, integral floats
    as integers; raises :class:`SchemaMisfit` when none fits. ``check`` is called on each reading before it is
    validated (the tools refuse text no store can keep)."""
    validator = _ecma_validator(schema)
    refused: list[list[jsonschema.ValidationError]] = []
    out_of_bounds: str | None = None
    for value in answer_readings(text):
        if check is not None:
            check(value)
        found = None if isinstance(value, str) else check_value(value, "the answer", subject="the answer")
        if found is not None:  # not rounded, not wrapped: the text reading may still fit (a string schema)
            out_of_bounds = out_of_bounds or found.message
            continue
        problems = sorted(validator.iter_errors(value), key=lambda e: list(map(str, e.path)))
        if not problems:
            return integral(value)
        refused.append(problems)
    if out_of_bounds is not None:
        raise AnswerOutOfBounds(out_of_bounds)
    # said for the reading of the right type when there is one (a string schema's pattern, not "is not a string")
    raise SchemaMisfit(next((p[0] for p in refused if p[0].validator != "type"), refused[0][0]))


def _not_json(constant: str) -> Any:
    """``NaN``, ``Infinity``, ``-Infinity``: Python's JSON reads them, JSON (and the model's messages) has none."""
    raise ValueError(f"{constant} is not JSON")


def _finite(value: Any) -> bool:
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, dict):
        return all(_finite(v) for v in value.values())
    if isinstance(value, list):
        return all(_finite(v) for v in value)
    return True


_EXACT_INTEGERS = 2**53
"""Floats up to this size hold integers exactly (larger ones are kept as floats, not made up digits)."""


def integral(value: Any) -> Any:
    """``value`` with each integral float an int: JSON Schema counts ``2.0`` as an integer (2020-12), so an
    ``integer`` answer may be typed so, but it is the integer 2 for the store, the model and every listing."""
    if isinstance(value, float) and value.is_integer() and abs(value) <= _EXACT_INTEGERS:
        return int(value)
    if isinstance(value, dict):
        return {k: integral(v) for k, v in value.items()}
    if isinstance(value, list):
        return [integral(v) for v in value]
    return value


def shown_value(value: Any) -> str:
    """An answer as a person reads it back: a string as typed, anything else as JSON (``true``, ``2``, not
    Python's ``True`` or ``2.0``)."""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


# -- `pattern` as JSON Schema means it (ECMA 262), not as Python's `re` does -------------------------------
_ECMA_SPACE = "\\t\\n\\v\\f\\r \\u00a0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000\\ufeff"
_ECMA_OUTSIDE = {
    "$": "\\Z",  # the very end: Python's `$` also accepts a trailing newline
    ".": "[^\\n\\r\\u2028\\u2029]",
    "\\s": f"[{_ECMA_SPACE}]",
    "\\S": f"[^{_ECMA_SPACE}]",
}


@functools.lru_cache(maxsize=256)
def ecma_regex(pattern: str) -> re.Pattern[str]:
    """``pattern`` compiled to match as ECMA 262 (JSON Schema's regex dialect) says: ``\\d``, ``\\w`` and ``\\b``
    are ASCII (``\\d`` does not match ``١٢٣``), ``$`` is the end of the text (not before a final newline),
    ``.`` stops at every line terminator, ``\\s`` is ECMA's whitespace. Raises :class:`re.error` for a pattern
    Python cannot read."""
    try:
        return re.compile(_ecma_translated(pattern), re.ASCII)
    except re.error:  # a construct the translation does not know: Python's reading, as before
        return re.compile(pattern)


def _ecma_translated(pattern: str) -> str:
    out: list[str] = []
    in_class = False
    i = 0
    while i < len(pattern):
        token = pattern[i : i + 2] if pattern[i] == "\\" else pattern[i]
        i += len(token)
        if in_class:
            out.append(_ECMA_SPACE if token == "\\s" else token)
            in_class = token != "]"
        elif token == "[" and pattern.startswith("]", i):  # ECMA's `[]` matches nothing
            out.append("(?!)")
            i += 1
        elif token == "[" and pattern.startswith("^]", i):  # ECMA's `[^]` matches any character
            out.append("(?s:.)")
            i += 2
        else:
            in_class = token == "["
            out.append(_ECMA_OUTSIDE.get(token, token))
            if in_class and pattern.startswith("^", i):
                out.append("^")
                i += 1
    return "".join(out)


def _ecma_pattern(
    validator: Any, pattern: str, instance: Any, schema: Mapping[str, Any]
) -> Iterator[jsonschema.ValidationError]:
    if validator.is_type(instance, "string") and not ecma_regex(pattern).search(instance):
        yield jsonschema.ValidationError(f"{instance!r} does not match {pattern!r}")


def _ecma_validator(schema: Mapping[str, Any]) -> Any:
    base = jsonschema.validators.validator_for(schema)
    return _ecma_class(base)(schema)


@functools.lru_cache(maxsize=8)
def _ecma_class(base: Any) -> Any:
    return jsonschema.validators.extend(base, {"pattern": _ecma_pattern})


# -- what is wrong, in words -------------------------------------------------------------------------------
def _schema_problem(problem: jsonschema.ValidationError) -> str:
    """What is wrong, with values said as JSON (``"3" is not of type "integer"``, ``true is not one of [1,
    null]``: jsonschema's own message says them as Python's ``repr``), the answer cut when it is long
    (:func:`_said`), and a ``pattern`` as written in the team file (``repr`` doubles each backslash)."""
    if problem.validator == "pattern" and isinstance(problem.instance, str):
        return f"{_said(problem.instance)} does not match the pattern {problem.validator_value}"
    message = str(problem.message)
    said = repr(problem.instance)
    if message.startswith(said):  # most messages start with the value: "'3' is not of type 'integer'"
        message = _said(problem.instance) + message[len(said) :]
    expected = problem.validator_value
    values = list(expected) if problem.validator == "type" and isinstance(expected, list) else [expected]
    for value in values:
        try:
            as_json = json.dumps(value, ensure_ascii=False)
        except (TypeError, ValueError):
            continue
        if len(as_json) <= _SAID_CHARS:
            message = message.replace(repr(value), as_json)
    return message


_SAID_CHARS = 200
"""How much of an answer a refusal quotes."""


def _said(value: Any) -> str:
    """``value`` as JSON for a refusal to quote: at most :data:`_SAID_CHARS` characters and its length (a
    120 KB answer is not written back in full)."""
    text = json.dumps(value, ensure_ascii=False, default=str)
    if len(text) <= _SAID_CHARS:
        return text
    length = f"{len(value)} characters" if isinstance(value, str) else f"{len(text)} characters of JSON"
    return f"{text[:_SAID_CHARS]}\N{HORIZONTAL ELLIPSIS} ({length})"
