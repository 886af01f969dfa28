"""`teamrun validate` and `teamrun graph` on a workspace."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from teamrun.cli.app import cli
from teamrun.config.loader import check_file

VALID = Path(__file__).resolve().parents[1] / "config" / "valid" / "workspace.yaml"


def test_an_entry_nobody_writes_without_an_initial_value_is_warned_about(tmp_path: Path) -> None:
    path = tmp_path / "team.yaml"
    path.write_text(
        "version: 1\nname: ws\nsupervisor: lead\nworkspace:\n  entries:\n    plan: {schema: {type: string}}\n"
        "agents:\n  lead: {}\n",
        encoding="utf-8",
    )
    result = check_file(path, environ={})
    (warning,) = [d for d in result.diagnostics if d.rule == "workspace"]
    assert warning.severity == "warning" and (warning.line, warning.column) == (6, 5)
    assert "nobody writes workspace.entries.plan" in warning.message


def test_graph_draws_who_writes_and_who_only_reads_each_entry() -> None:
    out = CliRunner().invoke(cli, ["graph", str(VALID)]).output
    assert 'w_plan[("plan<br/><small>replace</small>")]' in out
    assert "a_lead -->|writes| w_plan" in out
    assert "w_plan -.->|reads| a_researcher" in out and "w_plan -.->|reads| a_lead" not in out
    assert "a_researcher -->|writes| w_findings" in out and "every agent reads" in out


def test_instructions_naming_an_unknown_entry_or_one_the_agent_may_not_write_are_warned_about(
    tmp_path: Path,
) -> None:
    path = tmp_path / "team.yaml"
    path.write_text(
        "version: 1\nname: ws\nsupervisor: lead\n"
        "workspace:\n  entries:\n    plan: {schema: {type: string}, write: [lead]}\n"
        "agents:\n  lead: {delegates_to: [w]}\n"
        "  w: {description: d, instructions: 'Use workspace_write_plan, then workspace_write_plans.'}\n",
        encoding="utf-8",
    )
    messages = [d.message for d in check_file(path, environ={}).diagnostics if d.rule == "workspace"]
    assert messages == [
        "agents.w.instructions name workspace_write_plan, but w may not write workspace.entries.plan "
        "(writers: lead); add it to `write:`",
        "agents.w.instructions name workspace_write_plans, but the workspace has no entry 'plans'; "
        "did you mean 'plan'? (entries: plan)",
    ]


def _validate(tmp_path: Path, workspace: str) -> list[tuple[int, str]]:
    path = tmp_path / "team.yaml"
    path.write_text(
        f"version: 1\nname: ws\nsupervisor: lead\nworkspace:\n{workspace}agents:\n  lead: {{}}\n", encoding="utf-8"
    )
    return [(d.line, d.message) for d in check_file(path, environ={}).diagnostics if d.severity == "error"]


def test_an_initial_value_past_the_default_entry_cap_or_the_workspace_cap_is_an_error(tmp_path: Path) -> None:
    big = "x" * 70_000  # past the default 64000 of an entry that sets no max_bytes
    (error,) = _validate(tmp_path, f"  entries:\n    notes:\n      write: [lead]\n      initial: {big}\n")
    assert error[0] == 8 and "70002 bytes, past the default max_bytes of an entry (64000)" in error[1]
    both = "x" * 40_000
    errors = _validate(
        tmp_path,
        "  max_bytes: 50000\n  entries:\n"
        f"    a: {{write: [lead], initial: {both}}}\n    b: {{write: [lead], initial: {both}}}\n",
    )
    assert [line for line, _ in errors] == [5]
    together = "initial values are 80004 bytes together (a 40002, b 40002), past workspace.max_bytes (50000)"
    assert together in errors[0][1]
