"""`answer_to:`: a worker's answer written to a workspace entry by declaration (no tool call), through the one change
path; the delegating agent reads a receipt, not the answer; a resumed run does not write it twice."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from teamrun.engine.durability.journal import MemoryJournal, RunJournal
from teamrun.engine.result import RunResult
from teamrun.engine.team import load_team
from teamrun.events import Event
from teamrun.store.records import JournaledRun
from teamrun.testing.scripted import ScriptedModel, delegate, tool_call

TEAM = """\
version: 1
name: answers
supervisor: lead
workspace:
  entries:
    findings:
      schema: {type: array, items: {type: string}}
      merge: append
      read: [writer]
agents:
  lead:
    model: openai/lead
    delegates_to: [researcher, writer]
    delegation: {max_concurrency: 2}
  researcher:
    model: openai/researcher
    description: Researches one subject.
    answer_to: findings
  writer:
    model: openai/writer
    description: Writes the report.
"""


def _script() -> ScriptedModel:
    return ScriptedModel(
        {
            "lead": [
                tool_call("ask_researcher", task="Rust"),
                delegate("writer", task="Write the report from the findings."),
                "The report is written.",
            ],
            "researcher": ["Rust is fast and safe."],
            "writer": [tool_call("workspace_read", entry="findings"), "Report: Rust is fast and safe."],
        }
    )


def _run(path: Path, model: ScriptedModel, journal: RunJournal) -> tuple[RunResult, list[Event]]:
    team = load_team(path, chat_model=model)
    events: list[Event] = []
    result = asyncio.run(team.run("Compare languages", subscribers=[events.append], journal=journal))
    return result, events


def test_a_declared_answer_goes_to_the_entry_and_the_caller_reads_where(tmp_path: Path) -> None:
    path = tmp_path / "team.yaml"
    path.write_text(TEAM, encoding="utf-8")
    backend = MemoryJournal()
    record = JournaledRun(run_id="r1", team="answers", team_file=str(path), input="Compare languages")
    model = _script()
    result, events = _run(path, model, RunJournal(backend, record))

    assert result.status == "done", result.error
    model.assert_complete()
    assert result.workspace["entries"]["findings"]["value"] == ["Rust is fast and safe."]  # type: ignore[index]
    (write,) = [e for e in events if e.kind == "workspace_write"]
    assert (write.agent, write.entry, write.status, write.version_after) == ("researcher", "findings", "applied", 1)
    (asked,) = [json.loads(r) for r in model.calls_of("lead")[1].tool_results]  # what the lead read
    assert "Rust is fast" not in asked["response"]
    assert "wrote its answer" in asked["response"] and "'findings' (version 1)" in asked["response"]
    assert "Rust is fast and safe." in model.calls_of("writer")[1].tool_results[0]  # the writer read it there
    assert "workspace_write_findings" not in model.calls_of("researcher")[0].tool_names  # no tool call needed

    again = ScriptedModel()  # a second attempt over the whole journal: nothing asked, nothing written again
    resumed, replayed = _run(path, again, RunJournal(backend, record, backend.load("r1")))
    assert resumed.workspace == result.workspace
    assert [e.replayed for e in replayed if e.kind == "workspace_write"] == [True]


def test_a_structured_list_answer_appends_its_items(tmp_path: Path) -> None:
    path = tmp_path / "team.yaml"
    structured = "    answer_to: findings\n    output_schema: {type: array, items: {type: string}}\n"
    text = TEAM.replace("    answer_to: findings\n", structured)
    path.write_text(text, encoding="utf-8")
    model = ScriptedModel(
        {
            "lead": [tool_call("ask_researcher", task="Rust"), "Done."],
            "researcher": ['["Rust is fast.", "Rust is safe."]'],
        }
    )
    record = JournaledRun(run_id="r2", team="answers", team_file=str(path), input="Compare languages")
    result, _ = _run(path, model, RunJournal(MemoryJournal(), record))
    assert result.status == "done", result.error
    assert result.workspace["entries"]["findings"]["value"] == ["Rust is fast.", "Rust is safe."]  # type: ignore[index]
