"""Semantic checks of the JSON Schemas written inside a team file.

An agent's ``output_schema``, a tool's ``parameters`` and a person's ``answer_schema``:
each must be a valid JSON Schema (checked against the 2020-12 meta-schema), its
``$ref``s local, resolvable and free of endless loops, and its regular expressions
ones that cannot stall a run.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from teamrun.config.diagnostics import Diagnostic, JsonPath, did_you_mean, dotted, shorten
from teamrun.config.regexes import judge_regex

if TYPE_CHECKING:
    from teamrun.config.checks.context import CheckContext

__all__ = ["SchemaRefs", "first_error", "sub_schema"]

_JSON_TYPES = ("array", "boolean", "integer", "null", "number", "object", "string")


def _is_regex(instance: object) -> bool:
    if isinstance(instance, str):
        verdict = judge_regex(instance)  # a caution is reported by _regex_cautions, located
        if verdict.error is not None:
            raise re.error(verdict.error)
    return True


@functools.cache
def _meta_validator() -> Any:
    from jsonschema import Draft202012Validator, FormatChecker

    formats = FormatChecker(formats=())
    formats.checkers = dict(Draft202012Validator.FORMAT_CHECKER.checkers)
    # jsonschema's own regex check lets OverflowError (`a{99999999999}`) escape as a traceback
    formats.checks("regex", raises=(re.error, OverflowError))(_is_regex)
    return Draft202012Validator(Draft202012Validator.META_SCHEMA, format_checker=formats)


def _schema_patterns(schema: Any, at: JsonPath = ()) -> Iterator[tuple[JsonPath, str, bool]]:
    """The regular expressions of a JSON Schema: each ``pattern`` value and ``patternProperties`` key, with
    its path and whether it is a key."""
    if isinstance(schema, list):
        for index, item in enumerate(schema):
            yield from _schema_patterns(item, (*at, index))
        return
    if not isinstance(schema, dict):
        return
    for key, value in schema.items():
        if key in _DATA_KEYWORDS:
            continue  # data, not schemas
        if key == "pattern" and isinstance(value, str):
            yield (*at, key), value, False
            continue
        if key == "patternProperties" and isinstance(value, dict):
            yield from (((*at, key, name), name, True) for name in value if isinstance(name, str))
        if key in ("properties", "patternProperties", "$defs", "definitions", "dependentSchemas") and isinstance(
            value, dict
        ):
            for name, sub in value.items():
                yield from _schema_patterns(sub, (*at, key, name))
        elif isinstance(value, dict | list):
            yield from _schema_patterns(value, (*at, key))


_IN_PLACE = ("allOf", "anyOf", "oneOf", "not", "if", "then", "else", "dependentSchemas")
"""Keywords whose sub-schemas apply to the same value (a ``$ref`` loop through only these never ends)."""
_DATA_KEYWORDS = ("enum", "const", "default", "examples")
"""Keywords whose values are data, not schemas."""


class SchemaRefs:
    """The ``$ref``s of a JSON Schema written in a team file: local only, resolvable, no endless loop.

    teamrun never fetches a schema over the network, so a ``$ref`` that is not
    a fragment of the same schema (``#/$defs/x``, ``#anchor``) is an error.
    """

    def __init__(self, schema: dict[str, Any]) -> None:
        self.schema = schema
        self.refs: list[tuple[JsonPath, str]] = []
        self.anchors: dict[str, JsonPath] = {}
        self._collect(schema, ())

    def _collect(self, node: Any, path: JsonPath) -> None:
        if isinstance(node, dict):
            for key, value in node.items():
                if key in ("$ref", "$dynamicRef") and isinstance(value, str):
                    self.refs.append(((*path, key), value))
                elif key in ("$anchor", "$dynamicAnchor") and isinstance(value, str):
                    self.anchors.setdefault(value, path)
                elif key not in _DATA_KEYWORDS:
                    self._collect(value, (*path, key))
        elif isinstance(node, list):
            for index, value in enumerate(node):
                self._collect(value, (*path, index))

    def target(self, ref: str) -> JsonPath | None:
        """Where a local ``$ref`` points (``None`` when it points nowhere)."""
        from urllib.parse import unquote

        fragment = unquote(ref[1:])
        if fragment and not fragment.startswith("/"):
            return self.anchors.get(fragment)
        node: Any = self.schema
        path: list[str | int] = []
        for token in fragment.split("/")[1:] if fragment else []:
            part = token.replace("~1", "/").replace("~0", "~")
            if isinstance(node, dict) and part in node:
                node = node[part]
                path.append(part)
            elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
                node = node[int(part)]
                path.append(int(part))
            else:
                return None
        return tuple(path) if isinstance(node, dict | bool) else None

    def problems(self) -> Iterator[tuple[JsonPath, str]]:
        for where, ref in self.refs:
            key = where[-1]
            if not ref.startswith("#"):
                yield (
                    where,
                    (
                        f"'{key}: {shorten(ref)}' refers outside this schema; teamrun never fetches schemas "
                        "(copy the definition under '$defs' and write '#/$defs/name')"
                    ),
                )
            elif self.target(ref) is None:
                yield where, f"'{key}: {shorten(ref)}' does not point at a schema in this one"
        yield from self._loops()

    def _node(self, path: JsonPath) -> Any:
        node: Any = self.schema
        for step in path:
            node = node[step]
        return node

    def _in_place(self, path: JsonPath) -> Iterator[tuple[JsonPath, JsonPath]]:
        """``(where, next)``: schemas applied to the same value as the one at ``path``."""
        node = self._node(path)
        if not isinstance(node, dict):
            return
        for key in _IN_PLACE:
            value = node.get(key)
            if isinstance(value, list) and key.endswith("Of"):
                yield from (((*path, key, i), (*path, key, i)) for i in range(len(value)))
            elif isinstance(value, dict) and key == "dependentSchemas":
                yield from (((*path, key, name), (*path, key, name)) for name in value)
            elif isinstance(value, dict) and not key.endswith("Of") and key != "dependentSchemas":
                yield (*path, key), (*path, key)
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith("#"):
            target = self.target(ref)
            if target is not None:
                yield (*path, "$ref"), target

    def _loops(self) -> Iterator[tuple[JsonPath, str]]:
        """A ``$ref`` that reaches its own schema again without descending into the value never ends."""
        state: dict[JsonPath, str] = {}
        for start, _ in self.refs:
            root = start[:-1]
            if root in state:
                continue
            state[root] = "active"
            stack: list[tuple[JsonPath, Iterator[tuple[JsonPath, JsonPath]]]] = [(root, self._in_place(root))]
            while stack:
                step = next(stack[-1][1], None)
                if step is None:
                    state[stack.pop()[0]] = "done"
                    continue
                where, target = step
                if state.get(target) == "active":
                    yield (
                        where,
                        (
                            "'$ref' leads back to the schema it is part of without going into a property "
                            "or an item (an endless loop)"
                        ),
                    )
                    return
                if target not in state:
                    state[target] = "active"
                    stack.append((target, self._in_place(target)))


def sub_schema(c: CheckContext, path: JsonPath, schema: Any) -> Iterator[Diagnostic]:
    """The JSON Schema at ``path``."""
    if not isinstance(schema, dict):
        return
    from teamrun.config.schema import describe_type, describe_value

    for where, problem in SchemaRefs(schema).problems():
        yield c.error((*path, *where), f"{dotted(path)} is not a valid JSON Schema: {problem}", "output_schema")

    seen: set[tuple[JsonPath, str]] = set()
    for error in _meta_validator().iter_errors(schema):
        inner: JsonPath = tuple(error.absolute_path)
        if (inner, error.message) in seen:
            continue  # the meta-schema reaches some keywords along several routes
        seen.add((inner, error.message))
        sub = f"'{dotted(inner)}'"
        if inner and inner[-1] == "type" and isinstance(error.instance, str):
            types = "; types are: " + ", ".join(_JSON_TYPES)
            detail = f"unknown type '{error.instance}'" + (did_you_mean(error.instance, _JSON_TYPES) or types)
        elif error.validator == "type":
            expected = describe_type(error.validator_value)
            detail = f"{sub} must be {expected}, not {describe_value(error.instance)}"
        elif error.validator in ("minimum", "exclusiveMinimum"):
            sign = ">=" if error.validator == "minimum" else ">"
            detail = f"{sub} must be {sign} {error.validator_value}, not {error.instance}"
        elif error.validator == "format" and error.validator_value == "regex":
            detail = f"{sub} is not a valid regular expression: '{error.instance}'"
        elif inner:
            detail = f"{sub}: {error.message}"
        else:
            detail = error.message
        yield c.error(
            (*path, *inner),
            f"{dotted(path)} is not a valid JSON Schema: {detail}",
            "output_schema",
        )
    for inner, pattern, at_key in _schema_patterns(schema):
        caution = judge_regex(pattern).caution
        if caution is not None:
            yield c.warning(
                (*path, *inner),
                f"{dotted((*path, *inner))}: regular expression '{shorten(pattern)}': {caution}",
                "regex",
                key=at_key,
            )


def first_error(schema: dict[str, Any], value: Any) -> Any | None:
    """The first way ``value`` breaks ``schema`` (a :class:`jsonschema.ValidationError`), or ``None``: the
    draft the schema names, else 2020-12. For a value written in the team file (an entry's ``initial``)."""
    import jsonschema

    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    return next(iter(cls(schema).iter_errors(value)), None)
