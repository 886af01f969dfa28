"""Tools marked ``require_approval``, answered over HTTP while the run waits."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest

import teamrun
from teamrun.testing.scripted import ScriptedCall, ScriptedModel, tool_call
from tests.serve.sse import sse_events

STAMP = "import pathlib, sys; pathlib.Path(sys.argv[1]).write_text('ran'); print('stamped ' + sys.argv[1])"


def stamp_team(tmp_path: Path) -> Path:
    path = tmp_path / "stamp.yaml"
    path.write_text(
        f"""\
version: 1
name: stamper
supervisor: lead
agents:
  lead:
    description: Stamps.
    tools: [stamp]
tools:
  stamp:
    description: Write a stamp file.
    command: [{json.dumps(sys.executable)}, "-c", {json.dumps(STAMP)}, "{{{{ path }}}}"]
    parameters:
      path: {{type: string}}
    require_approval: true
""",
        encoding="utf-8",
    )
    return path


def last_tool_result(call: ScriptedCall) -> str:
    return f"the tool said: {call.messages[-1].get('content')}"


def run_and_answer(server_url: str, answer: bool | None) -> tuple[list[tuple[str, Any]], dict[str, Any], Any]:
    """Start a run, answer its approval request with ``answer`` (None: never), follow it to the end."""
    replies: list[Any] = []
    with httpx.Client(base_url=server_url, timeout=60) as client:
        run_id = client.post("/v1/runs", json={"team": "stamper", "input": "stamp it"}).json()["id"]
        seen = []
        with client.stream("GET", f"/v1/runs/{run_id}/events") as response:
            for name, data in sse_events(response.iter_lines()):
                seen.append((name, data))
                if name == "approval_request" and answer is not None:
                    url = f"/v1/runs/{run_id}/approvals/{data['data']['id']}"
                    replies.append(client.post(url, json={"approve": answer}))
                    replies.append(client.post(url, json={"approve": answer}))
        record = client.get(f"/v1/runs/{run_id}").json()
    return seen, record, replies


@pytest.mark.parametrize("approve", [True, False])
def test_a_client_approves_or_denies_a_tool_call(serve: Any, tmp_path: Path, approve: bool) -> None:
    marker = tmp_path / "stamp.txt"
    model = ScriptedModel({"lead": [tool_call("stamp", path=str(marker)), last_tool_result]})
    server = serve([teamrun.load_team(stamp_team(tmp_path), chat_model=model)])

    seen, record, replies = run_and_answer(server.url, approve)

    kinds = [name for name, _ in seen]
    asked = next(data for name, data in seen if name == "approval_request")
    assert asked["data"]["tool"] == "stamp" and asked["data"]["arguments"] == {"path": str(marker)}
    assert kinds.index("approval_request") < kinds.index("approval_end") < kinds.index("tool_end")
    ended = next(data for name, data in seen if name == "approval_end")["data"]
    assert ended["status"] == ("approved" if approve else "denied") and ended["decided_by"] == "client"
    first, second = replies
    assert first.status_code == 200 and second.status_code == 409
    assert marker.exists() is approve
    assert record["status"] == "done"
    assert ("stamped" in record["final_text"]) is approve
    assert record["approvals"][0]["status"] == ("approved" if approve else "denied")
    model.assert_complete()


def test_no_answer_within_the_timeout_denies(serve: Any, tmp_path: Path) -> None:
    marker = tmp_path / "stamp.txt"
    model = ScriptedModel({"lead": [tool_call("stamp", path=str(marker)), last_tool_result]})
    server = serve([teamrun.load_team(stamp_team(tmp_path), chat_model=model)], approval_timeout_s=0.2)

    seen, record, _ = run_and_answer(server.url, None)

    ended = next(data for name, data in seen if name == "approval_end")["data"]
    assert ended == {**ended, "status": "denied", "decided_by": "timeout"}
    assert not marker.exists()
    assert record["status"] == "done" and "stamped" not in record["final_text"]


def test_with_the_fail_outcome_no_answer_within_the_timeout_fails_the_run(serve: Any, tmp_path: Path) -> None:
    marker = tmp_path / "stamp.txt"
    model = ScriptedModel({"lead": [tool_call("stamp", path=str(marker)), last_tool_result]})
    team = teamrun.load_team(stamp_team(tmp_path), chat_model=model)
    server = serve([team], approval_timeout_s=0.2, approval_on_timeout="fail")

    seen, record, _ = run_and_answer(server.url, None)

    ended = next(data for name, data in seen if name == "approval_end")["data"]
    assert ended == {**ended, "status": "denied", "decided_by": "timeout"}
    assert not marker.exists()
    assert record["status"] == "failed"
    assert record["error"] == "nobody approved the call to tool 'stamp' within 0.2 seconds"
