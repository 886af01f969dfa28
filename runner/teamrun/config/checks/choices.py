"""A person's ``choices`` that the same person's ``answer_schema`` refuses: no answer could ever be given.

``teamrun answer`` (and the terminal) read an answer against the ``answer_schema`` first, as JSON when that
fits (``true``, ``3``, ``{"a": 1}``), else as the text typed; then the answer, written back (a string as it
is, anything else as JSON), must be one of the ``choices``. ``choices: [yes, no]`` with ``answer_schema:
{type: boolean}`` passes neither way: ``yes`` is no boolean, and ``true`` is not a choice. Each choice is
read so here (the rule of :func:`teamrun.tools.people.read_answer`, which ``config`` cannot import) and one
that no answer can pick is an error at the choice.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

from teamrun.config.diagnostics import Diagnostic, JsonPath, dotted, shorten

if TYPE_CHECKING:
    from teamrun.config.checks.context import CheckContext

__all__ = ["choice_checks"]

_EXACT_INTEGERS = 2**53


def choice_checks(c: CheckContext, path: JsonPath, person: Mapping[str, Any]) -> Iterator[Diagnostic]:
    """Each of ``person``'s ``choices`` (at ``path``) that its ``answer_schema`` lets no answer pick."""
    choices, schema = person.get("choices"), person.get("answer_schema")
    if not isinstance(choices, list) or not isinstance(schema, dict):
        return
    validator = _validator(schema)
    if validator is None:
        return  # an invalid schema is reported by the sub-schema checks
    for index, choice in enumerate(choices):
        if not isinstance(choice, str):
            continue  # the JSON Schema check says choices are strings
        problem = _refusal(validator, choice)
        if problem is not None:
            yield c.error(
                (*path, "choices", index),
                f"{dotted((*path, 'choices', index))}: the choice '{shorten(choice)}' can never be answered: "
                f"the answer_schema refuses it ({problem}); make the choices values the schema accepts "
                "(e.g. 'true' and 'false' for a boolean) or drop one of the two",
                "tool",
            )


def _validator(schema: dict[str, Any]) -> Any:
    from jsonschema import Draft202012Validator
    from jsonschema.exceptions import SchemaError

    try:
        Draft202012Validator.check_schema(schema)
    except (SchemaError, ValueError, TypeError, RecursionError):
        return None
    return Draft202012Validator(schema)


def _refusal(validator: Any, choice: str) -> str | None:
    """Why no answer typed as ``choice`` is taken; ``None`` when it is."""
    readings: list[Any] = []
    try:
        reading = json.loads(choice, parse_constant=_not_json)
    except ValueError:
        pass
    else:
        if _finite(reading):
            readings.append(reading)
    readings.append(choice)
    said: str | None = None
    for value in readings:
        try:
            problem = next(iter(validator.iter_errors(value)), None)
        except Exception:  # an unresolvable $ref...: said by the sub-schema checks
            return None
        if problem is not None:
            said = said or str(problem.message)
            continue
        value = _integral(value)
        shown = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
        if shown == choice:
            return None
        said = said or f"it reads as {shown}, which is not one of the choices"
    return said


def _not_json(constant: str) -> Any:
    raise ValueError(f"{constant} is not JSON")


def _finite(value: Any) -> bool:
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, dict):
        return all(_finite(v) for v in value.values())
    if isinstance(value, list):
        return all(_finite(v) for v in value)
    return True


def _integral(value: Any) -> Any:
    if isinstance(value, float) and value.is_integer() and abs(value) <= _EXACT_INTEGERS:
        return int(value)
    if isinstance(value, dict):
        return {k: _integral(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_integral(v) for v in value]
    return value
