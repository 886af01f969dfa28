"""JSON Schema validation of a loaded team file, with messages a person can act on.

The schema itself is generated from :mod:`teamrun.config.models` and
committed as ``schemas/team.schema.json`` (shipped inside the wheel as
``teamrun/schemas/team.schema.json``). Reading it needs no pydantic.
"""

from __future__ import annotations

import functools
import json
import math
import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from teamrun.config.diagnostics import Diagnostic, JsonPath, did_you_mean, dotted
from teamrun.config.yamlsrc import SourceMap

_CANDIDATES = (
    Path(__file__).resolve().parent.parent / "schemas" / "team.schema.json",  # installed wheel
    Path(__file__).resolve().parent.parent.parent / "schemas" / "team.schema.json",  # source tree
)

_TYPE_WORDS = {
    "object": "a mapping",
    "array": "a list",
    "string": "a string",
    "integer": "an integer",
    "number": "a number",
    "boolean": "true/false",
    "null": "empty",
}


def schema_path() -> Path:
    """Where the team-file schema lives on this installation."""
    for candidate in _CANDIDATES:
        if candidate.is_file():
            return candidate
    raise FileNotFoundError("team.schema.json is missing from this teamrun installation")


@functools.cache
def team_schema() -> dict[str, Any]:
    """The team-file JSON Schema."""
    loaded: dict[str, Any] = json.loads(schema_path().read_text(encoding="utf-8"))
    return loaded


def ecma_pattern(pattern: str) -> re.Pattern[str]:
    """``pattern`` compiled with JSON Schema's (ECMA-262) meaning of a final ``$``.

    In ECMA-262, and in the Rust regexes pydantic uses, ``$`` matches only at the
    very end; Python's ``$`` also matches before a final newline, which would let
    ``name: |`` block values such as ``"lead\\n"`` through the schema.
    """
    return _ecma_regex(pattern)


@functools.lru_cache(maxsize=256)
def _ecma_regex(pattern: str) -> re.Pattern[str]:
    if pattern.endswith("$") and not pattern.endswith("\\$"):
        pattern = pattern[:-1] + r"\Z"
    return re.compile(pattern)


@functools.cache
def team_validator() -> Any:
    """The jsonschema validator for team files (imported on first use: it is slow to load)."""
    from jsonschema import Draft202012Validator, validators
    from jsonschema.exceptions import ValidationError

    def pattern(validator: Any, expected: str, instance: Any, schema: Any) -> Iterator[Any]:
        if validator.is_type(instance, "string") and not ecma_pattern(expected).search(instance):
            yield ValidationError(f"{instance!r} does not match {expected!r}")

    return validators.extend(Draft202012Validator, {"pattern": pattern})(team_schema())


def describe_type(types: Any) -> str:
    """JSON Schema ``type`` (a name or a list of names) in words: ``a mapping or true/false``."""
    names = types if isinstance(types, list) else [types]
    words = [_TYPE_WORDS.get(str(name), str(name)) for name in names]
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " or " + words[-1]


def describe_value(value: Any) -> str:
    """What a loaded value is, for messages: ``the string "ten"``, ``a list``."""
    return _kind(value)


def _kind(value: Any) -> str:
    if isinstance(value, bool):
        return f"the boolean {str(value).lower()}"
    if value is None:
        return "empty"
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, str):
        return f"the string {json.dumps(value, ensure_ascii=False)}" if len(value) <= 40 else "a string"
    if isinstance(value, int):
        return f"the integer {value}"
    if isinstance(value, float):
        return f"the number {value}"
    return type(value).__name__


def _missing(error: Any) -> str:
    """The key a ``required`` error is about."""
    message: str = error.message
    return message.split("'")[1] if "'" in message else message


def _suggestion(key: str, schema: dict[str, Any]) -> str | None:
    import difflib

    close = difflib.get_close_matches(key, list(schema.get("properties", {})), n=1, cutoff=0.6)
    return close[0] if close else None


def _resolve(schema: dict[str, Any]) -> dict[str, Any]:
    ref = schema.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/$defs/"):
        resolved: dict[str, Any] = team_schema()["$defs"][ref.removeprefix("#/$defs/")]
        return resolved
    return schema


