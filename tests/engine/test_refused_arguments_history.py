"""Arguments refused at the boundary (:mod:`teamrun.bounds`) are not sent back to the provider: the assistant
message kept in the history carries ``{}`` for them (invalid JSON, past 1 MiB, too deep), so no converter parses
them again on the next request; a call within bounds in the same reply keeps its arguments."""

from __future__ import annotations

import asyncio
import json
import textwrap
from pathlib import Path

from teamrun.bounds import MAX_ARGUMENT_BYTES
from teamrun.engine.team import load_team
from teamrun.llm.types import ModelReply, ToolCall
from teamrun.testing.scripted import ScriptedModel

TEAM = textwrap.dedent("""\
    version: 1
    name: history
    supervisor: lead
    workspace:
      entries:
        note: {write: [lead]}
    agents:
      lead: {model: openai/lead}
    """)

REFUSED = {
    "not json": '{"value": "unfinished',
    "too big": json.dumps({"value": "x" * (MAX_ARGUMENT_BYTES + 10), "version": 0}),
    "too deep": '{"value": ' + "[" * 900 + "]" * 900 + ', "version": 0}',
}
FINE = '{"value": "fine", "version": 0}'


def test_the_next_request_carries_no_refused_arguments(tmp_path: Path) -> None:
    path = tmp_path / "team.yaml"
    path.write_text(TEAM, encoding="utf-8")
    calls = [ToolCall(f"bad{i}", "workspace_write_note", raw) for i, raw in enumerate(REFUSED.values())]
    unknown = ToolCall("unknown", "no_such_tool", "{not json")  # an unknown name's arguments out of bounds too
    good = ToolCall("good", "workspace_write_note", FINE)
    reply = ModelReply(None, (*calls, unknown, good), finish_reason="tool_calls")
    model = ScriptedModel({"lead": [reply, "done"]})

    result = asyncio.run(load_team(path, chat_model=model).run("go"))

    model.assert_complete()
    assert result.status == "done", result.error
    (assistant,) = [m for m in model.calls[1].messages if m.get("role") == "assistant"]
    sent = {call["id"]: call["function"]["arguments"] for call in assistant["tool_calls"]}
    assert sent == {"bad0": "{}", "bad1": "{}", "bad2": "{}", "unknown": "{}", "good": FINE}
    refusals = [json.loads(r) for r in model.calls[1].tool_results[:3]]
    assert [r["rule"] for r in refusals] == ["json", "size", "depth"], refusals
    assert result.workspace["entries"]["note"]["value"] == "fine"
