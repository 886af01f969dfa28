"""`teamrun validate`, `teamrun graph` and the offline model on peer teams and boards."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

import teamrun
from teamrun.cli import main
from teamrun.cli.app import cli
from teamrun.config.loader import check_file

REPO = Path(__file__).resolve().parents[2]
READY_MADE = REPO / "teams" / "peer-board.yaml"

BROKEN = """\
version: 1
name: bad-peers
supervisor: ada
peers: [ada, bob, ada]
agents:
  ada: {description: a}
  bo: {description: b}
workspace:
  entries:
    tasks:
      kind: board
      merge: append
      schema: {type: string}
      write: [ada, cyd]
      initial: [ok, 3]
    other:
      kind: board
    notes:
      schema: {type: string}
      initial: x
      max_claims: 3
"""


def _found(path: Path) -> dict[tuple[int, int], tuple[str, str]]:
    result = check_file(path, environ={})
    return {(d.line, d.column): (d.severity, d.message) for d in result.diagnostics if d.rule != "unused"}


def test_validate_locates_every_problem_of_a_peer_team_and_its_boards(tmp_path: Path) -> None:
    path = tmp_path / "team.yaml"
    path.write_text(BROKEN, encoding="utf-8")
    found = _found(path)

    def said(line: int, column: int) -> str:
        severity, message = found.pop((line, column))
        return f"{severity}: {message}"

    assert said(3, 1).startswith("error: a team has peers or a supervisor, not both")
    assert said(4, 1).startswith("error: a peer team needs a termination bound: set limits.max_tasks")
    assert said(4, 14) == "error: peer 'bob' is not an agent; did you mean 'bo'? (defined agents: ada, bo)"
    assert said(4, 19) == "error: peer 'ada' is listed twice"
    assert said(12, 7).startswith("error: workspace.entries.tasks is a board: its tasks change through the board")
    assert said(14, 20).startswith("error: agent 'cyd' in workspace.entries.tasks.write is not defined")
    assert said(15, 21) == (
        "error: workspace.entries.tasks.initial[1] (3) does not satisfy the board's task schema: "
        "3 is not of type 'string'"
    )
    assert said(17, 13).startswith("error: a peer team works around one board, and 'tasks' is already one")
    assert said(21, 19).startswith("warning: workspace.entries.notes.max_claims applies to boards only")
    assert found == {}


def test_a_peer_team_without_a_board_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "team.yaml"
    path.write_text(
        "version: 1\nname: p\npeers: [a]\nlimits: {max_tasks: 3}\nagents:\n  a: {description: x}\n", encoding="utf-8"
    )
    assert _found(path) == {
        (3, 1): (
            "error",
            "a peer team needs a board: add a workspace entry with `kind: board` (its tasks are what the peers "
            "claim, post and complete)",
        )
    }


def test_the_schema_knows_boards_and_peers(tmp_path: Path) -> None:
    path = tmp_path / "team.yaml"
    path.write_text(
        "version: 1\nname: p\npeers: a\nlimits: {max_tasks: 0}\nagents:\n  a: {}\n"
        "workspace:\n  entries:\n    t: {kind: list, lease_s: -1}\n",
        encoding="utf-8",
    )
    found = {(d.line, d.column, d.message) for d in check_file(path, environ={}).diagnostics}
    assert (3, 8, 'peers must be a list, not the string "a" (write [a] for a list of one)') in found
    assert (4, 21, "limits.max_tasks must be >= 1, not 0") in found
    assert (9, 15, 'workspace.entries.t.kind must be one of "value", "board", not "list"') in found
    assert (9, 30, "workspace.entries.t.lease_s must be > 0, not -1") in found


def test_graph_draws_the_peers_around_their_board() -> None:
    out = CliRunner().invoke(cli, ["graph", str(READY_MADE)]).output
    assert 'a_ada(["ada<br/><small>peer</small>"])' in out
    assert 'b_tasks{{"tasks<br/><small>board: lease 120 s, 3 claims; max_tasks 30</small>"}}' in out
    assert all(f"a_{p} <-->|claims / posts| b_tasks" in out for p in ("ada", "bo", "cy"))


def test_the_ready_made_peer_team_runs_offline_and_ends_by_itself() -> None:
    result = teamrun.load_team(READY_MADE, model="offline").run_sync("Check the install guide")

    assert result.status == "done" and result.stopped_by is None
    assert result.workspace is not None
    tasks = result.workspace["entries"]["tasks"]["value"]
    # two initial tasks and the input, each with one follow-up; every one done once
    assert [t["posted_by"] for t in tasks[:3]] == ["initial", "initial", "input"]
    assert len(tasks) == 6 and all(t["status"] == "done" and t["claims"] == 1 for t in tasks)
    assert sorted(t["payload"] for t in tasks[3:]) == sorted(
        f"follow-up of {t['id']}: {t['payload']}" for t in tasks[:3]
    )
    assert result.final_text.startswith("[offline simulation] t3 done: Check the install guide")
    assert {d.agent for d in result.delegations} == {"ada", "bo", "cy"}


def test_an_offline_run_is_journaled_and_every_board_operation_is_an_event(tmp_path: Path) -> None:
    trace = tmp_path / "run.jsonl"
    out = CliRunner().invoke(
        cli,
        ["execute", str(READY_MADE), "-i", "Check it", "--json", "--progress", "none", "--trace", str(trace)],
    )
    assert out.exit_code == 0, out.output
    ops = [json.loads(line) for line in trace.read_text(encoding="utf-8").splitlines()]
    ops = [r["data"] for r in ops if r["kind"] == "board_op"]
    applied = [(o["op"], o["task_id"]) for o in ops if o["status"] == "applied"]
    assert [op for op, _ in applied].count("post") == 6  # 3 starting tasks + 3 follow-ups
    assert sorted(t for op, t in applied if op == "complete") == [f"t{i}" for i in range(1, 7)]
    versions = [o["version_after"] for o in ops if o["status"] == "applied"]
    assert versions == sorted(versions) and len(set(versions)) == len(versions)


def test_board_hooks_hold_in_a_run(tmp_path: Path) -> None:
    """bo's claims are refused by an `on_claim` hook (it answers); ada does every task."""
    text_ = READY_MADE.read_text(encoding="utf-8").replace(
        "      lease_s: 120",
        "      hooks:\n        on_claim:\n          - when: \"agent == 'bo'\"\n"
        '            reject: "{{ agent }} may not take {{ task.id }}"\n      lease_s: 120',
    )
    team = tmp_path / "team.yaml"
    team.write_text(text_.replace("peers: [ada, bo, cy]", "peers: [ada, bo]"), encoding="utf-8")
    trace = tmp_path / "run.jsonl"
    out = CliRunner().invoke(
        cli, ["execute", str(team), "-i", "Check it", "--json", "--progress", "none", "--trace", str(trace)]
    )
    assert out.exit_code == 0, out.output
    result = json.loads(out.output)
    tasks = result["workspace"]["entries"]["tasks"]["value"]
    assert len(tasks) == 6 and {t["completed_by"] for t in tasks} == {"ada"}
    ops = [json.loads(line) for line in trace.read_text(encoding="utf-8").splitlines()]
    refused = [r["data"] for r in ops if r["kind"] == "board_op" and r["agent_path"][-1] == "bo"]
    assert [(o["op"], o["reason"]) for o in refused] == [("claim", "hook")]
    assert refused[0]["message"].startswith("bo may not take t")


