"""An MCP tool's call whose arguments are out of bounds (teamrun.bounds) is refused before the server sees it, as
a local tool's or a delegation's is (tests/engine/test_argument_boundary.py): a JSON refusal, a ``tool_end``
error, and the run goes on with the server still answering."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import teamrun
from teamrun.events import Event
from teamrun.llm.types import ModelReply, ToolCall
from teamrun.testing.scripted import ScriptedCall, ScriptedModel, tool_call
from tests.engine.test_argument_boundary import BAD_VALUES
from tests.mcp_servers.conftest import write_team


def test_out_of_bounds_arguments_never_reach_an_mcp_server(tmp_path: Path, time_server: dict[str, Any]) -> None:
    path = write_team(tmp_path, {"lead": {"tools": ["time"]}}, {"time": time_server})
    raws = [f'{{"timezone": "Europe/Paris", "extra": {value}}}' for value, _ in BAD_VALUES.values()]
    raws.append('{"timezone": "Europe/Paris\\ud800"}')
    bad = ModelReply(
        None,
        tuple(ToolCall(f"c{i}", "time_get_current_time", raw) for i, raw in enumerate(raws)),
        finish_reason="tool_calls",
    )
    seen: list[ScriptedCall] = []

    def finish(call: ScriptedCall) -> str:
        seen.append(call)
        return "done"

    model = ScriptedModel({"lead": [bad, tool_call("time_get_current_time", timezone="Europe/Paris"), finish]})
    events: list[Event] = []

    result = asyncio.run(teamrun.load_team(path, chat_model=model).run("go", subscribers=[events.append]))

    model.assert_complete()
    assert result.status == "done", result.error
    refusals = [json.loads(r) for r in model.calls[1].tool_results]
    assert [(r["status"], r["reason"], r["rule"]) for r in refusals] == [
        ("refused", "arguments", rule) for _, rule in BAD_VALUES.values()
    ] + [("refused", "arguments", "text")]
    assert json.loads(seen[0].tool_results[0])["timezone"] == "Europe/Paris"  # the server answered the good call
    ends = [e.data for e in events if e.kind == "tool_end"]
    assert [d["status"] for d in ends] == ["error"] * len(raws) + ["ok"]
    assert all(d["error"].startswith("arguments refused (") for d in ends[:-1])
