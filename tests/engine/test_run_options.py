"""A run's own approver, desk and run id (``Team.run(approver=, desk=, run_id=)``), beside its limits and vars.

Each is this run's own: the team's attributes stay as they were, and two runs of one ``Team`` object at
the same time each see theirs (``teamrun serve`` runs every request this way).
"""

from __future__ import annotations

import asyncio
import textwrap
from pathlib import Path
from typing import Any

import pytest

import teamrun
from teamrun.config.models import Limits
from teamrun.engine.durability.journal import MemoryJournal, RunJournal
from teamrun.errors import UsageError
from teamrun.events import Event
from teamrun.store.journal import StoreJournal
from teamrun.store.records import JournaledRun
from teamrun.testing.scripted import ScriptedCall, ScriptedModel, tool_calls
from teamrun.tools.people import Answer, AskSite, PendingItem, UnattendedDesk

TEAM = """\
    version: 1
    name: options
    supervisor: lead
    vars: {lang: English}
    limits: {max_steps: 5}
    agents:
      lead:
        instructions: "Answer in {{ vars.lang }}."
        tools: [guarded, ask_ops]
    tools:
      guarded:
        python: run_options_tools:guarded
        require_approval: true
      ask_ops: {person: {}}
    """

TOOLS = '''\
def guarded(note: str) -> str:
    """Do something that needs approval."""
    return f"guarded ran ({note})"
'''


def _team_file(tmp_path: Path) -> Path:
    (tmp_path / "run_options_tools.py").write_text(TOOLS, encoding="utf-8")
    path = tmp_path / "team.yaml"
    path.write_text(textwrap.dedent(TEAM), encoding="utf-8")
    return path


class Approvals:
    """An approver that says yes and remembers what it was asked; with ``meet``, it answers only once
    every approver sharing that list was asked (so the runs asking overlap)."""

    def __init__(self, name: str, meet: tuple[list[str], int, asyncio.Event] | None = None) -> None:
        self.name = name
        self.asked: list[tuple[str, dict[str, Any]]] = []
        self.meet = meet

    async def approve(self, tool: str, arguments: dict[str, Any]) -> bool:
        self.asked.append((tool, dict(arguments)))
        if self.meet is not None:
            arrived, expected, everyone = self.meet
            arrived.append(self.name)
            if len(arrived) == expected:
                everyone.set()
            await asyncio.wait_for(everyone.wait(), timeout=60)  # a guard against a hang, not a measurement
        return True


