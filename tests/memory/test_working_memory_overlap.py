"""Issue 44.3: two overlapping runs of one resource both keep their working-memory changes.

Both runs load the resource's working memory before either ends; each appends its own item to a ``persist:
resource`` entry; the first to start ends last. Each run's change is applied to the record as it is when the run
ends (atomically, by the entry's rule), so the record keeps both items — a snapshot written back at the end lost
the run that ended first.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from teamrun.engine.team import load_team
from teamrun.llm.types import Message, ModelReply, ModelSettings, ToolSchema
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
workspace:
  persist: resource
  entries:
    notes: {schema: {type: array, items: {type: string}}, merge: append, write: [support]}
    visits: {schema: {type: integer}, merge: sum, write: [support]}
    profile: {schema: {type: object}, merge: merge, write: [support]}
"""


class _Gated:
    """A scripted model whose last reply waits for ``gate``; ``asked`` is set once it waits."""

    def __init__(self, item: str, key: str) -> None:
        self.inner = ScriptedModel(
            {
                "support": [
                    tool_call("workspace_write_notes", items=[item]),
                    tool_call("workspace_write_visits", value=1),
                    tool_call("workspace_write_profile", value={key: item}, version=0),
                    "Noted.",
                ]
            }
        )
        self.gate, self.asked = asyncio.Event(), asyncio.Event()
        self.calls = 0

    async def complete(
        self,
        messages: Sequence[Message],
        *,
        settings: ModelSettings,
        tools: Sequence[ToolSchema] = (),
        response_format: Mapping[str, Any] | None = None,
    ) -> ModelReply:
        self.calls += 1
        if self.calls == 4:  # the final answer: the run has loaded and written, it has not ended
            self.asked.set()
            await self.gate.wait()
        return await self.inner.complete(messages, settings=settings, tools=tools, response_format=response_format)


def test_two_overlapping_runs_of_one_resource_keep_both_working_memory_changes(tmp_path: Path) -> None:
    team_file, store = tmp_path / "desk.yaml", tmp_path / "teamrun.db"
    team_file.write_text(TEAM)
    with open_store(store) as opened:
        MemoryStore(opened).save_working("cust-A", "desk", "notes", 1, ["kept"])
        MemoryStore(opened).save_working("cust-A", "desk", "visits", 1, 10)
        MemoryStore(opened).save_working("cust-A", "desk", "profile", 1, {"plan": "gold"})

    async def scenario() -> None:
        first, second = _Gated("first", "tone"), _Gated("second", "channel")
        one = asyncio.create_task(load_team(team_file, chat_model=first, store=store).run("note it", resource="cust-A"))
        await first.asked.wait()  # the first run loaded and wrote; it waits before its answer
        two = asyncio.create_task(
            load_team(team_file, chat_model=second, store=store).run("note it too", resource="cust-A")
        )
        await second.asked.wait()  # the second loaded too (before either ended)
        second.gate.set()
        assert (await two).status == "done"
        first.gate.set()  # the first ends last
        assert (await one).status == "done"

    asyncio.run(scenario())
    with open_store(store) as opened:
        kept = {name: value for name, (_version, value) in MemoryStore(opened).load_working("cust-A", "desk").items()}
    assert kept["notes"] == ["kept", "second", "first"]
    assert kept["visits"] == 12
    assert kept["profile"] == {"plan": "gold", "channel": "second", "tone": "first"}
