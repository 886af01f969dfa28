"""Board calls whose arguments cannot be read are refusals like any other: JSON with reason `arguments`, and a
`board_op` event (they were a plain `Error: ...` text and left no event)."""

from __future__ import annotations

import asyncio
import json
import textwrap
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from teamrun.engine.team import load_team
from teamrun.events import Event
from tests.workspace import policies
from tests.workspace.test_workspace_engine import PolicyModel

TEAM = textwrap.dedent("""\
    version: 1
    name: one-peer
    peers: [ada]
    limits: {max_tasks: 10}
    workspace:
      entries:
        tasks: {kind: board, schema: {type: string}}
    agents:
      ada: {model: openai/ada, description: Does the tasks.}
    """)


def _results(messages: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    return [json.loads(m["content"]) for m in messages if m.get("role") == "tool"]


def _peer(name: str, messages: Sequence[dict[str, Any]]) -> list[policies.Call] | str:
    results = _results(messages)
    if not results:
        return [
            ("board_post", {"payload": "more", "after": "t1"}),  # `after` is not a list
            ("board_post", {"payload": "more", "board": "nosuch"}),  # no such board
        ]
    last = results[-1]
    if last.get("status") == "claimed":
        return [("board_complete", {"task_id": last["task"]["id"], "result": "done"})]
    if last.get("status") in ("completed", "refused"):
        return [("board_claim", {})]
    return "finished"


def test_malformed_board_calls_are_json_refusals_and_board_op_events(tmp_path: Path) -> None:
    path = tmp_path / "team.yaml"
    path.write_text(TEAM, encoding="utf-8")
    model = PolicyModel(_peer)
    events: list[Event] = []

    result = asyncio.run(load_team(path, chat_model=model).run("the task", subscribers=[events.append]))

    assert result.status == "done", result.error
    first_results = _results([m for agent, ms, _ in model.requests for m in ms if agent == "ada"])[:2]
    assert [(r["status"], r["reason"], r["board"]) for r in first_results] == [("refused", "arguments", "tasks")] * 2
    assert "'after' must be a list" in first_results[0]["message"]
    assert "'board' must be one of: tasks" in first_results[1]["message"]
    refused = [e.data for e in events if e.kind == "board_op" and e.data["status"] == "refused"]
    assert [(o["op"], o["reason"]) for o in refused] == [("post", "arguments"), ("post", "arguments")]
