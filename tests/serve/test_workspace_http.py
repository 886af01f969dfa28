"""``GET /v1/runs/{id}/workspace`` of a real ``teamrun serve`` process (``--model offline``): entries and writes,
``?since=``, 404s, masked values, values in the events only with ``--trace-content``, and ``--workers 2``."""

from __future__ import annotations

import contextlib
import http.client
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.cli_processes import Serving
from tests.serve.test_approvals import STAMP
from tests.serve.test_workers import call, connection_to, events_until, served
from tests.serve.test_workers import connection as connect_to
from tests.waiting import wait_until

SECRET = "ws-very-secret-value-0042"


def workspace_team(directory: Path, *, approval: bool = False) -> Path:
    """A lead that appends to a list (which starts with a secret), adds to a counter and replaces a plan;
    with ``approval``, it also calls a tool that waits for a person's approval (over HTTP)."""
    tools = ""
    if approval:
        tools = f"""
    tools: [stamp]
tools:
  stamp:
    description: Write a stamp file.
    command: [{json.dumps(sys.executable)}, "-c", {json.dumps(STAMP)}, "{{{{ path }}}}"]
    parameters:
      path: {{type: string}}
    require_approval: true"""
    path = directory / "ws.yaml"
    path.write_text(
        f"""\
version: 1
name: ws-served
supervisor: lead
workspace:
  entries:
    notes:
      schema: {{type: array, items: {{type: string}}}}
      merge: append
      initial: ["${{WS_API_KEY}}"]
      write: [lead]
    count:
      schema: {{type: integer}}
      merge: sum
      write: [lead]
    plan:
      schema: {{type: string}}
      write: [lead]
agents:
  lead:
    description: Keeps notes.{tools}
""",
        encoding="utf-8",
    )
    return path


def plain_team(directory: Path) -> Path:
    path = directory / "plain.yaml"
    path.write_text(
        "version: 1\nname: plain\nsupervisor: lead\nagents:\n  lead: {description: Answers.}\n", encoding="utf-8"
    )
    return path


@pytest.fixture
def secret_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """The served processes' environment holds the secret the team file interpolates."""
    monkeypatch.setenv("WS_API_KEY", SECRET)


def served_teams(tmp_path: Path, *more: str, approval: bool = False) -> contextlib.AbstractContextManager[Serving]:
    """``teamrun serve`` on the workspace team and a plain one (the shared helper: ready, killed on the way out)."""
    return served(workspace_team(tmp_path, approval=approval), str(plain_team(tmp_path)), *more)


@pytest.fixture
def two_workers(tmp_path: Path, secret_env: None) -> Iterator[Serving]:
    with served_teams(tmp_path, "--workers", "2") as server:
        yield server


def finished(connection: http.client.HTTPConnection, run_id: str) -> dict[str, Any]:
    def ended() -> dict[str, Any] | None:
        status, _, record = call(connection, "GET", f"/v1/runs/{run_id}")
        assert status == 200, record
        return record if record["status"] != "running" else None

    return wait_until(ended, f"run {run_id} finished")


