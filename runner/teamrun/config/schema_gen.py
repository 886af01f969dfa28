"""Generate ``schemas/team.schema.json`` from the pydantic models.

Run ``python -m teamrun.config.schema_gen > schemas/team.schema.json`` after
changing :mod:`teamrun.config.models`; ``tests/config/test_schema_sync.py``
fails while the committed file is stale.
"""

from __future__ import annotations

import ast
import inspect
import itertools
import json
from types import ModuleType
from typing import Any

from pydantic import BaseModel
from pydantic.json_schema import GenerateJsonSchema, JsonSchemaValue
from pydantic_core import core_schema

from teamrun.config import models
from teamrun.config.interpolate import ENV_REFERENCE_SCHEMA
from teamrun.config.models import TeamConfig

SCHEMA_ID = "https://teamrun.dev/schemas/team.schema.json"


def _attribute_docstrings(module: ModuleType) -> dict[str, dict[str, str]]:
    """``{class: {field: docstring}}``: the string literal right after each annotated class attribute."""
    found: dict[str, dict[str, str]] = {}
    for node in ast.parse(inspect.getsource(module)).body:
        if not isinstance(node, ast.ClassDef):
            continue
        docs = found.setdefault(node.name, {})
        for statement, following in itertools.pairwise(node.body):
            if (
                isinstance(statement, ast.AnnAssign)
                and isinstance(statement.target, ast.Name)
                and isinstance(following, ast.Expr)
                and isinstance(following.value, ast.Constant)
                and isinstance(following.value.value, str)
            ):
                docs[statement.target.id] = inspect.cleandoc(following.value.value)
    return found


def attach_field_docstrings(module: ModuleType) -> None:
    """Give each field of the module's models its docstring as ``description``, then rebuild them.

    This is what pydantic's ``use_attribute_docstrings`` does at class creation, done here
    instead: reading the source costs every command's start-up, and only the schema needs it.
    Idempotent; an explicit ``Field(description=...)`` wins.
    """
    docs = _attribute_docstrings(module)
    classes = [
        value
        for value in vars(module).values()
        if isinstance(value, type) and issubclass(value, BaseModel) and value.__module__ == module.__name__
    ]
    changed = False
    for cls in classes:
        for name, info in cls.model_fields.items():
            if info.description is not None:
                continue
            for owner in cls.__mro__:  # the class's own docstring first, then the one it inherits
                text = docs.get(owner.__name__, {}).get(name) if owner.__module__ == module.__name__ else None
                if text is not None:
                    info.description = text
                    changed = True
                    break
    if changed:
        for cls in classes:  # in definition order, so a model is rebuilt before the models that embed it
            cls.model_rebuild(force=True)


attach_field_docstrings(models)


class _TeamSchemaGenerator(GenerateJsonSchema):
    """Pydantic's generator, tuned for a hand-edited YAML file.

    Optional fields are written as "may be absent", not "may be null", and
    pydantic's generated titles are dropped: editors show descriptions.
    """

    def nullable_schema(self, schema: core_schema.NullableSchema) -> JsonSchemaValue:
        return self.generate_inner(schema["schema"])

    def field_title_should_be_set(self, schema: Any) -> bool:
        return False

    def dict_schema(self, schema: core_schema.DictSchema) -> JsonSchemaValue:
        value = super().dict_schema(schema)
        keys = schema.get("keys_schema")
        if keys is not None and keys.get("type") == "str" and "pattern" in keys:
            value["propertyNames"] = {"pattern": keys["pattern"]}
        return value

    def model_schema(self, schema: core_schema.ModelSchema) -> JsonSchemaValue:
        value = super().model_schema(schema)
        value.pop("title", None)
        return value


def _drop_null_defaults(node: Any) -> Any:
    if isinstance(node, dict):
        if node.get("default", 0) is None:
            node = {k: v for k, v in node.items() if k != "default"}
        return {k: _drop_null_defaults(v) for k, v in node.items()}
    if isinstance(node, list):
        return [_drop_null_defaults(v) for v in node]
    return node


_TYPED = ("integer", "number", "boolean")
_KEPT_OUTSIDE = ("description", "default")


def _accept_env_references(node: Any) -> Any:
    """Values teamrun substitutes ``${VAR:-default}`` in before checking them also accept the reference.

    That is every scalar with a type or shape text cannot have as written: numbers,
    true/false, names (``pattern``) and choices (``enum``/``const``), as a property,
    a list item or a map value. Plain text accepts a reference already.
    """
    if isinstance(node, list):
        return [_accept_env_references(v) for v in node]
    if not isinstance(node, dict):
        return node
    out = {k: _accept_env_references(v) for k, v in node.items()}
    if isinstance(out.get("properties"), dict):
        out["properties"] = {name: _with_env_reference(prop) for name, prop in out["properties"].items()}
    for key in ("items", "additionalProperties"):
        if isinstance(out.get(key), dict):
            out[key] = _with_env_reference(out[key])
    return out


def _with_env_reference(prop: Any) -> Any:
    if not isinstance(prop, dict) or "anyOf" in prop or "$ref" in prop:
        return prop
    if prop.get("type") not in _TYPED and not {"pattern", "enum", "const"} & set(prop):
        return prop
    outside = {k: prop[k] for k in _KEPT_OUTSIDE if k in prop}
    typed = {k: v for k, v in prop.items() if k not in _KEPT_OUTSIDE}
    return {**outside, "anyOf": [typed, dict(ENV_REFERENCE_SCHEMA)]}


def build_schema() -> dict[str, Any]:
    """The team-file JSON Schema (draft 2020-12) as a dict."""
    body = TeamConfig.model_json_schema(schema_generator=_TeamSchemaGenerator)
    body = _drop_null_defaults(body)
    body = _accept_env_references(body)
    body.pop("title", None)
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": SCHEMA_ID,
        "title": "teamrun team file",
        **body,
    }


def render_schema() -> str:
    return json.dumps(build_schema(), indent=2, ensure_ascii=False) + "\n"


if __name__ == "__main__":
    print(render_schema(), end="")
