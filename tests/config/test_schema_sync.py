"""The committed JSON Schema, the pydantic models and the examples agree with each other."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from teamrun.config import models
from teamrun.config.loader import check_file
from teamrun.config.models import TeamConfig
from teamrun.config.schema import team_schema
from teamrun.config.schema_gen import SCHEMA_ID, render_schema

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
COMMITTED = REPO / "schemas" / "team.schema.json"
SCHEMA: dict[str, Any] = json.loads(COMMITTED.read_text())
FREE_FORM = {"model_params", "output_schema", "context", "json_schema", "answer_schema", "schema"}
"""Object-valued fields whose content the user chooses (passed through or itself a JSON Schema)."""
VALID = sorted([*(HERE / "valid").glob("*.yaml"), *(REPO / "teams").glob("*.y*ml")])


def _nodes(node: Any, path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], dict[str, Any]]]:
    """Every schema object in the document, with the JSON-pointer-ish path to it."""
    if isinstance(node, dict):
        yield path, node
        for key, value in node.items():
            yield from _nodes(value, (*path, key))
    elif isinstance(node, list):
        for index, value in enumerate(node):
            yield from _nodes(value, (*path, str(index)))


def _model_classes() -> dict[str, type[BaseModel]]:
    found = {name: getattr(models, name) for name in models.__all__}
    return {name: cls for name, cls in found.items() if isinstance(cls, type) and issubclass(cls, BaseModel)}


def test_committed_schema_is_generated_from_the_models() -> None:
    assert COMMITTED.read_text() == render_schema(), (
        "schemas/team.schema.json is stale: run `python -m teamrun.config.schema_gen > schemas/team.schema.json`"
    )


def test_the_validator_reads_the_committed_schema() -> None:
    assert team_schema() == SCHEMA
    assert SCHEMA["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert SCHEMA["$id"] == SCHEMA_ID


def test_the_schema_is_a_valid_draft_2020_12_schema() -> None:
    from jsonschema import Draft202012Validator

    Draft202012Validator.check_schema(SCHEMA)


def test_every_property_has_a_description() -> None:
    missing = [
        "/".join((*path, name))
        for path, node in _nodes(SCHEMA)
        if isinstance(node.get("properties"), dict) and path[-1:] != ("properties",)
        for name, prop in node["properties"].items()
        if not (isinstance(prop, dict) and prop.get("description"))
    ]
    assert missing == []
    assert all(SCHEMA["$defs"][name].get("description") for name in SCHEMA["$defs"])


def test_every_object_is_closed_except_the_free_form_ones() -> None:
    open_objects = []
    for path, node in _nodes(SCHEMA):
        if path[-1:] == ("properties",) or node.get("type") != "object":
            continue
        if "properties" in node:
            if node.get("additionalProperties") is not False:
                open_objects.append("/".join(path))
        elif "propertyNames" in node:
            # a map keyed by names (agents, tools, vars, parameters): names are constrained,
            # and every value is described by patternProperties
            assert set(node.get("patternProperties", {})) == {node["propertyNames"]["pattern"]}, path
            assert "additionalProperties" not in node, path
        else:
            free_form = path[-1] in FREE_FORM or path[-3:-1] == ("parameters", "patternProperties")
            if not free_form:
                open_objects.append("/".join(path))
    assert open_objects == []


def test_each_model_has_the_fields_of_its_schema_object() -> None:
    classes = _model_classes()
    assert set(SCHEMA["$defs"]) | {"TeamConfig"} == set(classes)
    for name, cls in classes.items():
        node = SCHEMA if name == "TeamConfig" else SCHEMA["$defs"][name]
        properties = node["properties"]
        assert {f.alias or n for n, f in cls.model_fields.items()} == set(properties), name
        for field_name, field in cls.model_fields.items():
            key = field.alias or field_name  # the file's key (`schema:` of a workspace entry)
            assert field.description == properties[key]["description"], f"{name}.{field_name}"
        required = {f.alias or n for n, f in cls.model_fields.items() if f.is_required()}
        assert required == set(node.get("required", [])), name


@pytest.mark.parametrize("path", VALID, ids=lambda p: p.stem)
def test_every_valid_example_builds_the_models(path: Path) -> None:
    result = check_file(path, environ={})
    assert result.ok, [d.render() for d in result.diagnostics]
    config = TeamConfig.model_validate(result.data)
    assert config.supervisor in config.agents or (
        config.supervisor is None and (config.workflow is not None or config.peers is not None)
    )
    # and the typed config round-trips through the schema again
    from jsonschema import Draft202012Validator

    dumped = config.model_dump(mode="json", exclude_none=True, by_alias=True)
    assert list(Draft202012Validator(SCHEMA).iter_errors(dumped)) == []


def test_the_valid_corpus_uses_every_key_of_the_language() -> None:
    """Each property of each schema object is set in at least one valid example."""
    used: dict[str, set[str]] = {}

    def resolve(schema: dict[str, Any]) -> tuple[str | None, dict[str, Any]]:
        ref = schema.get("$ref", "")
        name = ref.removeprefix("#/$defs/") if ref else None
        return name, SCHEMA["$defs"][name] if name else schema

    def visit(data: Any, schema: dict[str, Any], name: str | None) -> None:
        ref_name, schema = resolve(schema)
        name = ref_name or name
        if isinstance(data, dict) and "properties" in schema:
            declared = {k: v for k, v in data.items() if k in schema["properties"]}  # not `x-` keys
            used.setdefault(name or "TeamConfig", set()).update(declared)
            for key, value in declared.items():
                visit(value, schema["properties"][key], None)
        elif isinstance(data, dict) and "patternProperties" in schema:
            [values] = schema["patternProperties"].values()
            for value in data.values():
                visit(value, values, None)
        elif isinstance(data, list) and "items" in schema:
            for item in data:
                visit(item, schema["items"], None)

    for path in VALID:
        visit(check_file(path, environ={}).data, SCHEMA, "TeamConfig")
    unused = {
        name: sorted(set(node["properties"]) - used.get(name, set()))
        for name, node in [("TeamConfig", SCHEMA), *SCHEMA["$defs"].items()]
        if set(node["properties"]) - used.get(name, set())
    }
    assert unused == {}