def test_the_workspace_of_a_run_is_answered_by_either_worker_masked(two_workers: Serving) -> None:
    owner, other = connection_to(two_workers, "0"), connection_to(two_workers, "1")
    status, _, created = call(owner, "POST", "/v1/runs", {"team": "ws-served", "input": "take notes"})
    assert status == 201, created
    run_id = created["id"]
    assert run_id.startswith("run_w0_")
    record = finished(owner, run_id)
    assert record["status"] == "done", record

    answers = []
    for connection in (owner, other):
        status, headers, answer = call(connection, "GET", f"/v1/runs/{run_id}/workspace")
        assert status == 200, answer
        assert headers["x-teamrun-worker"] == "0"  # the owner answers; the other worker forwards
        answers.append((headers, answer))
    assert answers[1][0]["x-teamrun-via"] == "1" and "x-teamrun-via" not in answers[0][0]
    answer = answers[0][1]
    assert answer == answers[1][1]
    assert answer["object"] == "teamrun.workspace" and answer["run_id"] == run_id and answer["status"] == "done"
    notes, count, plan = (answer["entries"][name] for name in ("notes", "count", "plan"))
    assert notes["value"][0] == "***" and len(notes["value"]) == 2  # the secret initial item, masked
    assert notes["writer"] == "lead" and notes["written_by"] == ["lead"] and notes["merge"] == "append"
    assert count == {
        "value": 1,
        "version": count["version"],
        "writer": "lead",
        "written_by": ["lead"],
        "merge": "sum",
        "kind": "value",
    }
    assert plan["writer"] == "lead" and isinstance(plan["value"], str)
    assert answer["version"] == max(e["version"] for e in answer["entries"].values()) == 3
    writes = answer["writes"]
    assert [w["seq"] for w in writes] == list(range(1, len(writes) + 1))
    applied = [w for w in writes if w["status"] == "applied"]
    assert sorted(w["entry"] for w in applied) == ["count", "notes", "plan"]
    assert sorted(w["version_after"] for w in applied) == [1, 2, 3]
    assert all(w["writer"] == "lead" and w["agent_path"] == ["lead"] for w in writes)
    for write in applied:  # the workspace's version when each arrived: the one before its own
        assert write["workspace_version"] == write["version_after"] - 1
    # the server runs without --trace-content: the writes carry no values (the entries do, masked)
    assert all("value" not in w for w in writes)
    assert SECRET not in json.dumps(answers)

    status, _, later = call(other, "GET", f"/v1/runs/{run_id}/workspace?since=2")
    assert status == 200
    assert [w["version_after"] for w in later["writes"] if w["status"] == "applied"] == [3]
    assert later["since"] == 2 and later["entries"] == answer["entries"]
    status, _, none_later = call(owner, "GET", f"/v1/runs/{run_id}/workspace?since=3")
    assert none_later["writes"] == []

    # events (either worker) carry each write, without its value
    for connection in (owner, other):
        _, events = events_until(connection, f"/v1/runs/{run_id}/events", "result")
        ws_events = [data for name, data in events if name == "workspace_write"]
        assert len(ws_events) == len(writes)
        assert all("value_after" not in e["data"] for e in ws_events)


def test_404s_say_which_and_why(two_workers: Serving) -> None:
    owner, other = connection_to(two_workers, "0"), connection_to(two_workers, "1")
    status, _, created = call(owner, "POST", "/v1/runs", {"team": "plain", "input": "hi"})
    assert status == 201
    finished(owner, created["id"])

    for connection in (owner, other):
        status, _, answer = call(connection, "GET", f"/v1/runs/{created['id']}/workspace")
        assert status == 404, answer
        assert answer["error"]["code"] == "no_workspace"
        assert "team 'plain' declares no `workspace:`" in answer["error"]["message"]
        for missing in ("run_nope", "run_w0_0123456789abcdef", "run_w1_0123456789abcdef"):
            status, _, answer = call(connection, "GET", f"/v1/runs/{missing}/workspace")
            assert status == 404 and answer["error"]["code"] == "run_not_found", answer
            assert missing in answer["error"]["message"]
    status, _, answer = call(owner, "GET", f"/v1/runs/{created['id']}/workspace?since=-1")
    assert status == 422 and answer["error"]["code"] == "invalid_request"


