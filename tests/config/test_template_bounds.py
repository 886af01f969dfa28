"""Templates in a team file run in one immutable sandbox whose rendering cost is bounded.

A template is a small program anyone can write into a team file: nested
``range()`` loops, ``'x' * 10**9`` or ``10 ** 10 ** 7`` must stop with an error
that says where the template is, not eat gigabytes before failing.
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from teamrun import load_team
from teamrun.config.models import ToolDef
from teamrun.errors import UserError
from teamrun.tools import CommandTool, build_tools, invoke_tool

PY = sys.executable
ECHO_ARGV = "import json, sys; print(json.dumps(sys.argv[1:]))"
NESTED_RANGE = "{% for i in range(9999) %}{% for j in range(9999) %}{{ i }}{% endfor %}{% endfor %}"


def _team(tmp_path: Path, instructions: str) -> Path:
    team = tmp_path / "team.yaml"
    team.write_text(
        "version: 1\nname: bomb\nsupervisor: lead\nagents:\n  lead:\n"
        f"    model: offline\n    instructions: {json.dumps(instructions)}\n"
    )
    return team


@pytest.mark.parametrize(
    "instructions",
    [
        NESTED_RANGE,
        "{{ 'x' * 1000000000 }}",
        "{{ ['x'] * 1000000000 }}",
        "{{ 10 ** 10000000 }}",
        "{% for i in range(9000) %}{{ 'y' * 1000 }}{% endfor %}",  # each part small, the whole too long
    ],
    ids=["nested-range", "string-repeat", "list-repeat", "power", "long-output"],
)
def test_a_render_bomb_is_a_user_error_naming_the_template(tmp_path: Path, instructions: str) -> None:
    team = load_team(_team(tmp_path, instructions))
    with pytest.raises(UserError, match=r"cannot render agents\.lead\.instructions: .*(range|'\*'|'\*\*'|longer)"):
        team.run_sync("go")


def test_bounded_templates_still_render(tmp_path: Path) -> None:
    loops = "{% for i in range(3) %}{% for j in range(2) %}{{ i }}{{ j }} {% endfor %}{% endfor %}{{ 2 ** 10 }}"
    result = load_team(_team(tmp_path, loops)).run_sync("go")
    assert result.status == "done"


def test_validate_reports_a_range_too_big_for_templates(tmp_path: Path, cli: Callable[..., Any]) -> None:
    team = _team(tmp_path, "{% for i in range(99999) %}{% for j in range(99999) %}x{% endfor %}{% endfor %}")
    result = cli(["validate", str(team)])
    assert result.code == 2
    assert result.out.splitlines()[0] == (
        f"{team}:7:32: error: template error in agents.lead.instructions: range() of 99999 items is more than "
        "a template may use (10000)"
    )


# -- argv templates of command tools use the same immutable sandbox ---------------------------------------


class _Allow:
    async def approve(self, tool: str, arguments: dict[str, Any]) -> bool:
        return True


def _command_tool(command: list[str], **fields: Any) -> CommandTool:
    tool = build_tools({"cmd": ToolDef(command=command, **fields)}, base_dir=Path.cwd())["cmd"]
    assert isinstance(tool, CommandTool)
    return tool


def test_argv_templates_cannot_change_values() -> None:
    tool = _command_tool(
        [PY, "-c", ECHO_ARGV, "{{ words.append('injected') }}", "{{ words | join(',') }}"],
        parameters={"words": {"type": "array", "items": {"type": "string"}}},
    )
    outcome = asyncio.run(invoke_tool(tool, json.dumps({"words": ["a"]}), approver=_Allow()))
    assert not outcome.ok
    assert "rendering the command failed" in outcome.content
    assert "append" in outcome.content


def test_argv_templates_are_bounded() -> None:
    tool = _command_tool([PY, "-c", ECHO_ARGV, "{{ text * 1000000000 }}"], parameters={"text": {"type": "string"}})
    outcome = asyncio.run(invoke_tool(tool, json.dumps({"text": "ab"}), approver=_Allow()))
    assert not outcome.ok
    assert "'*' would build" in outcome.content
