"""What a JSON Schema cannot say about a check of an answer (eval cases, `accept:` in team files).

A check has exactly one kind, `ignore_case` only goes with `contains`, a regex
compiles, a `json_schema` is a valid JSON Schema. Each problem is a
``(path, message, at_key)`` triple the caller turns into a located diagnostic.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from teamrun.config.diagnostics import JsonPath, dotted
from teamrun.config.models import CHECK_KINDS, Check

__all__ = ["check_problems"]


def check_problems(path: JsonPath, check: Any, *, judge_model: bool = False) -> Iterator[tuple[JsonPath, str, bool]]:
    """The problems of the check at ``path`` (a value that is not a mapping is the schema's to report);
    ``judge_model``: a judge must name its model (eval cases: there is no team default to fall back on)."""
    if not isinstance(check, dict):
        return
    judge = check.get("judge")
    if judge_model and isinstance(judge, dict) and judge.get("model") is None:
        yield (*path, "judge"), f"{dotted(path)}.judge needs a model: (any LiteLLM model, or offline)", True
    kinds = [k for k in CHECK_KINDS if check.get(k) is not None]
    if not kinds and set(check) <= set(Check.model_fields):  # an unknown key is reported by the schema
        yield path, f"{dotted(path)} says nothing to check: give one of {', '.join(CHECK_KINDS)}", False
    elif len(kinds) > 1:
        yield ((*path, kinds[1]), f"{dotted(path)} has {' and '.join(kinds)}: one check does one thing; "
               "write them as separate '- ' items", True)
    if "ignore_case" in check and check.get("contains") is None:
        yield (*path, "ignore_case"), f"{dotted(path)}.ignore_case only applies to a 'contains' check", True
    regex = check.get("regex")
    if isinstance(regex, str):
        try:
            re.compile(regex)
        except (re.error, RecursionError, OverflowError) as exc:
            why = exc if isinstance(exc, re.error) else "it is too deeply nested"
            yield (*path, "regex"), f"{dotted(path)}.regex is not a valid regular expression: {why}", False
    schema = check.get("json_schema")
    if isinstance(schema, dict):
        from jsonschema import Draft202012Validator
        from jsonschema.exceptions import SchemaError

        try:
            Draft202012Validator.check_schema(schema)
        except SchemaError as exc:
            yield ((*path, "json_schema", *exc.path),
                   f"{dotted(path)}.json_schema is not a valid JSON Schema: {exc.message}", False)
