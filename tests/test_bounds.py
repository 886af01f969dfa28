"""The rules of :mod:`teamrun.bounds` on raw argument strings and on parsed values, without a run: each break is
found (never raised), at its place, and what is within the bounds passes."""

from __future__ import annotations

import json
from typing import Any

import pytest

from teamrun import bounds
from teamrun.bounds import MAX_ARGUMENT_BYTES, MAX_DEPTH, MAX_INTEGER, check_arguments, check_value, lone_surrogate


@pytest.mark.parametrize(
    ("raw", "rule", "where"),
    [
        ('{"n": ' + "9" * 400 + "}", "integer", "n"),
        ('{"n": -' + "9" * 5000 + "}", "integer", "n"),  # past json's own 4300-digit limit (a ValueError)
        ('{"n": ' + str(MAX_INTEGER + 1) + "}", "integer", "n"),
        ('{"a": [1, {"b": NaN}]}', "number", "a.1.b"),
        ('{"n": Infinity}', "number", "n"),
        ('{"n": -Infinity}', "number", "n"),
        ('{"n": 1e999}', "number", "n"),
        ('{"t": "\\ud800"}', "text", "t"),
        ('{"t": "\\udfff and more"}', "text", "t"),
        ('{"t": "\ud800"}', "text", "t"),  # the character itself, not its escape
        ('{"\\ud800": 1}', "text", "\\ud800 (the key)"),
        ('{"d": ' + "[" * 900 + "]" * 900 + "}", "depth", ""),
        ('{"d": ' + "[" * 100_000 + "]" * 100_000 + "}", "depth", ""),  # json.loads: a RecursionError
        ('{"d": ' + "[" * 100_000 + "}", "depth", ""),  # not even balanced
        ('{"t": "' + "x" * MAX_ARGUMENT_BYTES + '"}', "size", ""),
        ('{"t": "' + "é" * (MAX_ARGUMENT_BYTES // 2) + '"}', "size", ""),  # counted in UTF-8 bytes
        ('{"t": 1', "json", ""),
        ("[1, 2]", "json", ""),
    ],
)
def test_a_raw_argument_string_that_breaks_a_rule_is_found_not_raised(raw: str, rule: str, where: str) -> None:
    found = check_arguments(raw)
    assert found is not None and found.rule == rule and found.where == where, found
    assert found.message.encode("utf-8")  # always printable, even when the break is a lone surrogate


@pytest.mark.parametrize(
    "raw",
    [
        "",
        "  ",
        "{}",
        '{"n": ' + str(MAX_INTEGER) + ', "m": ' + str(-MAX_INTEGER) + "}",
        '{"x": 1e308, "y": -2.5e-300, "b": true, "z": null}',
        '{"t": "\\ud83d\\ude00 a pair is text", "u": "\U0001f600"}',
        '{"d": ' + "[" * (MAX_DEPTH - 1) + "]" * (MAX_DEPTH - 1) + "}",
        '{"t": "[[[[ brackets in a string do not nest ' + "[" * 500 + '"}',
        '{"t": "an escaped quote \\" then [[[' + "[" * 500 + '"}',
    ],
)
def test_arguments_within_the_bounds_pass(raw: str) -> None:
    assert check_arguments(raw) is None


def test_depth_counts_the_arguments_object_as_the_first_level() -> None:
    assert check_arguments('{"d": ' + "[" * (MAX_DEPTH - 1) + "]" * (MAX_DEPTH - 1) + "}") is None
    deeper = check_arguments('{"d": ' + "[" * MAX_DEPTH + "]" * MAX_DEPTH + "}")
    assert deeper is not None and deeper.rule == "depth"


@pytest.mark.parametrize(
    ("value", "rule", "where"),
    [
        ({"a": float("nan")}, "number", "a"),
        ({"a": [1, 2**70]}, "integer", "a.1"),
        ({"a": {"b": "x\udfff"}}, "text", "a.b"),
        ("x\ud800", "text", "(the value)"),
    ],
)
def test_a_parsed_value_is_checked_by_the_same_rules(value: Any, rule: str, where: str) -> None:
    found = check_value(value)
    assert found is not None and (found.rule, found.where) == (rule, where)


def test_a_parsed_value_deeper_than_python_recursion_is_found_not_raised() -> None:
    value: Any = "end"
    for _ in range(5000):
        value = [value]
    found = check_value({"d": value})
    assert found is not None and found.rule == "depth"
    assert lone_surrogate({"d": value}) is None  # the HTTP boundary's walk does not recurse either


def test_the_http_boundary_uses_the_same_text_rule() -> None:
    from teamrun.serve import security

    assert security.lone_surrogate is bounds.lone_surrogate and security.LONE_SURROGATE == bounds.LONE_SURROGATE
    assert security.printable is bounds.printable
    assert lone_surrogate({"messages": [{"content": "ok"}, {"content": "\udfff"}]}) == "messages.1.content"


def test_a_refusal_never_echoes_the_value() -> None:
    secret = "sk-" + "s" * 40
    found = check_arguments(json.dumps({"key": secret, "n": float("nan")}))
    assert found is not None and secret not in found.message
