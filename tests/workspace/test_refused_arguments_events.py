"""A workspace write or a board call refused at the argument boundary (:mod:`teamrun.bounds`: NaN, a huge integer,
...) is a ``workspace_write`` / ``board_op`` event with reason ``arguments``, as every refused write is (it left
none); and a refused workspace or board call's ``tool_end`` says why in its ``error``."""

from __future__ import annotations

import asyncio
import textwrap
from pathlib import Path
from typing import Any

from teamrun.engine.team import load_team
from teamrun.events import Event
from teamrun.llm.types import ModelReply, ToolCall
from teamrun.testing.scripted import ScriptedModel

WORKSPACE_TEAM = textwrap.dedent("""\
    version: 1
    name: refusals
    supervisor: lead
    workspace:
      entries:
        notes: {schema: {type: array}, merge: append, write: [lead]}
    agents:
      lead: {model: openai/lead}
    """)
BOARD_TEAM = textwrap.dedent("""\
    version: 1
    name: board-refusals
    peers: [ada]
    limits: {max_tasks: 5}
    workspace:
      entries:
        tasks: {kind: board, schema: {type: string}}
    agents:
      ada: {model: openai/ada, description: Does the tasks.}
    """)


def _raw(name: str, arguments: str) -> ModelReply:
    """A reply calling ``name`` with ``arguments`` as the provider sent them (unparsed)."""
    return ModelReply(None, (ToolCall("c1", name, arguments),), finish_reason="tool_calls")


def _run(tmp_path: Path, team: str, script: dict[str, list[Any]]) -> list[Event]:
    path = tmp_path / "team.yaml"
    path.write_text(team, encoding="utf-8")
    events: list[Event] = []
    asyncio.run(load_team(path, chat_model=ScriptedModel(script)).run("go", subscribers=[events.append]))
    return events


def _tool_end(events: list[Event], tool: str) -> Event:
    (end,) = [e for e in events if e.kind == "tool_end" and e.data["tool"] == tool]
    return end


def test_a_write_refused_at_the_boundary_is_a_workspace_write_event(tmp_path: Path) -> None:
    events = _run(tmp_path, WORKSPACE_TEAM, {"lead": [_raw("workspace_write_notes", '{"items": [NaN]}'), "done"]})

    (write,) = [e for e in events if e.kind == "workspace_write"]
    assert (write.entry, write.status, write.reason, write.version_after) == ("notes", "refused", "arguments", 0)
    assert "arguments refused (number)" in write.message
    end = _tool_end(events, "workspace_write_notes")
    assert write.span_id == end.span_id and end.data["status"] == "error"
    assert end.data["error"].startswith("arguments refused (number)")


def test_a_refused_workspace_write_s_tool_end_says_why(tmp_path: Path) -> None:
    events = _run(tmp_path, WORKSPACE_TEAM, {"lead": [_raw("workspace_write_notes", '{"x": 1}'), "done"]})

    (write,) = [e for e in events if e.kind == "workspace_write"]
    end = _tool_end(events, "workspace_write_notes")
    assert (write.status, write.reason, end.data["status"]) == ("refused", "arguments", "error")
    assert end.data.get("error") and end.data["error"] in write.message


def test_a_board_call_refused_at_the_boundary_is_a_board_op_event(tmp_path: Path) -> None:
    events = _run(tmp_path, BOARD_TEAM, {"ada": [_raw("board_post", '{"payload": NaN}'), "bye"]})

    refused = [e for e in events if e.kind == "board_op" and e.data["status"] == "refused"]
    assert [(e.data["op"], e.data["reason"], e.data["entry"]) for e in refused] == [("post", "arguments", "tasks")]
    assert "arguments refused (number)" in refused[0].data["message"]
    end = _tool_end(events, "board_post")
    assert refused[0].span_id == end.span_id and end.data["error"].startswith("arguments refused (number)")
