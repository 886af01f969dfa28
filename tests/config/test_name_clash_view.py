"""`validate` finds function-name clashes from the file's mappings, without building the pydantic models
(issue 27.3: the models and pydantic's plugin scan were most of validate's own start-up). The names it
reads must be the ones the engine offers: both routes give the same clashes on every team file here."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from teamrun.config.checks.raw import mapping as _mapping
from teamrun.config.checks.tools import team_as_read as _team_as_read
from teamrun.config.loader import check_file
from teamrun.config.models import TeamConfig
from teamrun.config.tool_names import team_clashes
from tests.cli_run import CliResult

REPO = Path(__file__).resolve().parents[2]
FILES = sorted(
    str(p)
    for folder in ("teams", "tests/config/valid", "tests/config/invalid", "examples")
    for p in (REPO / folder).rglob("*.yaml")
)


def _both(data: dict[str, Any]) -> tuple[Any, Any]:
    agents = {k: _mapping(v) for k, v in _mapping(data.get("agents")).items()}
    tools = {k: _mapping(v) for k, v in _mapping(data.get("tools")).items()}
    return team_clashes(TeamConfig.model_validate(data)), team_clashes(_team_as_read(agents, tools))


@pytest.mark.parametrize("path", FILES, ids=lambda p: str(Path(p).relative_to(REPO)))
def test_files_give_the_same_clashes_by_both_routes(path: str) -> None:
    data = check_file(path).data
    try:
        TeamConfig.model_validate(data)
    except ValidationError:
        return  # not a well-formed team: the schema reports why
    from_models, from_file = _both(data)
    assert from_file == from_models


DELEGATIONS = [
    None,
    {"tool": "delegate_task"},
    {"background": True},
    {"background": ["w"]},
    {"tool": "delegate_task", "background": ["v"]},
]
TOOL_LISTS = [
    None,
    ["ask_w"],
    ["delegate_task", "wait_for"],
    ["git", "git"],
    ["transfer_to_v", "git"],
    ["git", "ask_v"],
]
GIT = [
    {"mcp": {"command": ["git-mcp"]}},
    {"mcp": {"command": ["g"]}, "allow": ["status", "ask_w"]},
    {"mcp": {"command": ["g"]}, "allow": ["wait_for", "x"], "prefix": ""},
    {"mcp": {"command": ["g"]}, "allow": ["a", "b"], "deny": ["a"], "prefix": "ask_"},
]


@pytest.mark.parametrize(("delegation", "tools", "git"), list(itertools.product(DELEGATIONS, TOOL_LISTS, GIT)))
def test_every_kind_of_clash_is_the_same_by_both_routes(delegation: Any, tools: Any, git: Any) -> None:
    lead: dict[str, Any] = {"delegates_to": ["w", "v"], "handoffs": ["v"]}
    if delegation is not None:
        lead["delegation"] = delegation
    if tools is not None:
        lead["tools"] = tools
    data = {
        "version": 1,
        "name": "t",
        "supervisor": "lead",
        "agents": {"lead": lead, "w": {}, "v": {}},
        "tools": {
            "ask_w": {"command": ["x"]},
            "delegate_task": {"command": ["x"]},
            "wait_for": {"command": ["x"]},
            "transfer_to_v": {"command": ["x"]},
            "ask_v": {"command": ["x"]},
            "git": git,
        },
    }

    from_models, from_file = _both(data)

    assert from_file == from_models


def test_validate_reports_a_background_tool_clash(cli: Any, tmp_path: Path) -> None:
    team = tmp_path / "team.yaml"
    team.write_text(
        "version: 1\nname: t\nsupervisor: lead\nagents:\n"
        "  lead: {delegates_to: [w], delegation: {background: true}, tools: [wait_for]}\n"
        "  w: {}\ntools:\n  wait_for: {command: [sleep, '1']}\n",
        encoding="utf-8",
    )

    result: CliResult = cli(["validate", str(team)])

    assert result.code == 2
    assert (
        f"{team}:5:69: error: agents.lead: the tool 'wait_for' and the background-task tool 'wait_for' would "
        "both be offered to the model as 'wait_for'"
    ) in result.out
