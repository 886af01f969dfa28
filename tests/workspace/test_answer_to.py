"""`answer_to:`: a worker's answer written to a workspace entry by declaration (no tool call), through the one change
path; the delegating agent reads a receipt, not the answer; a resumed run does not write it twice."""

from __future__ import annotations

import asyncio
import json
import threading
from pathlib import Path
from typing import Any

from teamrun.engine.durability.journal import MemoryJournal, RunJournal
from teamrun.engine.result import RunResult
from teamrun.engine.team import load_team
from teamrun.events import Event
from teamrun.store.records import JournaledRun
from teamrun.testing.scripted import ScriptedModel, delegate, tool_call
from tests.cli_processes import child_env, killed_run, resume
from tests.fakeserver import FakeOpenAI, Reply, text, tool_calls

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


KILLED_TEAM = """\
version: 1
name: answers
supervisor: lead
defaults: {{api_base: '{url}', api_key_env: TEAMRUN_TEST_KEY, num_retries: 0, request_timeout_s: 900}}
workspace:
  entries:
    findings:
      schema: {{type: array, items: {{type: string}}}}
      merge: append
      read: [writer]
agents:
  lead:
    model: openai/lead
    delegates_to: [researcher, writer]
  researcher:
    model: openai/researcher
    description: Researches one subject.
    answer_to: findings
  writer:
    model: openai/writer
    description: Writes the report.
"""


def _journaled_writes(store_url: str) -> int:
    """The run's journaled workspace writes (0 while the store is not created yet)."""
    import sqlalchemy as sa

    engine = sa.create_engine(store_url)
    try:
        with engine.connect() as conn:
            query = "SELECT count(*) FROM journal WHERE kind = 'workspace_write'"
            return int(conn.execute(sa.text(query)).scalar_one())
    except sa.exc.OperationalError:
        return 0
    finally:
        engine.dispose()


def test_a_declared_answer_is_written_once_across_a_kill_and_teamrun_resume(
    tmp_path: Path, fake_openai: FakeOpenAI
) -> None:
    """SIGKILL once the researcher's answer is in the entry (journaled) and the writer's call hangs; `teamrun
    resume` goes on from the journal: the researcher is not asked again, the entry holds the answer once, at
    version 1, and the lead reads the same receipt — no version handed out again."""
    hanging = threading.Event()

    def lead(request: dict[str, Any]) -> Reply:
        results = sum(1 for m in request["messages"] if m["role"] == "tool")
        if results == 0:
            return tool_calls(("ask_researcher", {"task": "Rust"}))
        if results == 1:
            return tool_calls(("ask_writer", {"task": "Write the report from the findings."}))
        return text("The report is written.")

    fake_openai.handler("lead", lead)
    fake_openai.handler("researcher", lambda _request: text("Rust is fast and safe."))
    fake_openai.handler("writer", lambda _request: text("Report: Rust.", delay=600.0 if hanging.is_set() else None))
    team = tmp_path / "team.yaml"
    team.write_text(KILLED_TEAM.format(url=fake_openai.url), encoding="utf-8")
    store_url = f"sqlite:///{tmp_path / 'teamrun.db'}"
    env = child_env(TEAMRUN_TEST_KEY="sk-test")

    hanging.set()

    def ready() -> bool:
        hung = any(r.model == "writer" and r.end == 0.0 for r in fake_openai.requests())
        return hung and _journaled_writes(store_url) == 1

    run = killed_run(team, store_url, ready, where=lambda: [r.model for r in fake_openai.requests()], env=env)
    hanging.clear()
    resumed = resume(run["run_id"], store_url, env=env)

    assert resumed.returncode == 0, resumed.stderr
    result = json.loads(resumed.stdout)
    assert result["status"] == "done" and result["final_text"] == "The report is written."
    findings = result["workspace"]["entries"]["findings"]
    assert findings["value"] == ["Rust is fast and safe."] and findings["version"] == 1
    assert result["workspace"]["version"] == 1
    assert [r.model for r in fake_openai.requests()].count("researcher") == 1  # asked once, before the kill
    assert _journaled_writes(store_url) == 1  # the resume wrote nothing again
    receipts = [str(m["content"]) for m in fake_openai.requests("lead")[-1].request["messages"] if m["role"] == "tool"]
    assert "'findings' (version 1)" in receipts[0] and "Rust is fast" not in receipts[0]
