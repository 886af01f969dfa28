"""build_tools: one entry point from the team file's `tools:` section."""

from __future__ import annotations

from pathlib import Path

import pytest

from teamrun.config.models import ToolDef
from teamrun.errors import UserError
from teamrun.tools import CommandTool, PythonTool, build_tools


def test_builds_each_kind(sample_dir: Path) -> None:
    tools = build_tools(
        {
            "lookup": ToolDef(python="sample_tools:lookup", require_approval=True, timeout_s=5),
            "grep": ToolDef(
                command=["grep", "-rn", "{{ pattern }}", "{{ path }}"],
                parameters={
                    "pattern": {"type": "string"},
                    "path": {"type": "string", "default": "."},
                },
                max_output_chars=500,
            ),
        },
        base_dir=sample_dir,
    )
    assert isinstance(tools["lookup"], PythonTool)
    assert isinstance(tools["grep"], CommandTool)
    assert tools["lookup"].require_approval and tools["lookup"].timeout_s == 5
    assert tools["grep"].max_output_chars == 500 and tools["grep"].timeout_s == 60
    assert [t.spec.name for t in tools.values()] == ["lookup", "grep"]
    assert tools["grep"].spec.description == "Runs `grep -rn {{ pattern }} {{ path }}`."


def test_every_broken_tool_is_reported_at_once(sample_dir: Path) -> None:
    with pytest.raises(UserError) as info:
        build_tools(
            {
                "a": ToolDef(python="sample_tools:nope"),
                "b": ToolDef(command=["echo", "{{ x }}"]),
                "c": ToolDef(python="sample_tools:lookup"),
            },
            base_dir=sample_dir,
        )
    message = str(info.value)
    assert message.startswith("2 tools could not be built:")
    assert "tool 'a'" in message and "tool 'b'" in message and "tool 'c'" not in message


def test_kind_must_be_exactly_one(sample_dir: Path) -> None:
    with pytest.raises(UserError, match="either `python` or `command`, not both"):
        build_tools({"x": ToolDef(python="sample_tools:lookup", command=["true"])}, base_dir=sample_dir)
    with pytest.raises(UserError, match="set `python: module:function` or `command"):
        build_tools({"x": ToolDef(description="nothing")}, base_dir=sample_dir)


def test_empty_definitions(sample_dir: Path) -> None:
    assert build_tools({}, base_dir=sample_dir) == {}


def test_a_module_shadowed_by_an_earlier_import_is_named(tmp_path: Path) -> None:
    """`json.py` beside the team file loses to the stdlib's `json`: say so instead of 'no attribute'."""
    (tmp_path / "json.py").write_text("def lookup(q: str) -> str:\n    return q\n")
    with pytest.raises(UserError) as caught:
        build_tools({"lookup": ToolDef(python="json:lookup")}, base_dir=tmp_path)
    message = str(caught.value)
    assert "a different module named 'json'" in message and str(tmp_path / "json.py") in message


def test_two_teams_with_same_named_modules_each_get_their_own(tmp_path: Path) -> None:
    import asyncio

    for name in ("one", "two"):
        folder = tmp_path / name
        folder.mkdir()
        (folder / "local_helpers.py").write_text(f"def who() -> str:\n    return '{name}'\n")
    first = build_tools({"who": ToolDef(python="local_helpers:who")}, base_dir=tmp_path / "one")
    second = build_tools({"who": ToolDef(python="local_helpers:who")}, base_dir=tmp_path / "two")

    assert asyncio.run(first["who"].run({})) == "one"
    assert asyncio.run(second["who"].run({})) == "two"
