"""A call of a tool the agent does not have is a `tool` span like any refused call: `tool_start` and a `tool_end`
with status `error` (it left no event: the model read "there is no tool named ..." and a trace showed nothing)."""

from __future__ import annotations

import asyncio
import textwrap
from pathlib import Path

from teamrun.engine.team import load_team
from teamrun.events import Event
from teamrun.testing.scripted import ScriptedModel, tool_call

TEAM = textwrap.dedent("""\
    version: 1
    name: unknown
    supervisor: lead
    agents:
      lead: {model: openai/lead}
    """)


def test_an_unknown_tool_call_is_a_tool_span_that_ends_error(tmp_path: Path) -> None:
    path = tmp_path / "team.yaml"
    path.write_text(TEAM, encoding="utf-8")
    model = ScriptedModel({"lead": [tool_call("nosuch", x=1), tool_call("n" * 500), "done"]})
    events: list[Event] = []

    result = asyncio.run(load_team(path, chat_model=model).run("go", subscribers=[events.append]))

    assert result.status == "done", result.error
    assert model.calls[1].tool_results[0].startswith("Error: there is no tool named 'nosuch'")
    starts = [e for e in events if e.kind == "tool_start"]
    ends = [e for e in events if e.kind == "tool_end"]
    assert [e.data["tool"] for e in starts] == [e.data["tool"] for e in ends]
    assert len(ends) == 2 and (ends[0].data["status"], ends[0].data["error"]) == ("error", "no such tool: nosuch")
    assert len(ends[1].data["tool"]) < 500  # a long name is cut in the events
    assert {e.span_id for e in starts} == {e.span_id for e in ends}
