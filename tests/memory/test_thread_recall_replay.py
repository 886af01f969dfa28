"""The recall of earlier threads' messages under ``--record`` / ``--replay`` (in process, the offline embedding): the
quoted messages are in the masked memory block, so a strict replay matches the recording whatever the index holds
by then, and a replay indexes nothing (it writes nothing into the memory store)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from teamrun.engine.team import load_team
from teamrun.llm.cassette import RecordingModel, ReplayModel
from teamrun.store import open_store
from teamrun.store.memory import MemoryStore
from teamrun.store.memory_messages import MessageIndex
from teamrun.testing.scripted import ScriptedModel

TEAM = """\
version: 1
name: desk
supervisor: support
agents:
  support:
    instructions: Help the customer.
memory:
  embedding: {model: offline}
  recall:
    support: {min_score: 0.05, messages: {min_score: 0.05}}
"""
DAMAGED = "My parcel to Lisbon arrived damaged, order 7731"
REFUND = "A refund for order 7731 is on its way"
QUESTION = "What happened with my Lisbon parcel?"


def _indexed(store: Path) -> int:
    with open_store(store) as opened:
        return MessageIndex(opened).count("cust-A")


def test_a_strict_replay_of_a_turn_that_recalled_earlier_threads_matches_and_indexes_nothing(tmp_path: Path) -> None:
    team, store, cassette = tmp_path / "desk.yaml", tmp_path / "teamrun.db", tmp_path / "run.cassette.jsonl"
    team.write_text(TEAM)
    earlier = ScriptedModel({"support": [REFUND]})
    first = asyncio.run(load_team(team, chat_model=earlier, store=store).run(DAMAGED, resource="cust-A", thread="t1"))
    assert first.status == "done", first.error
    assert _indexed(store) == 2

    recording = RecordingModel(ScriptedModel({"support": ["It arrived damaged; a refund is on its way."]}), cassette)
    recorded = asyncio.run(
        load_team(team, chat_model=recording, store=store).run(QUESTION, resource="cust-A", thread="t2")
    )
    assert recorded.status == "done", recorded.error
    assert _indexed(store) == 4
    with open_store(store) as opened:
        assert MemoryStore(opened).forget("cust-A").indexed_messages == 4  # the index changed since the recording

    replay = ReplayModel(cassette, mode="strict")
    replayed = asyncio.run(
        load_team(team, chat_model=replay, store=store).run(QUESTION, resource="cust-A", thread="t3")
    )
    assert replayed.status == "done", replayed.error
    assert replayed.final_text == "It arrived damaged; a refund is on its way."
    assert _indexed(store) == 0  # the replay indexed nothing
