"""Attack a44b item 5: ``--replay`` (strict) of a recorded run whose agent searched and saved memories.

The recording keeps each ``memory_search`` / ``memory_save`` call's outcome; the replay answers the calls from it,
so the run replays whatever the store remembers by then (here: the resource forgotten since), and it writes
nothing into the store. Before, the replay searched the store again (the tool result, part of the next request,
differed: "message 3 (tool) differs from the recording") and saved the recorded facts again.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from teamrun.engine.team import load_team
from teamrun.events import Event, MemoryRecall
from teamrun.llm.cassette import RecordingModel, ReplayModel
from teamrun.store import open_store
from teamrun.store.memory import MemoryStore
from teamrun.testing.scripted import ScriptedModel, tool_call

TEAM = """\
version: 1
name: desk
supervisor: support
agents:
  support:
    instructions: Help the customer.
memory:
  embedding: {model: offline}
  search: [support]
  save: [support]
"""
TASK = "What fruit do I like? I like pears too."


def _facts(store: Path) -> list[str]:
    with open_store(store) as opened:
        return sorted(m.fact for m in MemoryStore(opened).list("cust-A"))


def test_a_strict_replay_answers_memory_calls_from_the_recording_and_writes_nothing(tmp_path: Path) -> None:
    team, store, cassette = tmp_path / "desk.yaml", tmp_path / "teamrun.db", tmp_path / "run.cassette.jsonl"
    team.write_text(TEAM)
    earlier = ScriptedModel({"support": [tool_call("memory_save", fact="The customer likes plums"), "Noted."]})
    seeded = asyncio.run(load_team(team, chat_model=earlier, store=store).run("plums", resource="cust-A"))
    assert seeded.status == "done", seeded.error

    script = ScriptedModel(
        {
            "support": [
                tool_call("memory_search", query="fruit the customer likes"),
                tool_call("memory_save", fact="The customer likes pears"),
                "You like plums and pears.",
            ]
        }
    )
    recording = RecordingModel(script, cassette)
    recorded = asyncio.run(load_team(team, chat_model=recording, store=store).run(TASK, resource="cust-A"))
    assert recorded.status == "done", recorded.error
    assert _facts(store) == ["The customer likes pears", "The customer likes plums"]

    with open_store(store) as opened:
        MemoryStore(opened).forget("cust-A")  # the store no longer remembers what the recording searched
    events: list[Event] = []
    replay = load_team(team, chat_model=ReplayModel(cassette), store=store)
    replayed = asyncio.run(replay.run(TASK, resource="cust-A", subscribers=[events.append]))
    assert replayed.status == "done", replayed.error
    assert replayed.final_text == "You like plums and pears."
    recalls = [e for e in events if isinstance(e, MemoryRecall)]
    assert [e.facts for e in recalls] == [["The customer likes plums"]]
    assert _facts(store) == []  # the replay saved nothing


def test_a_cassette_recorded_before_memory_calls_were_kept_replays_a_save_writing_nothing(tmp_path: Path) -> None:
    team, store, cassette = tmp_path / "desk.yaml", tmp_path / "teamrun.db", tmp_path / "run.cassette.jsonl"
    team.write_text(TEAM)
    script = ScriptedModel({"support": [tool_call("memory_save", fact="The customer likes pears"), "Noted."]})
    recorded = asyncio.run(
        load_team(team, chat_model=RecordingModel(script, cassette), store=store).run(TASK, resource="cust-A")
    )
    assert recorded.status == "done", recorded.error
    lines = cassette.read_text(encoding="utf-8").splitlines(keepends=True)
    older = [line for line in lines if '"kind": "memory_call"' not in line]
    assert len(older) == len(lines) - 1
    cassette.write_text("".join(older), encoding="utf-8")  # as an older teamrun recorded it
    with open_store(store) as opened:
        MemoryStore(opened).forget("cust-A")
    replayed = asyncio.run(load_team(team, chat_model=ReplayModel(cassette), store=store).run(TASK, resource="cust-A"))
    assert replayed.status == "done", replayed.error
    assert replayed.final_text == "Noted."
    assert _facts(store) == []