_REQUIRED_HINTS = {
    "version": "add 'version: 1'",
    "name": "a short name for the team, e.g. 'name: product-research'",
    "supervisor": "the agent that receives the user's input, e.g. 'supervisor: lead'",
    "agents": "a mapping of agent names to their settings",
}

_TOKEN = re.compile(r"[^\s,\]}#]+")


def _where(path: JsonPath) -> str:
    return f"in {dotted(path)}" if path else "at the top level"


class SchemaChecker:
    """Turns jsonschema errors into located :class:`Diagnostic` objects."""

    def __init__(self, file: str, source_map: SourceMap, text: str = "") -> None:
        self.file = file
        self.source_map = source_map
        self.lines = text.splitlines()

    def check(self, data: Any) -> list[Diagnostic]:
        if quick_is_valid(data, team_schema()):
            return []  # no need for jsonschema at all
        errors = list(team_validator().iter_errors(data))
        # `agent:` for `agents:` is one mistake: report the unknown key, not also the missing one.
        suggested = {
            (tuple(e.absolute_path), _suggestion(key, e.schema))
            for e in errors
            if e.validator == "additionalProperties" and isinstance(e.instance, dict)
            for key in e.instance
            if key not in e.schema.get("properties", {})
        }
        # `version: "1"` breaks both `const` and `type`: one message is enough.
        choices = {tuple(e.absolute_path) for e in errors if e.validator in ("enum", "const")}
        diagnostics: list[Diagnostic] = []
        for error in errors:
            path = tuple(error.absolute_path)
            if error.validator == "required" and (path, _missing(error)) in suggested:
                continue
            if error.validator == "type" and path in choices:
                continue
            diagnostics.extend(self._convert(error))
        return diagnostics

    # -- one jsonschema error → diagnostics ---------------------------------------------

    def _convert(self, error: Any) -> Iterator[Diagnostic]:
        path: JsonPath = tuple(error.absolute_path)
        kind = error.validator
        where = dotted(path)
        if "propertyNames" in error.schema_path:
            yield from self._bad_names(error.instance, path)
        elif kind == "additionalProperties":
            yield from self._unknown_keys(error, path)
        elif kind == "required":
            missing = _missing(error)
            owner = where if path else "the team file"
            hint = _REQUIRED_HINTS.get(missing, "") if not path else ""
            yield self._at_key(
                path,
                f"{owner} is missing the required key '{missing}'" + (f": {hint}" if hint else ""),
            )
        elif kind in ("type", "anyOf", "oneOf"):
            expected = self._expected(error)
            message = f"{where} must be {expected}, not {_kind(error.instance)}"
            if isinstance(error.instance, bool) and "a string" in expected:
                message += self._boolean_hint(path)
            elif isinstance(error.instance, str) and expected == "a list":
                message += f" (write [{error.instance}] for a list of one)"
            elif error.instance is None and expected == "a mapping":
                message += " (write {} for no settings)"
            elif isinstance(error.instance, list) and expected == "a mapping":
                message += " (write 'name:' keys with their settings indented below, not '- ' items)"
            yield self._at_value(path, message)
        elif kind in ("enum", "const"):
            yield self._at_value(path, self._choice_message(error, where))
        elif kind == "pattern":
            yield self._at_value(path, self._pattern_message(path, error.instance))
        elif kind in ("minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum"):
            sign = {
                "minimum": ">=",
                "exclusiveMinimum": ">",
                "maximum": "<=",
                "exclusiveMaximum": "<",
            }[kind]
            yield self._at_value(path, f"{where} must be {sign} {error.validator_value}, not {error.instance}")
        elif kind in ("minItems", "minProperties", "minLength"):
            hint = ": define at least one agent (the supervisor)" if path == ("agents",) else ""
            yield self._at_value(path, f"{where} must not be empty{hint}")
        else:
            yield self._at_value(path, f"{where}: {error.message}")

    def _unknown_keys(self, error: Any, path: JsonPath) -> Iterator[Diagnostic]:
        allowed = sorted(error.schema.get("properties", {}))
        instance = error.instance if isinstance(error.instance, dict) else {}
        for key in instance:
            if key in allowed:
                continue
            hint = did_you_mean(key, allowed) or f"; allowed keys: {', '.join(allowed)}"
            mark = self.source_map.key((*path, key))
            message = f"unknown key '{key}' {_where(path)}{hint}"
            yield Diagnostic(self.file, mark.line, mark.column, message)

    def _bad_names(self, name: Any, path: JsonPath) -> Iterator[Diagnostic]:
        what = {"agents": "agent", "tools": "tool", "vars": "variable", "parameters": "parameter"}
        noun = what.get(str(path[-1]) if path else "", "name")
        mark = self.source_map.key((*path, str(name)))
        message = (
            f"{noun} name '{name}' is not allowed: use letters, digits, '_' and '-', "
            "starting with a letter, at most 48 characters"
        )
        yield Diagnostic(self.file, mark.line, mark.column, message)

    def _expected(self, error: Any) -> str:
        schema = _resolve(error.schema)
        options = schema.get("anyOf") or schema.get("oneOf") or [schema]
        words: list[str] = []
        for option in options:
            option = _resolve(option)
            types = option.get("type", "object" if "properties" in option else None)
            for name in types if isinstance(types, list) else [types]:
                word = _TYPE_WORDS.get(str(name))
                if word and word not in words:
                    words.append(word)
        if "an integer" in words and "a number" in words:
            words.remove("an integer")
        if not words:
            return "valid here"
        return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " or " + words[-1]

    def _choice_message(self, error: Any, where: str) -> str:
        choices = error.validator_value if error.validator == "enum" else [error.validator_value]
        shown = ", ".join(json.dumps(c) for c in choices)
        value = error.instance
        hint = did_you_mean(str(value), [str(c) for c in choices]) if isinstance(value, str) else ""
        if isinstance(value, str) and any(value == str(c) and not isinstance(c, str) for c in choices):
            hint = " (a number, so write it without quotes)"
        elif isinstance(value, bool):
            hint = self._boolean_hint(tuple(error.absolute_path), for_text=False)
        if len(choices) == 1:
            return f"{where} must be {shown}, not {json.dumps(value)}{hint}"
        return f"{where} must be one of {shown}, not {json.dumps(value)}{hint}"

    def _boolean_hint(self, path: JsonPath, *, for_text: bool = True) -> str:
        """YAML 1.1 reads ``no``, ``off``, ``yes``... as booleans; say so with the word written."""
        mark = self.source_map.value(path)
        line = self.lines[mark.line - 1] if 0 < mark.line <= len(self.lines) else ""
        token = _TOKEN.match(line, mark.column - 1)
        written = token.group(0) if token else ""
        if written and written.lower() not in ("true", "false"):
            value = "true" if written.lower() in ("y", "yes", "on") else "false"
            quote = f'; write "{written}" in quotes for text' if for_text else ""
            return f" (YAML reads a bare {written} as {value}{quote})"
        return " (quote the text)" if for_text else ""

    def _pattern_message(self, path: JsonPath, value: Any) -> str:
        message = self._pattern_problem(path, value)
        if isinstance(value, str) and value.endswith("\n"):
            message += " (a '|' or '>' block value ends with a line break: write the value on the key's line)"
        return message

    def _pattern_problem(self, path: JsonPath, value: Any) -> str:
        where = dotted(path)
        field = next((p for p in reversed(path) if isinstance(p, str)), "")
        if field in ("python", "call"):
            return f"{where}: '{value}' is not a Python import path; write it as 'package.module:function'"
        if field == "api_key_env":
            return (
                f"{where}: '{value}' is not an environment variable name "
                "(write the variable's name, e.g. OPENAI_API_KEY, never the key itself)"
            )
        if path == ("name",):
            return (
                f"team name '{value}' is not allowed: use letters, digits, '_', '.' and '-', "
                "starting with a letter or digit, at most 64 characters"
            )
        return (
            f"{where}: '{value}' is not a valid name: use letters, digits, '_' and '-', "
            "starting with a letter, at most 48 characters"
        )

    def _at_value(self, path: JsonPath, message: str) -> Diagnostic:
        mark = self.source_map.value(path)
        return Diagnostic(self.file, mark.line, mark.column, message)

    def _at_key(self, path: JsonPath, message: str) -> Diagnostic:
        mark = self.source_map.key(path) if path else self.source_map.value(path)
        return Diagnostic(self.file, mark.line, mark.column, message)


