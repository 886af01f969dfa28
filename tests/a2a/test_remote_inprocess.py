"""A supervisor delegating to a remote worker, in process: the team runs on the scripted model and the remote
agent is a fake A2A agent (tests/a2a/fake_agent.py) handed to the worker instead of a2a-sdk's HTTP client.

What the run makes of the remote task: the delegation record and its usage (never a pretended 0), the journal's
typed remote entries and a resume that answers from them, a question asked of a person once."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import teamrun
from teamrun.cli import main
from teamrun.engine.durability.journal import MemoryJournal, RunJournal
from teamrun.engine.durability.remote_entries import read_answer, read_started
from teamrun.engine.remote import worker
from teamrun.events import Event
from teamrun.store.records import JournaledRun
from teamrun.testing.scripted import ScriptedModel, delegate
from teamrun.tools.people import Answer, AskSite, PendingItem
from tests.a2a.fake_agent import FakeAgent, artifact, snapshot, status

TEAM = """\
version: 1
name: remote-in-process
supervisor: lead
agents:
  lead: {model: openai/lead, description: Leads., delegates_to: [researcher]}
  researcher:
    description: Looks up facts.
    a2a: {url: "http://127.0.0.1:9"}
"""
QUESTION = "Which year should the report cover?"


@pytest.fixture
def team_file(tmp_path: Path) -> Path:
    path = tmp_path / "team.yaml"
    path.write_text(TEAM, encoding="utf-8")
    return path


@pytest.fixture
def remote(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[FakeAgent]]:
    """``remote.append(FakeAgent(...))``: the agent the next delegation to ``researcher`` speaks to."""
    agents: list[FakeAgent] = []

    async def connect(*args: Any) -> Any:
        assert agents, "a delegation to the remote agent past the test's agents"
        return await agents.pop(0).connect(*args)

    monkeypatch.setattr(worker, "open_client", connect)
    yield agents
    assert agents == [], "a remote agent the run never spoke to"


def _lead() -> ScriptedModel:
    return ScriptedModel({"lead": [delegate("researcher", task="Find facts about Rust"), "Report done."]})


def _run(team_file: Path, model: ScriptedModel, **kwargs: Any) -> teamrun.RunResult:
    return asyncio.run(teamrun.load_team(team_file, chat_model=model).run("Rust?", **kwargs))


class _Person:
    """Answers every question with the next of ``answers``."""

    def __init__(self, *answers: str) -> None:
        self.answers = list(answers)
        self.asked: list[str] = []

    async def ask(self, item: PendingItem, site: AskSite) -> Answer:
        self.asked.append(item.question)
        assert self.answers, f"asked past the script: {item.question!r}"
        return Answer(self.answers.pop(0), "test")


def test_a_remote_answer_is_the_delegations_response(team_file: Path, remote: list[FakeAgent]) -> None:
    agent = FakeAgent([[snapshot("t1", "working"), artifact("t1", "Rust is fast."), status("t1", "completed")]])
    remote.append(agent)
    events: list[Event] = []

    result = _run(team_file, _lead(), subscribers=[events.append])

    assert result.status == "done", result.error
    (record,) = result.delegations
    assert (record.status, record.response) == ("ok", "Rust is fast.")
    assert agent.texts == ["Find facts about Rust"]
    updates = [e.data["state"] for e in events if e.kind == "remote_update"]
    assert updates == ["working", "working", "completed"]


@pytest.mark.parametrize(
    ("updates", "status_said"),
    [
        ([snapshot("t1", "failed", said="quota exceeded")], "error"),
        ([snapshot("t1", "rejected", said="not my field")], "error"),
        ([status("t1", "auth-required")], "error"),
    ],
)
def test_a_remote_worker_that_fails_has_unknown_usage_not_zero(
    team_file: Path, remote: list[FakeAgent], updates: list[Any], status_said: str
) -> None:
    """Issue 42 item 8: the delegation record and the run's totals say the usage is unknown (was usage 0, cost
    0.0, while the agent entry said usage_known: false)."""
    remote.append(FakeAgent([updates]))

    result = _run(team_file, _lead())

    (record,) = result.delegations
    assert record.status == status_said
    shown = result.as_dict()
    (delegation,) = shown["delegations"]
    assert delegation["usage"] is None and delegation["cost"] is None and delegation["usage_known"] is False
    assert shown["agents"]["researcher"]["usage_known"] is False
    assert shown["usage_known"] is False  # the run's totals count only what is known, and say so


def test_a_remote_worker_that_times_out_has_unknown_usage(tmp_path: Path, remote: list[FakeAgent]) -> None:
    path = tmp_path / "team.yaml"
    path.write_text(TEAM + "    budget: {timeout_s: 0.2}\n", encoding="utf-8")
    never = asyncio.Event()

    class Hanging(FakeAgent):
        async def send_message(self, request: Any) -> Any:
            self.sent.append(request.message)
            yield snapshot("t1", "working")
            await never.wait()  # the task works on and on: the worker's budget.timeout_s ends it

    agent = Hanging()
    remote.append(agent)

    result = _run(path, _lead())

    (record,) = result.delegations
    assert record.status == "budget_exhausted" and record.timed_out
    assert record.as_dict()["usage"] is None and record.as_dict()["usage_known"] is False
    assert agent.cancels == ["t1"]  # not left working for nobody


def test_reported_usage_is_counted_and_known(team_file: Path, remote: list[FakeAgent]) -> None:
    usage = {"prompt_tokens": 11, "completion_tokens": 5, "cost_usd": 0.002}
    remote.append(FakeAgent([[snapshot("t1", "completed", artifacts=["facts"], usage=usage)]]))

    result = _run(team_file, _lead())

    shown = result.as_dict()
    (delegation,) = shown["delegations"]
    assert delegation["usage"]["input_tokens"] == 11 and delegation["cost"] == 0.002
    assert "usage_known" not in delegation and "usage_known" not in shown


def test_the_remote_task_is_journaled_in_typed_entries_and_a_resume_answers_from_them(
    team_file: Path, remote: list[FakeAgent]
) -> None:
    backend = MemoryJournal()
    record = JournaledRun(run_id="r1", team="remote-in-process", team_file=str(team_file), input="Rust?")
    remote.append(FakeAgent([[snapshot("t1", "completed", artifacts=["Rust is fast."])]]))

    first = _run(team_file, _lead(), journal=RunJournal(backend, record))

    assert first.status == "done", first.error
    entries = {entry.key.kind: entry for entry in backend.load("r1") if entry.key.kind.startswith("remote")}
    assert read_started(entries["remote_start"]).task_id == "t1"
    assert read_answer(entries["remote"]).text == "Rust is fast."

    again = RunJournal(backend, record, backend.load("r1"))
    replayed = _run(team_file, _lead(), journal=again)  # no remote agent: nothing is sent again

    assert replayed.delegations[0].response == "Rust is fast."


def test_a_stale_snapshot_after_an_answer_does_not_ask_the_person_again(
    team_file: Path, remote: list[FakeAgent]
) -> None:
    """Issue 42 item 9, the whole way: the person answers once; the answer the task completes with is the run's."""
    agent = FakeAgent(
        [
            [snapshot("t1", "input-required", said=QUESTION)],
            [snapshot("t1", "input-required", said=QUESTION)],  # the stored task, as the JavaScript SDK starts
        ],
        tasks=[snapshot("t1", "completed", artifacts=["Rust in 2024."]).task],
        streaming=False,
    )
    remote.append(agent)
    person = _Person("2024")

    result = _run(team_file, _lead(), desk=person)

    assert person.asked == [QUESTION]
    assert agent.texts == ["Find facts about Rust", "2024"]
    assert result.delegations[0].response == "Rust in 2024."


def test_json_of_a_failed_remote_worker_says_its_usage_is_unknown(
    team_file: Path, remote: list[FakeAgent], capsys: pytest.CaptureFixture[str]
) -> None:
    """``teamrun execute --json``: the delegation record, the agent entry and the run's totals."""
    remote.append(FakeAgent([[snapshot("t1", "failed", said="quota exceeded")]]))

    code = main(["execute", str(team_file), "-i", "Rust?", "--model", "offline", "--json", "--no-journal"])

    shown = json.loads(capsys.readouterr().out)
    assert code == 0, shown
    (delegation,) = shown["delegations"]
    assert delegation["status"] == "error" and "quota exceeded" in delegation["error"]
    assert (delegation["usage"], delegation["cost"], delegation["usage_known"]) == (None, None, False)
    assert shown["agents"]["researcher"]["usage"] is None and shown["usage_known"] is False
