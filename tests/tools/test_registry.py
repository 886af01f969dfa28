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
        build_tools(
            {"x": ToolDef(python="sample_tools:lookup", command=["true"])}, base_dir=sample_dir
        )
    with pytest.raises(UserError, match="set `python: module:function` or `command"):
        build_tools({"x": ToolDef(description="nothing")}, base_dir=sample_dir)


def test_empty_definitions(sample_dir: Path) -> None:
    assert build_tools({}, base_dir=sample_dir) == {}