def test_a_run_in_progress_answers_its_live_workspace(tmp_path: Path, secret_env: None) -> None:
    with served_teams(tmp_path, "--workers", "2", approval=True) as server:
        owner, other = connection_to(server, "1"), connection_to(server, "0")
        status, _, created = call(owner, "POST", "/v1/runs", {"team": "ws-served", "input": "stamp and note"})
        assert status == 201, created
        run_id = created["id"]

        def asked() -> list[Any]:
            approvals: list[Any] = call(other, "GET", f"/v1/runs/{run_id}")[2]["approvals"]
            return approvals

        approvals = wait_until(asked, "the run waiting for the tool's approval: in progress")
        status, headers, live = call(other, "GET", f"/v1/runs/{run_id}/workspace")
        assert status == 200 and headers["x-teamrun-worker"] == "1", live
        assert live["status"] == "running" and live["source"] == "server"
        assert set(live["entries"]) == {"notes", "count", "plan"}
        assert live["entries"]["notes"]["value"][0] == "***"
        applied_live = [w for w in live["writes"] if w["status"] == "applied"]
        assert live["version"] == len(applied_live)
        for name, entry in live["entries"].items():  # the entries agree with the writes so far
            mine = [w for w in applied_live if w["entry"] == name]
            assert entry["version"] == (mine[-1]["version_after"] if mine else 0)

        approval = approvals[0]["id"]
        status, _, _answer = call(other, "POST", f"/v1/runs/{run_id}/approvals/{approval}", {"approve": True})
        assert status == 200
        record = finished(owner, run_id)
        status, _, final = call(other, "GET", f"/v1/runs/{run_id}/workspace")
        assert final["status"] == record["status"]
        assert final["writes"][: len(live["writes"])] == live["writes"]  # writes only ever add up
        assert final["entries"]["count"]["value"] == record["result"]["workspace"]["entries"]["count"]["value"]
        assert SECRET not in json.dumps([live, final])


def test_with_trace_content_the_writes_and_events_carry_values_masked(tmp_path: Path, secret_env: None) -> None:
    with served_teams(tmp_path, "--trace-content") as server:
        connection = connect_to(server)[0]
        status, _, created = call(connection, "POST", "/v1/runs", {"team": "ws-served", "input": "take notes"})
        run_id = created["id"]
        finished(connection, run_id)
        status, _, answer = call(connection, "GET", f"/v1/runs/{run_id}/workspace")
        assert status == 200
        by_entry = {w["entry"]: w for w in answer["writes"] if w["status"] == "applied"}
        assert by_entry["notes"]["value"][0] == "***" and len(by_entry["notes"]["value"]) == 2
        assert by_entry["count"]["value"] == 1
        _, events = events_until(connection, f"/v1/runs/{run_id}/events", "result")
        values = [d["data"]["value_after"] for name, d in events if name == "workspace_write"]
        assert values and [v[0] for v in values if isinstance(v, list)] == ["***"]
        assert SECRET not in json.dumps([answer, events])


def test_a_served_thread_turn_starts_from_the_workspace_its_last_turn_ended_with(
    tmp_path: Path, secret_env: None
) -> None:
    team = workspace_team(tmp_path)
    team.write_text(team.read_text(encoding="utf-8").replace("workspace:\n", "workspace:\n  persist: thread\n"))
    with served(team, "--store", str(tmp_path / "teamrun.db")) as server:
        connection = connect_to(server)[0]
        answers = []
        for turn in ("first", "second"):
            status, _, created = call(
                connection, "POST", "/v1/runs", {"team": "ws-served", "input": turn, "thread": "th-1"}
            )
            assert status == 201, created
            assert finished(connection, created["id"])["status"] == "done"
            status, _, answer = call(connection, "GET", f"/v1/runs/{created['id']}/workspace")
            assert status == 200, answer
            answers.append(answer)
        first, second = answers
        assert first["carried_over"] == {"thread": "th-1", "version": 0}
        assert second["carried_over"] == {"thread": "th-1", "version": first["version"]}
        assert second["entries"]["count"]["value"] == 2 and len(second["entries"]["notes"]["value"]) == 3
        assert second["entries"]["notes"]["value"][0] == "***"
        # this turn's writes only, each arriving at or after the version the turn started from
        assert len(second["writes"]) == len(first["writes"])
        assert min(w["workspace_version"] for w in second["writes"]) == first["version"]
        status, _, later = call(connection, "GET", f"/v1/runs/{second['run_id']}/workspace?since={first['version']}")
        assert later["writes"] == second["writes"]
        assert SECRET not in json.dumps(answers)
