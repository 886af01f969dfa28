"""The peer driver's rules in process, on the scripted model (issue 43 item 8): a lease lost to its expiry, a
deadlock, `limits.max_tasks` — and every board change the driver makes is journaled.

A peer's call may wait for a gate that an event opens (the other peer took the task): the order of the peers is
set by what happened on the board, never by a sleep.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from teamrun.engine.durability.journal import MemoryJournal, RunJournal
from teamrun.engine.result import RunResult
from teamrun.engine.team import load_team
from teamrun.events import Event
from teamrun.llm.types import Message, ModelReply, ModelSettings, ToolSchema, current_scope
from teamrun.store.records import JournaledRun
from teamrun.testing.scripted import ScriptedModel, Step, tool_call

Opens = Callable[[Event], bool]


def _team(
    tmp_path: Path, *, initial: list[str], lease_s: float = 600, max_claims: int = 3, max_tasks: int = 50
) -> Path:
    path = tmp_path / "team.yaml"
    path.write_text(
        f"""\
version: 1
name: peer-rules
peers: [p1, p2]
limits: {{max_tasks: {max_tasks}}}
workspace:
  entries:
    tasks:
      kind: board
      schema: {{type: string}}
      lease_s: {lease_s}
      max_claims: {max_claims}
      initial: {json.dumps(initial)}
agents:
  p1: {{model: openai/p1, description: A peer.}}
  p2: {{model: openai/p2, description: A peer.}}
""",
        encoding="utf-8",
    )
    return path


class GatedModel:
    """The scripted model, where an agent's n-th call first waits until an event opened its gate."""

    def __init__(self, script: Mapping[str, Sequence[Step]], gates: Mapping[tuple[str, int], Opens]) -> None:
        self.scripted = ScriptedModel(script)
        self.rules = dict(gates)
        self.gates = {key: asyncio.Event() for key in gates}
        self.counts: dict[str, int] = {}

    def see(self, event: Event) -> None:
        """A subscriber: open every gate whose rule the event meets."""
        for key, opens in self.rules.items():
            if opens(event):
                self.gates[key].set()

    async def complete(
        self,
        messages: Sequence[Message],
        *,
        settings: ModelSettings,
        tools: Sequence[ToolSchema] = (),
        response_format: Mapping[str, Any] | None = None,
    ) -> ModelReply:
        scope = current_scope.get()
        assert scope is not None
        agent = scope.agent_path[-1]
        self.counts[agent] = self.counts.get(agent, 0) + 1
        gate = self.gates.get((agent, self.counts[agent]))
        if gate is not None:
            await gate.wait()
        return await self.scripted.complete(messages, settings=settings, tools=tools, response_format=response_format)


def _applied(op: str, agent: str, task_id: str = "t1") -> Opens:
    return lambda e: (
        e.kind == "board_op"
        and e.data["op"] == op
        and e.data["status"] == "applied"
        and e.agent == agent
        and e.data["task_id"] == task_id
    )


def _run(path: Path, model: GatedModel, input: str) -> tuple[RunResult, list[Event], MemoryJournal]:
    team = load_team(path, chat_model=model)
    backend = MemoryJournal()
    record = JournaledRun(run_id="r1", team="peer-rules", team_file=str(path), input=input)
    events: list[Event] = []
    result = asyncio.run(team.run(input, subscribers=[events.append, model.see], journal=RunJournal(backend, record)))
    model.scripted.assert_complete()
    return result, events, backend


def _ops(events: list[Event]) -> list[tuple[str, str, str, str | None]]:
    return [(e.agent, e.data["op"], e.data["status"], e.data.get("reason")) for e in events if e.kind == "board_op"]


def _result(call: Any) -> dict[str, Any]:
    return json.loads(call.tool_results[-1])


def test_a_lease_that_expires_goes_to_another_peer_and_the_late_holder_cannot_complete(tmp_path: Path) -> None:
    claim = tool_call("board_claim")
    model = GatedModel(
        {
            "p1": [claim, tool_call("board_complete", task_id="t1", result="late"), claim, "p1: over"],
            "p2": [claim, tool_call("board_complete", task_id="t1", result="p2 did a"), claim, "p2: over"],
        },
        {("p2", 1): _applied("claim", "p1"), ("p1", 2): _applied("claim", "p2")},  # p1 first; p1 stalls
    )
    result, events, backend = _run(_team(tmp_path, initial=[], lease_s=0.05), model, "a")

    assert result.status == "done", result.error
    (task,) = result.workspace["entries"]["tasks"]["value"]  # type: ignore[index]
    assert task["status"] == "done" and task["completed_by"] == "p2" and task["claims"] == 2
    ops = _ops(events)
    assert ("peers", "expire", "applied", None) in ops  # the driver took the lease back
    assert ("p1", "complete", "refused", "lease") in ops  # the late holder lost it
    assert _result(model.scripted.calls_of("p1")[2])["reason"] == "lease"
    driver = [e for e in backend.load("r1") if e.key.invocation.endswith("#tasks")]
    assert {e.key.kind for e in driver} == {"board_op"}  # the starting task and the expiry, journaled
    assert sorted(e.payload["workspace"]["event"]["op"] for e in driver) == ["expire", "post"]


def test_peers_all_waiting_on_a_task_that_can_never_be_done_end_as_a_deadlock(tmp_path: Path) -> None:
    claim = tool_call("board_claim")
    model = GatedModel(
        {
            "p1": [
                claim,
                tool_call("board_post", payload="blocked", after=["t1"]),
                tool_call("board_release", task_id="t1", reason="cannot be done"),
                claim,
                "p1: deadlock",
            ],
            "p2": [claim, "p2: deadlock"],
        },
        {("p2", 1): _applied("claim", "p1")},
    )
    result, _, _ = _run(_team(tmp_path, initial=[], max_claims=1), model, "poison")

    assert result.status == "failed" and result.stopped_by is not None and "deadlock" in result.stopped_by
    tasks = {t["id"]: t for t in result.workspace["entries"]["tasks"]["value"]}  # type: ignore[index]
    assert tasks["t1"]["status"] == "failed" and tasks["t2"]["status"] == "open" and tasks["t2"]["after"] == ["t1"]
    for peer in ("p1", "p2"):
        assert _result(model.scripted.calls_of(peer)[-1])["status"] == "deadlock"


def test_max_tasks_stops_the_peers_with_tasks_left(tmp_path: Path) -> None:
    claim = tool_call("board_claim")
    model = GatedModel(
        {
            "p1": [claim, tool_call("board_complete", task_id="t1", result="p1 did b"), claim, "p1: stopped"],
            "p2": [claim, "p2: stopped"],
        },
        {("p2", 1): _applied("claim", "p1")},
    )
    result, events, _ = _run(_team(tmp_path, initial=["b"], max_tasks=1), model, "a")

    assert result.status == "budget_exhausted", result.error
    assert result.stopped_by is not None and "limits.max_tasks (1)" in result.stopped_by
    tasks = {t["id"]: t for t in result.workspace["entries"]["tasks"]["value"]}  # type: ignore[index]
    assert tasks["t1"]["status"] == "done" and tasks["t2"]["status"] == "open"
    assert ("p2", "claim", "applied", None) not in _ops(events)  # max_tasks left p2 nothing to claim
    for peer in ("p1", "p2"):
        assert _result(model.scripted.calls_of(peer)[-1])["status"] == "stopped"
