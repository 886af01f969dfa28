"""What a JSON Schema cannot say about a check of an answer (eval cases, `accept:` in team files).

A check has exactly one kind, `ignore_case` only goes with `contains`, a regex
compiles, a `json_schema` is a valid JSON Schema. Each problem is a
``(path, message, at_key)`` triple the caller turns into a located diagnostic.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from teamrun.config.diagnostics import JsonPath, dotted
from teamrun.config.regexes import judge_regex

__all__ = ["CHECK_KINDS", "check_cautions", "check_problems"]

CHECK_KINDS = ("contains", "regex", "json_schema", "python", "judge")
"""The keys that say what a check does; a check has exactly one of them (the ``Check`` model reads them here)."""


def check_problems(path: JsonPath, check: Any, *, judge_model: bool = False) -> Iterator[tuple[JsonPath, str, bool]]:
    """The problems of the check at ``path`` (a value that is not a mapping is the schema's to report);
    ``judge_model``: a judge must name its model (eval cases: there is no team default to fall back on)."""
    if not isinstance(check, dict):
        return
    judge = check.get("judge")
    if judge_model and isinstance(judge, dict) and judge.get("model") is None:
        yield (*path, "judge"), f"{dotted(path)}.judge needs a model: (any LiteLLM model, or offline)", True
    kinds = [k for k in CHECK_KINDS if check.get(k) is not None]
    if not kinds and set(check) <= _check_keys():  # an unknown key is reported by the schema
        yield path, f"{dotted(path)} says nothing to check: give one of {', '.join(CHECK_KINDS)}", False
    elif len(kinds) > 1:
        yield (
            (*path, kinds[1]),
            f"{dotted(path)} has {' and '.join(kinds)}: one check does one thing; write them as separate '- ' items",
            True,
        )
    if "ignore_case" in check and check.get("contains") is None:
        yield (*path, "ignore_case"), f"{dotted(path)}.ignore_case only applies to a 'contains' check", True
    regex = check.get("regex")
    if isinstance(regex, str):
        error = judge_regex(regex).error
        if error is not None:
            yield (*path, "regex"), f"{dotted(path)}.regex is not a valid regular expression: {error}", False
    schema = check.get("json_schema")
    if isinstance(schema, dict):
        from jsonschema import Draft202012Validator
        from jsonschema.exceptions import SchemaError

        try:
            Draft202012Validator.check_schema(schema)
        except SchemaError as exc:
            yield (
                (*path, "json_schema", *exc.path),
                f"{dotted(path)}.json_schema is not a valid JSON Schema: {exc.message}",
                False,
            )


def check_cautions(path: JsonPath, check: Any) -> Iterator[tuple[JsonPath, str]]:
    """What is worth a warning in the check at ``path``: a regex Python warns about (see :mod:`.regexes`)."""
    regex = check.get("regex") if isinstance(check, dict) else None
    caution = judge_regex(regex).caution if isinstance(regex, str) else None
    if caution is not None:
        yield (*path, "regex"), f"{dotted(path)}.regex: regular expression '{regex}': {caution}"


def _check_keys() -> set[str]:
    """The keys a check may have: the ``Check`` definition of the team-file schema (no pydantic needed)."""
    from teamrun.config.schema import team_schema

    return set(team_schema()["$defs"]["Check"]["properties"])