# -- quick answers ------------------------------------------------------------------------------
#
# Importing jsonschema and building its validators costs more than checking a typical
# team file, and a valid file (the usual case in CI) needs none of its error reporting.
# So two conservative shortcuts run first:
#
# * quick_is_valid() decides the team schema for the keywords that schema uses. Any
#   keyword it does not know makes it answer None ("cannot tell") and jsonschema decides;
#   jsonschema also runs whenever the answer is "invalid", to produce the messages.
# * is_plain_schema() says whether an embedded JSON Schema (output_schema, tool
#   parameters) uses only simple keywords with well-formed values, so that it is
#   certainly valid against the draft 2020-12 meta-schema.
#
# tests/config/test_validate_fuzz.py checks both against jsonschema.

_TYPES = frozenset(("array", "boolean", "integer", "null", "number", "object", "string"))
_ANNOTATIONS = frozenset(
    ("description", "title", "default", "examples", "$comment", "deprecated", "format", "$schema", "$id", "$defs")
)
"""Keywords that never make data invalid (no format checker: ``format`` only annotates)."""


_BOUNDS = {
    "minimum": lambda value, bound: value < bound,
    "maximum": lambda value, bound: value > bound,
    "exclusiveMinimum": lambda value, bound: value <= bound,
    "exclusiveMaximum": lambda value, bound: value >= bound,
}


