"""The ready-made workflow teams run offline, `teamrun graph` draws them, `validate` warns about dead branches,
and the public API (``Team.run``) runs a workflow like a team."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

import teamrun
from tests.cli_run import run_cli

REPO = Path(__file__).resolve().parents[2]
WORKFLOW_TEAMS = [
    "workflow-chain",
    "workflow-route",
    "workflow-map",
    "workflow-loop",
    "workflow-team",
    "research-report-workflow",
]


@pytest.mark.parametrize("name", WORKFLOW_TEAMS)
def test_each_workflow_team_runs_offline_through_every_step(name: str) -> None:
    result = run_cli(
        [
            "execute",
            str(REPO / "teams" / f"{name}.yaml"),
            "-i",
            "Compare Rust and Go",
            "--json",
            "--progress",
            "none",
            "--model",
            "offline",
        ]
    )
    assert result.code == 0, result.err
    data = json.loads(result.out)
    assert data["status"] == "done" and data["warnings"] == []
    assert data["final_text"].startswith("[offline simulation]")
    assert data["delegations"] and all(d["status"] == "ok" for d in data["delegations"])


def test_the_research_report_twin_researches_each_planned_subject_and_hands_the_findings_verbatim() -> None:
    team = teamrun.load_team(REPO / "teams" / "research-report-workflow.yaml", model="offline")
    result = team.run_sync("Compare Rust and Go")
    assert result.status == "done"
    planner, *researchers, writer = result.delegations
    assert (planner.agent, writer.agent) == ("planner", "writer")
    subjects = json.loads(planner.response)["subjects"]
    assert [r.agent for r in researchers] == ["researcher"] * len(subjects)
    for subject, researcher in zip(subjects, researchers, strict=True):
        assert f"## Findings on {subject}\n{researcher.response}" in writer.task


def test_graph_draws_the_steps_of_a_workflow() -> None:
    result = run_cli(["graph", str(REPO / "teams" / "workflow-route.yaml")])
    assert result.code == 0, result.err
    lines = result.out.splitlines()
    assert lines[0] == "flowchart TD"
    assert '  s1["triage<br/><small>classifier</small>"]' in lines
    assert '  r2{"category?"}' in lines
    assert any(line.startswith("  r2 -->|billing| ") for line in lines)
    assert any(line.startswith("  r2 -->|default| ") for line in lines)
    loop = run_cli(["graph", str(REPO / "teams" / "workflow-loop.yaml")]).out
    assert 'subgraph loop1["revise: loop, at most 3 times"]' in loop
    assert '-.->|"until approved"|' in loop


def test_validate_warns_about_a_branch_the_route_field_can_never_take(tmp_path: Path) -> None:
    team = tmp_path / "team.yaml"
    team.write_text(
        "version: 1\nname: t\nworkflow:\n  steps:\n    - agent: sorter\n      route:\n        on: kind\n"
        "        branches:\n          big: []\n          huge: []\n        default: []\n"
        "agents:\n  sorter:\n    output_schema: {type: object, properties: {kind: {enum: [big, small]}}}\n",
        encoding="utf-8",
    )
    message = "workflow.steps[0].route.branches.huge is unreachable: kind is one of big, small"
    result = run_cli(["validate", str(team)])
    assert (result.code, result.out.splitlines()[0]) == (0, f"{team}:10:11: warning: {message}")
    strict = run_cli(["validate", "--strict", str(team)])
    assert (strict.code, strict.out.splitlines()[0]) == (2, f"{team}:10:11: error: {message}")


def test_validate_warns_about_a_branch_a_boolean_route_field_can_never_take(tmp_path: Path) -> None:
    team = tmp_path / "team.yaml"
    team.write_text(
        "version: 1\nname: t\nworkflow:\n  steps:\n    - agent: checker\n      route:\n        on: ok\n"
        '        branches:\n          true: []\n          "false": []\n          "True": []\n        default: []\n'
        "agents:\n  checker:\n    output_schema: {type: object, properties: {ok: {type: boolean}}}\n",
        encoding="utf-8",
    )
    result = run_cli(["validate", str(team)])
    assert result.code == 0
    assert result.out.splitlines()[:-1] == [
        f"{team}:11:11: warning: workflow.steps[0].route.branches.True is unreachable: ok is one of false, true"
    ]


def test_every_map_expression_the_schema_offers_passes_validate(tmp_path: Path) -> None:
    schema = json.loads((REPO / "schemas" / "team.schema.json").read_text(encoding="utf-8"))
    description = schema["$defs"]["WorkflowStep"]["properties"]["map"]["description"]
    offered = re.sub(r"\([^)]*\)", "", description.split("such as", 1)[1].split(";")[0])  # remarks left out
    examples = re.findall(r"`([^`]+)`", offered)
    assert examples  # the description names what a map may go over
    for expression in examples:
        team = tmp_path / "team.yaml"
        team.write_text(
            "version: 1\nname: t\nworkflow:\n  steps:\n    - id: plan\n      agent: planner\n"
            "    - id: research\n      map: steps.plan.output.topics\n      agent: worker\n"
            f"    - map: {json.dumps(expression)}\n      agent: worker\n      id: again\n"
            "agents:\n  planner:\n    output_schema: {type: object, properties: "
            "{topics: {type: array, items: {type: string}}}}\n  worker: {}\n",
            encoding="utf-8",
        )
        result = run_cli(["validate", str(team)])
        assert (result.code, result.out.splitlines()) == (0, ["1 file valid"]), expression


def test_validate_refuses_a_map_over_a_var_the_file_does_not_declare(tmp_path: Path) -> None:
    team = tmp_path / "team.yaml"
    team.write_text(
        "version: 1\nname: t\nworkflow:\n  steps:\n    - map: vars.cities\n      agent: worker\n"
        "agents:\n  worker: {}\n",
        encoding="utf-8",
    )
    result = run_cli(["validate", str(team)])
    assert result.code == 2
    assert (
        f"{team}:5:12: error: workflow.steps[0].map: 'vars.cities' is a var (vars hold single values), not a list"
        in result.out
    )


def test_validate_counts_the_agents_of_a_loop_without_max_iterations_as_used(tmp_path: Path) -> None:
    team = tmp_path / "team.yaml"
    team.write_text(
        "version: 1\nname: t\nworkflow:\n  steps:\n    - loop:\n        until: [{contains: done}]\n"
        '        steps:\n          - agent: writer\n            input: "{{ steps.nowhere.text }}"\n'
        "agents:\n  writer: {}\n",
        encoding="utf-8",
    )
    result = run_cli(["validate", str(team)])
    assert result.code == 2
    assert result.out.splitlines() == [
        f"{team}:5:7: error: workflow.steps[0].loop is missing the required key 'max_iterations'",
        f"{team}:9:24: error: workflow.steps[0].loop.steps[0].input reads steps.nowhere, which is not a step of "
        "this workflow (steps before it: writer)",
        "1 of 1 file invalid: 2 errors",
    ]


def test_validate_says_a_top_level_accept_does_not_check_a_workflow(tmp_path: Path) -> None:
    team = tmp_path / "team.yaml"
    team.write_text(
        "version: 1\nname: t\nworkflow:\n  steps:\n    - agent: a\naccept:\n  - contains: x\nagents:\n  a: {}\n",
        encoding="utf-8",
    )
    result = run_cli(["validate", str(team)])
    assert result.code == 0
    assert result.out.splitlines()[0] == (
        f"{team}:6:1: warning: the top-level accept: checks a supervisor's answer and a workflow has none: check "
        "the steps' agents with their own accept:, or loop over steps with until:"
    )


def test_eval_and_batch_run_a_workflow_like_a_team(tmp_path: Path) -> None:
    team = str(REPO / "teams" / "research-report-workflow.yaml")
    evaluated = run_cli(["eval", team, str(REPO / "examples" / "eval" / "research-cases.yaml")])
    assert evaluated.code == 0, evaluated.err
    assert evaluated.out.strip().splitlines()[-1].startswith("3/3 passed (100%)")
    inputs = tmp_path / "inputs.jsonl"
    inputs.write_text('"Compare Rust and Go"\n{"input": "Compare Zig and Nim", "id": "z"}\n', encoding="utf-8")
    output = tmp_path / "out.jsonl"
    batch = run_cli(["batch", team, str(inputs), "-o", str(output)])
    assert batch.code == 0, batch.err
    rows = [json.loads(line) for line in output.read_text(encoding="utf-8").splitlines()]
    assert [row["status"] for row in rows] == ["done", "done"]
    assert "## Findings on" in rows[1]["final_text"]