ASKING_PEERS = """\
version: 1
name: peer-ask
peers: [ada, bo]
limits: {max_tasks: 5}
tools:
  ask_lead: {person: {}}
workspace:
  entries:
    tasks:
      kind: board
      schema: {type: string}
      initial: [Pick a name for the release.]
agents:
  ada: {tools: [ask_lead]}
  bo: {}
"""


def test_a_peer_that_asks_a_person_suspends_the_run_and_the_answer_continues_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A peer's person tool suspends the whole peer run (exit 4); `teamrun answer` continues it to its end."""
    team = tmp_path / "team.yaml"
    team.write_text(ASKING_PEERS, encoding="utf-8")
    store = str(tmp_path / "runs.db")
    args = ["execute", str(team), "-i", "Ship it", "--store", store, "--detach", "--json", "--progress", "none"]
    assert main(args) == 4
    run_id = json.loads(capsys.readouterr().out)["run_id"]
    assert main(["runs", "show", run_id, "--store", store, "--json"]) == 0
    (item,) = json.loads(capsys.readouterr().out)["pending"]
    assert item["agent"] == "ada" and item["status"] == "pending"

    assert main(["answer", run_id, item["item"], "Falcon", "--store", store, "--json", "--progress", "none"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["status"] == "done" and result["stopped_by"] is None
    tasks = result["workspace"]["entries"]["tasks"]["value"]
    assert tasks and all(t["status"] == "done" and t["claims"] == 1 for t in tasks), tasks
    (ada,) = [d for d in result["delegations"] if d["agent"] == "ada"]
    assert "ask_lead: Falcon" in ada["response"]  # the answer reached the peer that asked