class _Unknown(Exception):
    """The schema uses something this module does not decide: ask jsonschema."""


@functools.lru_cache(maxsize=256)
def _regex(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern)


def _is_type(value: Any, name: str) -> bool:
    # jsonschema's default type checker: booleans are not numbers; 1.0 is an integer
    if name == "string":
        return isinstance(value, str)
    if name == "object":
        return isinstance(value, dict)
    if name == "array":
        return isinstance(value, list)
    if name == "boolean":
        return isinstance(value, bool)
    if name == "null":
        return value is None
    if isinstance(value, bool):
        return False
    if name == "integer":
        return isinstance(value, int) or (isinstance(value, float) and value.is_integer())
    if name == "number":
        return isinstance(value, int | float)
    raise _Unknown(name)


def _equal(one: Any, two: Any) -> bool:
    """JSON equality as jsonschema sees it: true is not 1, but 1 is 1.0."""
    if isinstance(one, list | dict) or isinstance(two, list | dict):
        raise _Unknown("structured enum value")
    if isinstance(one, str) or isinstance(two, str):
        return bool(one == two)
    if isinstance(one, bool) or isinstance(two, bool):
        return type(one) is type(two) and bool(one == two)
    return bool(one == two)


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


class _Checker:
    def __init__(self, root: Mapping[str, Any]) -> None:
        self.root = root

    def valid(self, value: Any, schema: Any) -> bool:
        if schema is True:
            return True
        if schema is False:
            return False
        if not isinstance(schema, dict):
            raise _Unknown("schema")
        return all(self._keyword(key, expected, value, schema) for key, expected in schema.items())

    def _keyword(self, keyword: str, expected: Any, value: Any, schema: dict[str, Any]) -> bool:
        if keyword in _ANNOTATIONS:
            return True
        if keyword == "$ref":
            if not isinstance(expected, str) or not expected.startswith("#/$defs/"):
                raise _Unknown(keyword)
            return self.valid(value, self.root["$defs"][expected.removeprefix("#/$defs/")])
        if keyword == "type":
            names = expected if isinstance(expected, list) else [expected]
            return any(_is_type(value, name) for name in names)
        if keyword == "enum":
            return any(_equal(value, choice) for choice in expected)
        if keyword == "const":
            return _equal(value, expected)
        if keyword == "anyOf":
            return any(self.valid(value, option) for option in expected)
        if keyword in _BOUNDS:
            # written as jsonschema's failure conditions, so NaN behaves the same
            return not _number(value) or not _BOUNDS[keyword](value, expected)
        if keyword == "pattern":
            return not isinstance(value, str) or ecma_pattern(expected).search(value) is not None
        if keyword == "minLength":
            return not isinstance(value, str) or len(value) >= expected
        if keyword == "minItems":
            return not isinstance(value, list) or len(value) >= expected
        if keyword == "items":
            return not isinstance(value, list) or all(self.valid(item, expected) for item in value)
        if not isinstance(value, dict):
            if keyword in (
                "properties",
                "additionalProperties",
                "patternProperties",
                "propertyNames",
                "required",
                "minProperties",
            ):
                return True
            raise _Unknown(keyword)
        if keyword == "minProperties":
            return len(value) >= int(expected)
        if keyword == "required":
            return all(name in value for name in expected)
        if keyword == "properties":
            return all(self.valid(value[name], sub) for name, sub in expected.items() if name in value)
        if keyword == "patternProperties":
            return all(
                self.valid(item, sub)
                for pattern, sub in expected.items()
                for key, item in value.items()
                if _regex(pattern).search(key)
            )
        if keyword == "propertyNames":
            return all(self.valid(key, expected) for key in value)
        if keyword == "additionalProperties":
            known = schema.get("properties", {})
            patterns = [_regex(p) for p in schema.get("patternProperties", {})]
            extra = [
                item for key, item in value.items() if key not in known and not any(p.search(key) for p in patterns)
            ]
            return all(self.valid(item, expected) for item in extra)
        raise _Unknown(keyword)


