"""A workspace `sum` of two integers each within the argument bound (±2**63-1, teamrun/bounds.py) must not store a
value past it: the write that would is refused (reason `arguments`), as a float sum past a double is."""

from __future__ import annotations

import asyncio
import json
import textwrap
from pathlib import Path

from teamrun.bounds import MAX_INTEGER
from teamrun.engine.team import load_team
from teamrun.events import Event
from teamrun.testing.scripted import ScriptedModel, tool_call

TEAM = textwrap.dedent("""\
    version: 1
    name: sums
    supervisor: lead
    workspace:
      entries:
        total: {schema: {type: integer}, merge: sum, write: [lead]}
    agents:
      lead: {model: openai/lead}
    """)


def test_a_sum_past_the_integer_bound_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "team.yaml"
    path.write_text(TEAM, encoding="utf-8")
    model = ScriptedModel(
        {
            "lead": [
                tool_call("workspace_write_total", value=MAX_INTEGER),
                tool_call("workspace_write_total", value=MAX_INTEGER),
                tool_call("workspace_write_total", value=-MAX_INTEGER),
                "done",
            ]
        }
    )
    events: list[Event] = []
    result = asyncio.run(load_team(path, chat_model=model).run("go", subscribers=[events.append]))

    assert result.status == "done", result.error
    assert result.workspace is not None and result.workspace["entries"]["total"]["value"] == 0
    refused = json.loads(model.calls[2].tool_results[0])
    assert (refused["status"], refused["reason"]) == ("refused", "arguments")
    assert str(MAX_INTEGER) in refused["message"]
    writes = [(e.status, e.reason) for e in events if e.kind == "workspace_write"]
    assert writes == [("applied", None), ("refused", "arguments"), ("applied", None)]
