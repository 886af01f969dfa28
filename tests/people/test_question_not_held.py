"""A question waits to be numbered only for workers BEFORE it in the run's tree, never for a later sibling
(attack a4243b, finding 9).

The supervisor delegates to ``asker`` (first) and ``slow`` (second) in one reply; ``asker`` asks its person at
once. Before the fix the question was asked (``person_asked``, a pending item) only when ``slow`` finished: served,
``GET /v1/pending`` stayed empty for the length of ``slow``'s model call. Here ``slow``'s model call does not
return until ``asker``'s question was asked; if the question is held back, the call gives up waiting after a hang
guard and the test fails on the recorded order.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import teamrun
from teamrun.engine.durability.pending import RunActivity, SuspendingDesk, tree_order
from teamrun.events import Event
from teamrun.llm.types import Message, ModelReply, ModelSettings, ToolSchema, current_scope
from teamrun.store import open_store
from teamrun.store.pending import PendingRepository
from teamrun.testing.scripted import ScriptedModel, delegate, text, tool_call

TEAM = """version: 1
name: par
supervisor: lead
tools:
  ask_num:
    description: ask for a number
    person: {answer_schema: {type: integer, minimum: 1}}
agents:
  lead:
    instructions: ask both workers at once
    delegates_to: [asker, slow]
    delegation: {max_concurrency: 2}
  asker: {description: asks a person for a number, tools: [ask_num]}
  slow: {description: thinks slowly}
"""
HANG_GUARD_S = 60.0
"""Only so that a held question fails the test instead of hanging it; the question is asked in milliseconds."""


class SlowModel:
    """The scripted model; ``slow``'s call returns only once ``asker``'s question was asked (or the guard ran out),
    and notes what it saw while it was working."""

    def __init__(self, inner: ScriptedModel) -> None:
        self.inner = inner
        self.asked: asyncio.Event | None = None
        self.seen: list[str] = []
        self.pending: list[tuple[str, str]] = []
        """The pending items of the run, as ``slow``'s call saw them while it was working."""
        self.items: PendingRepository | None = None

    def on_event(self, event: Event) -> None:
        if event.kind == "person_asked" and event.agent_path[-1:] == ("asker",) and self.asked is not None:
            self.seen.append("asker asked")
            self.asked.set()

    async def complete(
        self,
        messages: Sequence[Message],
        *,
        settings: ModelSettings,
        tools: Sequence[ToolSchema] = (),
        response_format: Mapping[str, Any] | None = None,
    ) -> ModelReply:
        scope = current_scope.get()
        if scope is not None and scope.agent_path[-1:] == ("slow",) and self.asked is not None:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.asked.wait(), HANG_GUARD_S)
            self.seen.append("slow answered" if self.asked.is_set() else "slow answered, asker not asked")
            assert self.items is not None
            self.pending = [(item.item_id, item.agent) for item in self.items.items(status="pending")]
        return await self.inner.complete(messages, settings=settings, tools=tools, response_format=response_format)


def test_the_first_workers_question_is_asked_while_a_later_sibling_works(tmp_path: Path) -> None:
    team_file = tmp_path / "team.yaml"
    team_file.write_text(TEAM, encoding="utf-8")
    scripted = ScriptedModel(
        {
            "lead": [delegate("asker", "slow", task="get a number")],
            "asker": [tool_call("ask_num", question="how many?")],
            "slow": [text("slow thought")],
        }
    )
    model = SlowModel(scripted)
    store = open_store(tmp_path / "runs.db")
    team = teamrun.load_team(team_file, store=store, chat_model=model)  # type: ignore[arg-type]
    model.items = PendingRepository(store)
    team.desk = SuspendingDesk(model.items, poll_s=0.05)

    async def run() -> Any:
        model.asked = asyncio.Event()
        return await team.run("late", journal=True, subscribers=[model.on_event])

    result = asyncio.run(run())

    assert result.status == "waiting", result.error
    assert model.seen == ["asker asked", "slow answered"]
    assert model.pending == [("q1", "asker")]  # what GET /v1/pending shows while slow still works
    ids = {item.agent: item.item_id for item in PendingRepository(store).items(result.run_id)}
    assert ids == {"asker": "q1"}


def test_an_invocation_is_placed_where_its_calls_start() -> None:
    """A worker's loop (its invocation's key, no ``#``) is placed in the tree with its calls: the second
    worker after the first worker's question, the first worker before the second worker's question."""
    assert tree_order("lead/asker@1.0#1.0") < tree_order("lead/slow@1.1") < tree_order("lead/slow@1.1#1.0")
    assert tree_order("lead/asker@1.0") < tree_order("lead/asker@1.0#1.0") < tree_order("lead/slow@1.1#1.0")
    assert tree_order("lead/slow@1.1/deep@2.0") > tree_order("lead/asker@1.0#3.0")


async def _granted_while(strand_key: str, asking_key: str) -> bool:
    """Whether a call at ``asking_key`` gets its turn to number its item while a strand at ``strand_key`` works
    (it is let go afterwards either way)."""
    activity = RunActivity()
    done = asyncio.Event()
    started = asyncio.Event()

    async def strand() -> None:
        async with activity.working(strand_key):
            started.set()
            await done.wait()

    async def ask() -> None:
        async with activity.working(asking_key), activity.turn_to_ask(asking_key):
            pass

    working = asyncio.create_task(strand())
    await started.wait()
    asking = asyncio.create_task(ask())
    for _ in range(200):  # loop turns, not time: the turn is given after a few quiet turns or not at all
        await asyncio.sleep(0)
    granted = asking.done()
    done.set()
    await asyncio.gather(working, asking)
    return granted


def test_only_a_strand_before_the_question_holds_it() -> None:
    assert asyncio.run(_granted_while("lead/slow@1.1", "lead/asker@1.0#1.0"))  # a later sibling's loop
    assert asyncio.run(_granted_while("lead/slow@1.1#1.0", "lead/asker@1.0#1.0"))  # a later sibling's call
    assert asyncio.run(_granted_while("lead#1.0", "lead/asker@1.0#1.0"))  # the call that delegated the asker
    assert asyncio.run(_granted_while("lead/asker@1.0", "lead/asker@1.0#1.0"))  # the asker's own loop
    assert not asyncio.run(_granted_while("lead/infra@1.0", "lead/legal@1.1#1.0"))  # an earlier sibling's loop
    assert not asyncio.run(_granted_while("lead#1.0", "lead/legal@1.1#1.0"))  # the earlier delegating call
