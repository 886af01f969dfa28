"""The public run API: a run's own limits and vars (Team.run(limits=, vars=)), and judge calls journaled."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

import teamrun
from teamrun.config.models import Limits
from teamrun.engine.durability.journal import MemoryJournal, RunJournal
from teamrun.errors import UsageError
from teamrun.store.records import JournaledRun
from teamrun.testing.scripted import ScriptedModel, tool_call

TEAM = """\
    version: 1
    name: api
    supervisor: lead
    vars: {lang: English}
    limits: {max_steps: 5}
    agents:
      lead:
        instructions: "Answer in {{ vars.lang }}."
        tools: [noop]
    tools:
      noop:
        python: apitools:noop
    """

TOOLS = '''\
def noop() -> str:
    """Do nothing."""
    return "ok"
'''


def _team(tmp_path: Path, body: str = TEAM) -> Path:
    (tmp_path / "apitools.py").write_text(TOOLS, encoding="utf-8")
    path = tmp_path / "team.yaml"
    path.write_text(textwrap.dedent(body), encoding="utf-8")
    return path


def test_a_run_can_lower_the_teams_limits_and_set_its_own_vars_without_changing_the_team(tmp_path: Path) -> None:
    model = ScriptedModel({"lead": [tool_call("noop"), "Fini.", tool_call("noop"), "Done."]})
    team = teamrun.load_team(_team(tmp_path), chat_model=model)

    lowered = team.run_sync("go", limits=Limits(max_steps=1), vars={"lang": "French"})
    again = team.run_sync("go")

    model.assert_complete()
    assert lowered.status == "budget_exhausted" and lowered.stopped_by == "agents.lead.budget.max_steps (1)"
    assert lowered.final_text == "Fini." and lowered.limits_in_force["limits"] == {"max_steps": 1}
    assert (
        again.status == "done" and again.final_text == "Done." and again.limits_in_force["limits"] == {"max_steps": 5}
    )
    prompts = [c.messages[0]["content"] for c in model.calls_of("lead")]
    assert prompts[0].startswith("Answer in French.") and prompts[2].startswith("Answer in English.")
    assert team.vars == {"lang": "English"} and team.config.limits is not None and team.config.limits.max_steps == 5


def test_a_run_cannot_raise_the_teams_limits(tmp_path: Path) -> None:
    team = teamrun.load_team(_team(tmp_path), chat_model=ScriptedModel())

    with pytest.raises(UsageError, match=r"limits.max_steps \(60\) is higher than the team's limits.max_steps \(5\)"):
        team.run_sync("go", limits=Limits(max_steps=60))


JUDGED = """\
    version: 1
    name: judged
    supervisor: lead
    accept:
      - judge: {rubric: Names two languages., model: my-judge}
    agents:
      lead: {}
    """


def test_judge_calls_are_journaled_and_a_resume_does_not_pay_for_them_again(tmp_path: Path) -> None:
    backend = MemoryJournal()
    record = JournaledRun(run_id="r1", team="judged", team_file=str(tmp_path / "team.yaml"), input="Name two")
    model = ScriptedModel({"lead": ["Rust and Go."], "accept:judge": ['{"score": 1, "reason": "two"}']})
    team = teamrun.load_team(_team(tmp_path, JUDGED), chat_model=model)

    first = team.run_sync("Name two", journal=RunJournal(backend, record))

    assert first.status == "done" and first.acceptance[0].passed
    kinds = [(e.key.invocation, e.key.index, e.key.kind) for e in backend.load("r1")]
    assert kinds == [("lead", 1, "model"), ("lead/accept:judge", 1, "model")]
    # the same run again from its journal: nothing is asked of the model (its script is empty now)
    replayed = team.run_sync("Name two", journal=RunJournal(backend, record, backend.load("r1")))
    model.assert_complete()
    assert replayed.status == "done" and replayed.acceptance[0].passed and replayed.final_text == "Rust and Go."


def test_a_journaled_run_records_its_own_vars_so_a_resume_gives_them_again(tmp_path: Path) -> None:
    from teamrun.store.journal import StoreJournal

    model = ScriptedModel({"lead": ["Fini."]})
    team = teamrun.load_team(_team(tmp_path), chat_model=model, store=tmp_path / "runs.db")

    result = team.run_sync("go", journal=True, vars={"lang": "French"})

    record = StoreJournal(team.store).get_run(result.run_id)
    assert record is not None and record.vars == {"lang": "French"}
