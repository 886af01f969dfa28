"""Pending items are numbered by the place of the call that asked, not by which concurrent branch got there first
(issue 42, item 5): on the command line q1 was the infra question, on the served run of the same team q1 was legal.

A fan-out to infra and legal, each asking its person; one branch's model call is held until the other branch has
asked (its item numbered, as before the fix) or waits for its turn to number it (after), in either order. Either
way infra (the first delegation of the reply) asks q1.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

import teamrun
from teamrun.engine.durability.pending import SuspendingDesk, tree_order
from teamrun.events import Event
from teamrun.llm.types import Message, ModelReply, ModelSettings, ToolSchema, current_scope
from teamrun.store import open_store
from teamrun.store.pending import PendingRepository
from teamrun.testing.scripted import ScriptedModel, delegate, tool_call
from teamrun.tools.people import AskSite

TEAM = """version: 1
name: ids
supervisor: lead
tools:
  person_ops: {person: {choices: [eu-west-1, us-east-1]}}
  person_legal: {person: {choices: [approved, changes-needed]}}
agents:
  lead: {delegates_to: [infra, legal]}
  infra: {description: Picks the region., tools: [person_ops]}
  legal: {description: Signs off., tools: [person_legal]}
"""
ASKS = {"infra": "person_ops", "legal": "person_legal"}


class HeldModel:
    """The scripted model, with ``held``'s first model call waiting until the other branch reached its person."""

    def __init__(self, inner: ScriptedModel, held: str) -> None:
        self.inner = inner
        self.held = held
        self.other = next(agent for agent in ASKS if agent != held)
        self.release: asyncio.Event | None = None

    def on_event(self, event: Event) -> None:
        """The other branch's item was numbered."""
        if event.kind == "person_asked" and event.agent_path[-1:] == (self.other,) and self.release is not None:
            self.release.set()

    async def complete(
        self,
        messages: Sequence[Message],
        *,
        settings: ModelSettings,
        tools: Sequence[ToolSchema] = (),
        response_format: Mapping[str, Any] | None = None,
    ) -> ModelReply:
        scope = current_scope.get()
        if scope is not None and scope.agent_path[-1:] == (self.held,) and self.release is not None:
            await self.release.wait()
        return await self.inner.complete(messages, settings=settings, tools=tools, response_format=response_format)


class ObservedDesk(SuspendingDesk):
    """The store's desk, saying when a call waits for its turn to number its item."""

    def __init__(self, items: PendingRepository, model: HeldModel) -> None:
        super().__init__(items, poll_s=0.05)
        self.model = model

    def _waits_turn(self, site: AskSite) -> None:
        if site.agent == self.model.other and self.model.release is not None:
            self.model.release.set()


@pytest.mark.parametrize("held", ["infra", "legal"])
def test_items_are_numbered_by_the_asking_call_not_by_arrival(tmp_path: Path, held: str) -> None:
    team_file = tmp_path / "team.yaml"
    team_file.write_text(TEAM, encoding="utf-8")
    scripted = ScriptedModel(
        {
            "lead": [delegate("infra", "legal", task="Launch Falcon")],
            "infra": [tool_call("person_ops", question="Which region?")],
            "legal": [tool_call("person_legal", question="Signed off?")],
        }
    )
    model = HeldModel(scripted, held)
    store = open_store(tmp_path / "runs.db")
    team = teamrun.load_team(team_file, store=store, chat_model=model)  # type: ignore[arg-type]
    team.desk = ObservedDesk(PendingRepository(store), model)

    async def run() -> Any:
        model.release = asyncio.Event()
        return await team.run("Launch Falcon", journal=True, subscribers=[model.on_event])

    result = asyncio.run(run())

    assert result.status == "waiting", result.error
    ids = {item.agent: item.item_id for item in PendingRepository(store).items(result.run_id)}
    assert ids == {"infra": "q1", "legal": "q2"}
    scripted.assert_complete()


def test_the_tree_order_of_call_keys() -> None:
    keys = [
        "lead#2.0",  # the lead's own question, asked after its first delegations came back
        "lead/legal@1.1#1.0",
        "lead/infra@1.0#10.0",  # infra's tenth model call: after its ninth, numbers compared as numbers
        "lead/infra@1.0#9.1",
        "lead/infra@1.0/deep@3.0#1.0",  # a worker of infra, delegated at infra's third call
        "lead/infra@1.0#9.0",
    ]
    assert sorted(keys, key=tree_order) == [
        "lead/infra@1.0/deep@3.0#1.0",
        "lead/infra@1.0#9.0",
        "lead/infra@1.0#9.1",
        "lead/infra@1.0#10.0",
        "lead/legal@1.1#1.0",
        "lead#2.0",
    ]