def quick_is_valid(data: Any, schema: Mapping[str, Any]) -> bool | None:
    """Whether ``data`` satisfies ``schema`` (``None`` when this module cannot tell)."""
    try:
        return _Checker(schema).valid(data, dict(schema))
    except (_Unknown, KeyError, TypeError, ValueError, re.error, RecursionError):
        return None


# -- embedded schemas ------------------------------------------------------------------------

_NON_NEGATIVE = frozenset(("minLength", "maxLength", "minItems", "maxItems", "minProperties", "maxProperties"))
_NUMBERS = frozenset(("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"))
_TEXTS = frozenset(("description", "title", "$comment", "format"))
_ANYTHING = frozenset(("default", "const", "examples"))
_BOOLEANS = frozenset(("uniqueItems", "deprecated", "readOnly", "writeOnly"))


def is_plain_schema(schema: Any, depth: int = 0) -> bool:
    """True when ``schema`` is certainly a valid draft 2020-12 schema (False: go and check)."""
    if isinstance(schema, bool):
        return True
    if not isinstance(schema, dict) or depth > 20:
        return False
    for keyword, value in schema.items():
        if keyword in _TEXTS:
            ok = isinstance(value, str)
        elif keyword in _ANYTHING:
            ok = keyword != "examples" or isinstance(value, list)
        elif keyword in _BOOLEANS:
            ok = isinstance(value, bool)
        elif keyword in _NON_NEGATIVE:
            ok = isinstance(value, int) and not isinstance(value, bool) and value >= 0
        elif keyword in _NUMBERS:
            ok = _number(value) and math.isfinite(value)
        elif keyword == "multipleOf":
            ok = _number(value) and math.isfinite(value) and value > 0
        elif keyword == "type":
            names = value if isinstance(value, list) else [value]
            ok = (
                bool(names) and all(isinstance(n, str) and n in _TYPES for n in names) and len(set(names)) == len(names)
            )
        elif keyword == "enum":
            ok = isinstance(value, list)
        elif keyword == "required":
            ok = isinstance(value, list) and all(isinstance(n, str) for n in value) and len(set(value)) == len(value)
        elif keyword == "pattern":
            ok = isinstance(value, str) and _compiles(value)
        elif keyword in ("items", "additionalProperties"):
            ok = is_plain_schema(value, depth + 1)
        elif keyword == "properties":
            ok = isinstance(value, dict) and all(is_plain_schema(v, depth + 1) for v in value.values())
        else:
            ok = False
        if not ok:
            return False
    return True


def _compiles(pattern: str) -> bool:
    try:
        _regex(pattern)
    except (re.error, RecursionError, OverflowError):
        return False
    return True