class Desk:
    """A person who answers every question with their own name."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.asked: list[tuple[str, str]] = []

    async def ask(self, item: PendingItem, site: AskSite) -> Answer:
        self.asked.append((site.run_id, item.question))
        return Answer(f"{self.name} says go", self.name)


def _lang(call: ScriptedCall) -> str:
    return str(call.messages[0]["content"]).removeprefix("Answer in ").split(".")[0]


def _ask_both_then_answer(call: ScriptedCall) -> Any:
    """Turn one calls the guarded tool and asks a person (both naming the run's language); then answers."""
    lang = _lang(call)
    if not call.tool_results:
        return tool_calls(("guarded", {"note": lang}), ("ask_ops", {"question": f"ship in {lang}?"}))
    return f"{lang}: " + " | ".join(call.tool_results)


def test_the_approver_and_desk_given_to_a_run_are_asked_and_the_teams_are_not(tmp_path: Path) -> None:
    model = ScriptedModel({"lead": [_ask_both_then_answer] * 2})
    own_approver = Approvals("team")
    team = teamrun.load_team(_team_file(tmp_path), chat_model=model, approver=own_approver)
    own_desk = team.desk
    approver, desk = Approvals("run"), Desk("ana")

    result = team.run_sync("go", approver=approver, desk=desk)

    model.assert_complete()
    assert result.status == "done", result.error
    assert approver.asked == [("guarded", {"note": "English"})] and own_approver.asked == []
    assert desk.asked == [(result.run_id, "ship in English?")]
    assert "guarded ran (English)" in result.final_text and "ana says go" in result.final_text
    assert team.approver is own_approver and team.desk is own_desk and isinstance(own_desk, UnattendedDesk)


def test_without_them_a_run_asks_the_teams_own_approver_and_desk(tmp_path: Path) -> None:
    model = ScriptedModel({"lead": [_ask_both_then_answer] * 2})
    own_approver = Approvals("team")
    team = teamrun.load_team(_team_file(tmp_path), chat_model=model, approver=own_approver)
    team.desk = Desk("terminal")

    result = team.run_sync("go")

    model.assert_complete()
    assert own_approver.asked == [("guarded", {"note": "English"})]
    assert "guarded ran (English)" in result.final_text and "terminal says go" in result.final_text


def test_two_runs_of_one_team_at_once_each_see_their_own_approver_desk_vars_and_limits(tmp_path: Path) -> None:
    model = ScriptedModel({"lead": [_ask_both_then_answer] * 4})
    own_approver = Approvals("team")
    team = teamrun.load_team(_team_file(tmp_path), chat_model=model, approver=own_approver)
    own_desk, own_config, own_vars = team.desk, team.config, dict(team.vars)
    meet: tuple[list[str], int, asyncio.Event] = ([], 2, asyncio.Event())
    french, german = Approvals("french", meet), Approvals("german", meet)
    desk_fr, desk_de = Desk("amelie"), Desk("bernd")

    async def both() -> tuple[teamrun.RunResult, teamrun.RunResult]:
        return await asyncio.gather(
            team.run("go", approver=french, desk=desk_fr, vars={"lang": "French"}, limits=Limits(max_steps=1)),
            team.run("go", approver=german, desk=desk_de, vars={"lang": "German"}),
        )

    fr, de = asyncio.run(both())

    model.assert_complete()
    # each approver waited until the other was asked: the two runs were in progress at once
    assert sorted(meet[0]) == ["french", "german"]
    assert french.asked == [("guarded", {"note": "French"})] and german.asked == [("guarded", {"note": "German"})]
    assert desk_fr.asked == [(fr.run_id, "ship in French?")] and desk_de.asked == [(de.run_id, "ship in German?")]
    assert fr.final_text == "French: guarded ran (French) | amelie says go"
    assert de.final_text == "German: guarded ran (German) | bernd says go"
    assert fr.status == "budget_exhausted" and fr.stopped_by == "agents.lead.budget.max_steps (1)"
    assert fr.limits_in_force["limits"] == {"max_steps": 1}
    assert de.status == "done" and de.limits_in_force["limits"] == {"max_steps": 5}
    assert own_approver.asked == []
    assert team.approver is own_approver and team.desk is own_desk
    assert team.config is own_config and team.vars == own_vars == {"lang": "English"}


def test_a_run_takes_the_run_id_it_is_given_for_its_result_events_and_record(tmp_path: Path) -> None:
    model = ScriptedModel({"lead": ["Hello.", "Again."]})
    team = teamrun.load_team(_team_file(tmp_path), chat_model=model, store=tmp_path / "runs.db")
    events: list[Event] = []

    plain = team.run_sync("hi", run_id="run_given_1", subscribers=[events.append])
    journaled = team.run_sync("hi", run_id="run_given_2", journal=True, vars={"lang": "French"})

    assert plain.run_id == "run_given_1" and {e.run_id for e in events} == {"run_given_1"}
    assert (events[0].kind, events[-1].kind) == ("run_start", "run_end")

    record = StoreJournal(team.store).get_run("run_given_2")
    assert journaled.run_id == "run_given_2"
    assert record is not None and record.status == "done" and record.vars == {"lang": "French"}


def test_a_run_id_other_than_its_journals_is_refused(tmp_path: Path) -> None:
    team = teamrun.load_team(_team_file(tmp_path), chat_model=ScriptedModel())
    record = JournaledRun(run_id="r1", team="options", team_file=str(tmp_path / "team.yaml"), input="hi")

    with pytest.raises(UsageError, match="run_id='r2' differs from the journal's run id 'r1'"):
        team.run_sync("hi", run_id="r2", journal=RunJournal(MemoryJournal(), record))


def test_a_resumed_run_keeps_the_limits_it_was_started_with(tmp_path: Path) -> None:
    """A run's own limits are kept in its record: resuming it without limits runs under them again."""
    from teamrun.engine.durability.resume import open_resume

    model = ScriptedModel({"lead": ["Hello.", "Hello again."]})
    team = teamrun.load_team(_team_file(tmp_path), chat_model=model, store=tmp_path / "runs.db")

    first = team.run_sync("hi", journal=True, limits=Limits(max_steps=2, max_total_tokens=900))
    record = StoreJournal(team.store).get_run(first.run_id)
    assert record is not None and record.limits == {"max_steps": 2, "max_total_tokens": 900}

    resumed = team.run_sync("hi", journal=open_resume(StoreJournal(team.store), first.run_id))
    assert resumed.limits_in_force["limits"] == {"max_steps": 2, "max_total_tokens": 900}
    again = StoreJournal(team.store).get_run(first.run_id)
    assert again is not None and again.attempts == 2 and again.limits == {"max_steps": 2, "max_total_tokens": 900}
