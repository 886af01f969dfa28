"""A person's ``choices`` that the same person's ``answer_schema`` refuses: no answer could ever be given.

``teamrun answer`` (and the terminal) read an answer against the ``answer_schema`` first, as JSON when that
fits (``true``, ``3``, ``{"a": 1}``), else as the text typed; then the answer, written back (a string as it
is, anything else as JSON), must be one of the ``choices``. ``choices: [yes, no]`` with ``answer_schema:
{type: boolean}`` passes neither way: ``yes`` is no boolean, and ``true`` is not a choice. Each choice is
read so here, by the rule ``teamrun answer`` reads an answer by (:mod:`teamrun.config.answers`: JSON Schema's
``pattern`` as ECMA 262 means it, so ``pattern: '^\\d+$'`` refuses ``١٢٣`` here as there), and one that no
answer can pick is an error at the choice.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

from teamrun.config.answers import SchemaMisfit, schema_answer, shown_value
from teamrun.config.diagnostics import Diagnostic, JsonPath, dotted, shorten

if TYPE_CHECKING:
    from teamrun.config.checks.context import CheckContext

__all__ = ["choice_checks"]


def choice_checks(c: CheckContext, path: JsonPath, person: Mapping[str, Any]) -> Iterator[Diagnostic]:
    """Each of ``person``'s ``choices`` (at ``path``) that its ``answer_schema`` lets no answer pick."""
    choices, schema = person.get("choices"), person.get("answer_schema")
    if not isinstance(choices, list) or not isinstance(schema, dict):
        return
    if not _valid(schema):
        return  # an invalid schema is reported by the sub-schema checks
    for index, choice in enumerate(choices):
        if not isinstance(choice, str):
            continue  # the JSON Schema check says choices are strings
        problem = _refusal(schema, choice)
        if problem is not None:
            yield c.error(
                (*path, "choices", index),
                f"{dotted((*path, 'choices', index))}: the choice '{shorten(choice)}' can never be answered: "
                f"the answer_schema refuses it ({problem}); make the choices values the schema accepts "
                "(e.g. 'true' and 'false' for a boolean) or drop one of the two",
                "tool",
            )


def _valid(schema: dict[str, Any]) -> bool:
    from jsonschema import Draft202012Validator
    from jsonschema.exceptions import SchemaError

    try:
        Draft202012Validator.check_schema(schema)
    except (SchemaError, ValueError, TypeError, RecursionError):
        return False
    return True


def _refusal(schema: dict[str, Any], choice: str) -> str | None:
    """Why no answer typed as ``choice`` is taken; ``None`` when it is."""
    try:
        value = schema_answer(schema, choice)
    except SchemaMisfit as exc:
        return str(exc)
    except Exception:  # an unresolvable $ref...: said by the sub-schema checks
        return None
    shown = shown_value(value)
    if shown == choice:
        return None
    return f"it reads as {shown}, which is not one of the choices"
