"""Python tools: import by path, schema from hints and docstrings, coercion, results, errors."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Annotated, Any

import pytest
from pydantic import Field

from teamrun.config.models import ToolDef
from teamrun.errors import UserError
from teamrun.tools import PythonTool, build_tools, invoke_tool


def build(sample_dir: Path, name: str, **fields: Any) -> PythonTool:
    definition = ToolDef(python=f"sample_tools:{name}", **fields)
    tool = PythonTool.from_definition(name, definition, base_dir=sample_dir)
    return tool


def call(tool: PythonTool, arguments: dict[str, Any] | str, approver: Any) -> Any:
    raw = arguments if isinstance(arguments, str) else json.dumps(arguments)
    return asyncio.run(invoke_tool(tool, raw, approver=approver))


# --- schema derivation -------------------------------------------------------


def test_schema_from_hints_and_google_docstring(sample_dir: Path) -> None:
    spec = build(sample_dir, "lookup").spec
    assert spec.description == "Look up facts about one product."
    assert spec.parameters == {
        "type": "object",
        "properties": {
            "product": {
                "type": "string",
                "description": 'Name of the product, e.g. "Widget 3000".',
            },
            "max_results": {
                "type": "integer",
                "default": 3,
                "description": "How many facts to return at most.",
            },
            "region": {
                "type": "string",
                "enum": ["eu", "us"],
                "default": "eu",
                "description": "Market to search.",
            },
        },
        "required": ["product"],
        "additionalProperties": False,
    }


def test_schema_from_rest_docstring(sample_dir: Path) -> None:
    spec = build(sample_dir, "days_until").spec
    props = spec.parameters["properties"]
    assert props["when"] == {
        "type": "string",
        "format": "date",
        "description": "The target date (ISO format).",
    }
    assert props["today"]["description"] == "Count from this day instead of the real today."
    assert spec.parameters["required"] == ["when"]
    assert spec.description == "Count days until a date."


def test_description_from_tooldef_overrides_docstring(sample_dir: Path) -> None:
    tool = build(sample_dir, "lookup", description="Find product facts.")
    assert tool.spec.description == "Find product facts."
    assert tool.spec.as_openai() == {
        "type": "function",
        "function": {
            "name": "lookup",
            "description": "Find product facts.",
            "parameters": tool.spec.parameters,
        },
    }


def test_dotted_attribute_and_unannotated_function(sample_dir: Path) -> None:
    search = build_tools({"search": ToolDef(python="sample_tools:Catalog.search")}, base_dir=sample_dir)["search"]
    assert search.spec.parameters["properties"] == {"term": {"type": "string", "description": "What to search for."}}
    loose = build(sample_dir, "undocumented").spec
    assert loose.description == ""
    assert loose.parameters["properties"] == {"a": {}, "b": {"default": 2}}
    assert "description" not in loose.as_openai()["function"]


def test_explicit_field_description_wins_and_names_like_json_work() -> None:
    def tool(json: Annotated[str, Field(description="explicit")], schema: int = 1) -> str:
        """Echo.

        Args:
            json: from the docstring
            schema: a number
        """
        return f"{json}:{schema}"

    built = PythonTool("echo", tool)
    props = built.spec.parameters["properties"]
    assert props["json"]["description"] == "explicit"
    assert props["schema"]["description"] == "a number"
    assert asyncio.run(built.run({"json": "a", "schema": 2})) == "a:2"


class Opaque:
    """A type pydantic cannot describe."""


def test_signature_that_cannot_be_a_schema_is_a_user_error() -> None:
    def tool(thing: Opaque) -> str:
        return "x"

    with pytest.raises(UserError, match=r"tool 'opaque'.*cannot be described as JSON Schema"):
        PythonTool("opaque", tool)


def test_unresolvable_annotation_is_a_user_error() -> None:
    def tool(thing: Undefined) -> str:  # type: ignore[name-defined]  # noqa: F821
        return "x"

    with pytest.raises(UserError, match=r"tool 'ghost': cannot read the signature.*'Undefined'"):
        PythonTool("ghost", tool)


# --- calls -------------------------------------------------------------------


def test_sync_tool_fills_defaults(sample_dir: Path, allow: Any) -> None:
    outcome = call(build(sample_dir, "lookup"), {"product": "W", "max_results": 2}, allow)
    assert outcome.ok
    assert outcome.content == "W fact 1 (eu)\nW fact 2 (eu)"
    assert outcome.error is None


def test_arguments_are_coerced_by_pydantic(sample_dir: Path, allow: Any) -> None:
    # "when" arrives as a JSON string and reaches the function as a datetime.date.
    outcome = call(build(sample_dir, "days_until"), {"when": "2025-01-11"}, allow)
    assert outcome.content == "10"
    # An integral float is a JSON Schema integer; pydantic turns it into an int.
    outcome = call(build(sample_dir, "lookup"), {"product": "W", "max_results": 1.0}, allow)
    assert outcome.content == "W fact 1 (eu)"
    # Nested pydantic models are built from JSON objects.
    outcome = call(build(sample_dir, "summarize"), {"points": [{"x": 4, "y": 1}]}, allow)
    assert json.loads(outcome.content) == {
        "label": "shape",
        "count": 1,
        "max_x": 4,
        "when": "2025-05-01",
    }


def test_pydantic_rejection_goes_back_as_text(sample_dir: Path, allow: Any) -> None:
    outcome = call(build(sample_dir, "days_until"), {"when": "not a date"}, allow)
    assert not outcome.ok
    assert outcome.content.startswith("Error: invalid arguments for tool 'days_until':")
    assert "- when:" in outcome.content


def test_async_tool(sample_dir: Path, allow: Any) -> None:
    outcome = call(build(sample_dir, "fetch_page"), {"url": "https://x"}, allow)
    assert outcome.content == "<html>https://x</html>"


def test_dotted_attribute_tool_returns_json(sample_dir: Path, allow: Any) -> None:
    tools = build_tools({"s": ToolDef(python="sample_tools:Catalog.search")}, base_dir=sample_dir)
    outcome = call(tools["s"], {"term": "ab"}, allow)  # type: ignore[arg-type]
    assert outcome.content == '["ab", "AB"]'


def test_exception_in_user_code_becomes_error_text(sample_dir: Path, allow: Any) -> None:
    outcome = call(build(sample_dir, "explode"), {"reason": "no stock"}, allow)
    assert not outcome.ok
    assert outcome.content == "Error: ValueError: cannot do it: no stock"
    assert outcome.error == "ValueError: cannot do it: no stock"


def test_sys_exit_in_user_code_does_not_end_the_run(sample_dir: Path, allow: Any) -> None:
    outcome = call(build(sample_dir, "quits"), {}, allow)
    assert outcome.content == "Error: SystemExit: 3"


def test_sync_timeout(sample_dir: Path, allow: Any) -> None:
    tool = build(sample_dir, "blocks_until_released", timeout_s=0.2)
    sample = sys.modules["sample_tools"]
    sample.RELEASE.clear()
    sample.FINISHED.clear()
    try:
        outcome = call(tool, {}, allow)
        # The call ended while the tool's thread was still blocked: asyncio.run did not wait for it.
        assert not sample.FINISHED.is_set()
    finally:
        sample.RELEASE.set()
    assert not outcome.ok
    assert outcome.content == "Error: tool 'blocks_until_released' timed out after 0.2 seconds"
    assert sample.FINISHED.wait(60)  # the abandoned thread still ends on its own


def test_async_timeout(sample_dir: Path, allow: Any) -> None:
    outcome = call(build(sample_dir, "slow_async", timeout_s=0.1), {"seconds": 5}, allow)
    assert outcome.content == "Error: tool 'slow_async' timed out after 0.1 seconds"


def test_default_limits(sample_dir: Path) -> None:
    tool = build(sample_dir, "lookup")
    assert tool.timeout_s == 60
    assert tool.max_output_chars == 20000
    assert tool.require_approval is False


def test_long_output_is_truncated_with_marker(sample_dir: Path, allow: Any) -> None:
    outcome = call(build(sample_dir, "big_output", max_output_chars=100), {"size": 12345}, allow)
    assert outcome.ok
    assert outcome.content == "x" * 100 + "\n[... truncated 12245 characters ...]"


# --- import errors -----------------------------------------------------------


def test_missing_module_is_a_user_error(sample_dir: Path) -> None:
    definition = ToolDef(python="no_such_module_here:lookup")
    with pytest.raises(UserError) as info:
        PythonTool.from_definition("finder", definition, base_dir=sample_dir)
    message = str(info.value)
    assert "tool 'finder'" in message
    assert "no_such_module_here:lookup" in message
    assert "cannot import module 'no_such_module_here'" in message


def test_missing_attribute_is_a_user_error(sample_dir: Path) -> None:
    with pytest.raises(UserError, match=r"tool 'x': 'sample_tools' has no attribute 'nope'"):
        build_tools({"x": ToolDef(python="sample_tools:nope")}, base_dir=sample_dir)
    with pytest.raises(UserError, match=r"'sample_tools.Catalog' has no attribute 'find'"):
        build_tools({"x": ToolDef(python="sample_tools:Catalog.find")}, base_dir=sample_dir)


def test_not_callable_is_a_user_error(sample_dir: Path) -> None:
    with pytest.raises(UserError, match=r"'sample_tools:NOT_CALLABLE' is not callable \(it is a int\)"):
        build_tools({"x": ToolDef(python="sample_tools:NOT_CALLABLE")}, base_dir=sample_dir)


def test_module_failing_to_import_is_a_user_error(tmp_path: Path) -> None:
    (tmp_path / "broken_tools_mod.py").write_text("import not_installed_dep_xyz\n")
    (tmp_path / "syntax_tools_mod.py").write_text("def f(:\n")
    with pytest.raises(UserError, match=r"importing module 'broken_tools_mod'.*ModuleNotFoundError"):
        build_tools({"a": ToolDef(python="broken_tools_mod:f")}, base_dir=tmp_path)
    with pytest.raises(UserError, match=r"importing module 'syntax_tools_mod'.*SyntaxError"):
        build_tools({"b": ToolDef(python="syntax_tools_mod:f")}, base_dir=tmp_path)


def test_module_next_to_team_file_is_importable(tmp_path: Path, allow: Any) -> None:
    (tmp_path / "team_local_tools.py").write_text(
        "def shout(text: str) -> str:\n    '''Shout.'''\n    return text.upper()\n"
    )
    tools = build_tools({"shout": ToolDef(python="team_local_tools:shout")}, base_dir=tmp_path)
    assert call(tools["shout"], {"text": "hi"}, allow).content == "HI"  # type: ignore[arg-type]


def test_command_only_fields_are_rejected(sample_dir: Path) -> None:
    definition = ToolDef(python="sample_tools:lookup", parameters={"q": {"type": "string"}})
    with pytest.raises(UserError, match="`parameters` applies to command tools only"):
        PythonTool.from_definition("lookup", definition, base_dir=sample_dir)
