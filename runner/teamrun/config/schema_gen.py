"""Generate ``schemas/team.schema.json`` from the pydantic models.

Run ``python -m teamrun.config.schema_gen > schemas/team.schema.json`` after
changing :mod:`teamrun.config.models`; ``tests/config/test_schema_sync.py``
fails while the committed file is stale.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic.json_schema import GenerateJsonSchema, JsonSchemaValue
from pydantic_core import core_schema

from teamrun.config.models import TeamConfig

SCHEMA_ID = "https://teamrun.dev/schemas/team.schema.json"


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


def build_schema() -> dict[str, Any]:
    """The team-file JSON Schema (draft 2020-12) as a dict."""
    body = TeamConfig.model_json_schema(schema_generator=_TeamSchemaGenerator)
    body = _drop_null_defaults(body)
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
