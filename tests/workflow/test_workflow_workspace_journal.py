"""A workflow's workspace reads and writes in a journaled run, in process: a second attempt over the journal
asks no model, applies no write again (each step's write event says ``replayed``) and ends with the same
workspace; an attempt over the journal cut after a step's write applies only the writes after it."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from teamrun.engine.durability.journal import MemoryJournal, RunJournal
from teamrun.engine.team import load_team
from teamrun.events import Event
from teamrun.llm.types import Message, ModelReply, ModelSettings, ToolSchema, current_scope
from teamrun.store.records import JournaledRun

TEAM = """\
version: 1
name: wf-ws-journal
workspace:
  entries:
    findings: {schema: {type: array, items: {type: string}}, merge: append}
    total: {schema: {type: integer}, merge: sum}
workflow:
  steps:
    - id: research
      map: "['Rust', 'Go']"
      agent: researcher
      write: findings
    - agent: counter
      input: "{{ workspace.findings | length }}"
      write: total
    - agent: writer
      input: "{{ workspace.findings | join(', ') }} ({{ workspace.total }})"
agents:
  researcher: {model: openai/researcher}
  counter: {model: openai/counter, output_schema: {type: integer}}
  writer: {model: openai/writer}
"""


class StepModel:
    """Answers each agent from its task alone; remembers every (agent, task)."""

    def __init__(self) -> None:
        self.asked: list[tuple[str, str]] = []

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
        task = str(next(m["content"] for m in messages if m["role"] == "user"))
        self.asked.append((agent, task))
        answer = {"researcher": f"{task} is fast", "counter": task, "writer": f"report: {task}"}[agent]
        return ModelReply(answer, finish_reason="stop")


def _run(path: Path, model: StepModel, journal: RunJournal) -> tuple[Any, list[Event]]:
    team = load_team(path, chat_model=model)
    events: list[Event] = []
    result = asyncio.run(team.run("go", subscribers=[events.append], journal=journal))
    return result, events


def _writes(events: list[Event]) -> list[tuple[str | None, str, bool]]:
    return [(e.step, e.entry, e.replayed) for e in events if e.kind == "workspace_write"]  # type: ignore[attr-defined]


def test_a_second_attempt_over_the_whole_journal_writes_nothing_again(tmp_path: Path) -> None:
    path = tmp_path / "team.yaml"
    path.write_text(TEAM, encoding="utf-8")
    backend = MemoryJournal()
    record = JournaledRun(run_id="r1", team="wf-ws-journal", team_file=str(path), input="go")
    first_model = StepModel()
    first, events = _run(path, first_model, RunJournal(backend, record))
    assert first.status == "done", first.error
    assert first.final_text == "report: Rust is fast, Go is fast (2)"
    assert first.workspace["entries"]["total"] == {"version": 2, "value": 2, "written_by": ["workflow"]}
    assert _writes(events) == [("research", "findings", False), ("counter", "total", False)]

    again = StepModel()
    resumed, events = _run(path, again, RunJournal(backend, record, backend.load("r1")))
    assert again.asked == []
    assert resumed.final_text == first.final_text and resumed.workspace == first.workspace
    assert _writes(events) == [("research", "findings", True), ("counter", "total", True)]


def test_an_attempt_cut_after_a_steps_write_applies_only_the_later_writes(tmp_path: Path) -> None:
    path = tmp_path / "team.yaml"
    path.write_text(TEAM, encoding="utf-8")
    backend = MemoryJournal()
    record = JournaledRun(run_id="r1", team="wf-ws-journal", team_file=str(path), input="go")
    first, _ = _run(path, StepModel(), RunJournal(backend, record))
    entries = backend.load("r1")
    writes = [i for i, e in enumerate(entries) if e.key.kind == "workspace_write"]
    cut = next(i for i in writes if entries[i].key.invocation.endswith("research"))
    kept = entries[: cut + 1]  # as if killed right after the map's write was journaled

    again = StepModel()
    resumed, events = _run(path, again, RunJournal(backend, record, kept))
    assert again.asked == [("counter", "2"), ("writer", "Rust is fast, Go is fast (2)")]
    assert resumed.workspace == first.workspace  # the findings once: 2 items, version 1
    assert _writes(events) == [("research", "findings", True), ("counter", "total", False)]
