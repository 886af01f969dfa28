"""`accept:` checks inside a run: a failed check goes back to the agent as feedback, up to `max_attempts`."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import Any

import pytest

import teamrun
from teamrun.cli import main
from teamrun.events import AcceptCheck
from teamrun.llm.types import ModelReply, Usage
from teamrun.testing import EventRecorder
from teamrun.testing.scripted import ScriptedCall, ScriptedModel, delegate
from tests.fakeserver import FakeOpenAI, text

WRITER_TEAM = """\
version: 1
name: accept-team
supervisor: lead
agents:
  lead:
    delegates_to: [writer]
  writer:
    description: Writes the report.
    max_attempts: {max_attempts}
    accept:
      - name: cites sources
        contains: "Sources:"
      - python: reportchecks:long_enough
    {budget}
"""

CHECKS_MODULE = """\
def long_enough(answer, case):
    if case["agent"] != "writer" or not case["input"] or case["attempt"] < 1:
        return False, f"unexpected case {case}"
    return len(answer) >= 20, f"only {len(answer)} characters"
"""


def _team(tmp_path: Path, *, max_attempts: int = 3, budget: str = "") -> Path:
    (tmp_path / "reportchecks.py").write_text(CHECKS_MODULE, encoding="utf-8")
    path = tmp_path / "team.yaml"
    path.write_text(WRITER_TEAM.format(max_attempts=max_attempts, budget=budget), encoding="utf-8")
    return path


def _lead_reply(seen: list[dict[str, Any]]) -> Any:
    def step(call: ScriptedCall) -> str:
        seen.append(json.loads(call.tool_results[0]))
        return "The report is ready."

    return step


def test_a_worker_whose_first_answer_fails_a_check_answers_again_and_passes(tmp_path: Path) -> None:
    seen: list[dict[str, Any]] = []
    model = ScriptedModel(
        {
            "lead": [delegate("writer", task="write the report"), _lead_reply(seen)],
            "writer": ["Rust is fast.", "Rust is fast and safe.\nSources: the Rust book"],
        }
    )
    recorder = EventRecorder()

    result = teamrun.load_team(_team(tmp_path), chat_model=model).run_sync("report on Rust", subscribers=[recorder])

    model.assert_complete()
    assert result.status == "done" and result.warnings == []
    (delegation,) = result.delegations
    assert delegation.status == "ok" and delegation.response.endswith("Sources: the Rust book")
    assert delegation.acceptance is not None
    assert (delegation.acceptance.attempts, delegation.acceptance.passed) == (2, True)
    assert [[c["passed"] for c in attempt] for attempt in delegation.acceptance.history] == [
        [False, False],
        [True, True],
    ]
    # the second call carried the feedback: which check failed and why
    feedback = model.calls_of("writer")[1].messages[-1]
    assert feedback["role"] == "user"
    assert "acceptance check 'cites sources' (attempt 1 of 3): not found in the answer" in feedback["content"]
    # what the supervisor saw, and what --json records
    assert seen == [{"agent": "writer", "status": "ok", "response": delegation.response, "attempts": 2}]
    recorded = json.loads(json.dumps(result.as_dict()))
    assert recorded["delegations"][0]["acceptance"]["attempts"] == 2
    assert recorded["acceptance"][0]["agent_path"] == ["lead", "writer"]
    events = [e for e in recorder.events if isinstance(e, AcceptCheck)]
    assert [(e.status, e.attempt, e.check, e.source) for e in events] == [
        ("retry", 1, "cites sources", "agents.writer.accept"),
        ("passed", 2, None, None),
    ]
    assert all(e.agent_path == ("lead", "writer") for e in events)


def test_a_worker_that_never_passes_delivers_what_it_has_with_the_attempts_recorded(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    team = _team(tmp_path, max_attempts=2)

    code = main(["execute", str(team), "-i", "report on Rust", "--model", "offline", "--json"])

    captured = capsys.readouterr()
    out = json.loads(captured.out)
    assert "writer: accept: attempt 1/2 failed cites sources: not found in the answer, answering again" in captured.err
    assert code == 0 and out["status"] == "done" and out["final_text"]
    (delegation,) = out["delegations"]
    assert delegation["status"] == "ok" and delegation["response"]
    accepted = delegation["acceptance"]
    assert (accepted["attempts"], accepted["max_attempts"], accepted["passed"]) == (2, 2, False)
    assert accepted["failed_check"] == "cites sources" and accepted["stopped_by"] is None
    assert len(accepted["history"]) == 2
    assert "accept: writer failed cites sources: not found in the answer after 2 attempts" in out["warnings"]


def test_budget_exhaustion_stops_the_attempts(tmp_path: Path) -> None:
    seen: list[dict[str, Any]] = []
    model = ScriptedModel(
        {
            "lead": [delegate("writer", task="write the report"), _lead_reply(seen)],
            "writer": ["one", "two", "three: what I have"],  # two checked answers, then the last turn
        }
    )
    team = _team(tmp_path, max_attempts=5, budget="budget: {max_steps: 2}")

    result = teamrun.load_team(team, chat_model=model).run_sync("report on Rust")

    model.assert_complete()
    (delegation,) = result.delegations
    assert delegation.status == "budget_exhausted" and delegation.response == "three: what I have"
    assert delegation.acceptance is not None
    assert delegation.acceptance.attempts == 2 and not delegation.acceptance.passed
    assert delegation.acceptance.stopped_by == "agents.writer.budget.max_steps (2)"
    assert seen[0]["attempts"] == 2 and seen[0]["accept_failed"] == "cites sources: not found in the answer"
    assert any(
        w.startswith("accept: writer failed") and "stopped by agents.writer.budget.max_steps" in w
        for w in result.warnings
    )


def _judge_by_content(request: dict[str, Any]) -> Any:
    answer = request["messages"][-1]["content"].split("Answer to grade:", 1)[1]
    good = "Go" in answer
    return text(json.dumps({"score": 0.9 if good else 0.3, "reason": "compares both" if good else "Go is missing"}))


def test_the_team_final_answer_is_checked_by_a_judge_on_the_fake_server(
    fake_openai: FakeOpenAI, write_team: Any
) -> None:
    fake_openai.script("lead", [text("Rust is fast."), text("Rust is fast; Go compiles faster.")])
    fake_openai.handler("judge", _judge_by_content)
    path = write_team(f"""\
        supervisor: lead
        accept:
          - judge: {{rubric: "The answer compares Rust with Go.", model: openai/judge,
                     api_base: "{fake_openai.url}", api_key_env: TEAMRUN_TEST_KEY, threshold: 0.7}}
        agents:
          lead: {{model: openai/lead}}
        """)
    recorder = EventRecorder()

    result = teamrun.load_team(path).run_sync("Compare Rust and Go", subscribers=[recorder])

    fake_openai.assert_complete()
    assert result.status == "done" and result.final_text == "Rust is fast; Go compiles faster."
    (record,) = result.acceptance
    assert (record.agent, record.attempts, record.passed) == ("lead", 2, True)
    assert record.history[0][0]["score"] == 0.3 and record.history[1][0]["score"] == 0.9
    judged = fake_openai.requests("judge")
    assert len(judged) == 2 and "Compare Rust and Go" in judged[0].request["messages"][-1]["content"]
    second = fake_openai.requests("lead")[1].request["messages"][-1]["content"]
    assert "judge openai/judge >= 0.7" in second and "score 0.3 (< 0.7): Go is missing" in second
    # the judge's calls are spent inside the run's budgets: counted in the run's usage, as model calls
    assert result.usage.requests == len(fake_openai.requests()) == 4
    judge_calls = [e for e in recorder.of_kind("llm_start") if getattr(e, "model", "") == "openai/judge"]
    assert len(judge_calls) == 2
    statuses = [e.status for e in recorder.events if isinstance(e, AcceptCheck)]
    assert statuses == ["retry", "passed"]


def test_validate_reports_accept_mistakes_with_their_place(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "team.yaml"
    path.write_text(
        textwrap.dedent("""\
        version: 1
        name: t
        supervisor: lead
        agents:
          lead:
            max_attempts: 2
            accept:
              - regex: "(["
              - python: not-a-path
              - length: 3
        """),
        encoding="utf-8",
    )

    assert main(["validate", str(path)]) == 2

    out = capsys.readouterr().out
    assert f"{path}:8:16: error: agents.lead.accept[0].regex is not a valid regular expression" in out
    assert f"{path}:9:17: error: agents.lead.accept[1].python: 'not-a-path' is not a Python import path" in out
    assert f"{path}:10:9: error: unknown key 'length' in agents.lead.accept[2]" in out


def test_the_example_team_runs_offline_with_both_kinds_of_checks() -> None:
    team = teamrun.load_team(Path(__file__).resolve().parents[2] / "examples" / "acceptance" / "team.yaml", environ={})

    result = team.run_sync("A release note for version 2.0")

    assert result.status == "done" and result.warnings == []
    assert [(a.agent, a.attempts, a.passed) for a in result.acceptance] == [("writer", 1, True), ("editor", 1, True)]
    assert [c["name"] for c in result.acceptance[1].history[0]] == ["judge offline >= 0.0"]


def test_a_judge_is_scripted_under_its_own_key_and_sees_the_task(tmp_path: Path) -> None:
    path = tmp_path / "team.yaml"
    path.write_text(
        textwrap.dedent("""\
        version: 1
        name: solo
        supervisor: lead
        max_attempts: 2
        accept:
          - judge: {rubric: Names two languages., model: my-judge}
        agents:
          lead: {}
        """),
        encoding="utf-8",
    )
    model = ScriptedModel(
        {
            "lead": ["Rust.", "Rust and Go."],
            "accept:judge": ['{"score": 0.1, "reason": "one language"}', '{"score": 1, "reason": "two"}'],
        }
    )

    result = teamrun.load_team(path, chat_model=model).run_sync("Name two languages")

    model.assert_complete()
    assert result.final_text == "Rust and Go." and result.acceptance[0].passed
    judge_calls = model.calls_of("accept:judge")
    assert [c.agent_path for c in judge_calls] == [("lead", "accept:judge")] * 2
    assert [c.turn for c in judge_calls] == [1, 2] and judge_calls[0].settings.model == "my-judge"
    assert "Task given to the assistant:\nName two languages" in judge_calls[0].messages[-1]["content"]


def test_max_attempts_without_checks_is_a_located_warning(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "team.yaml"
    path.write_text("version: 1\nname: t\nsupervisor: lead\nagents:\n  lead:\n    max_attempts: 2\n", encoding="utf-8")

    assert main(["validate", str(path)]) == 0
    assert main(["validate", "--strict", str(path)]) == 2

    out = capsys.readouterr().out
    assert f"{path}:6:5: warning: agents.lead.max_attempts has no effect without agents.lead.accept checks" in out


def _judge_down(call: ScriptedCall) -> str:
    from teamrun.errors import RunError

    raise RunError("model 'my-judge' failed: could not connect")


@pytest.mark.parametrize(
    ("judge_step", "detail"),
    [
        (_judge_down, "the judge failed: model 'my-judge' failed: could not connect"),
        ("Looks great to me!", "the judge's reply has no score: Looks great to me!"),
    ],
)
def test_a_judge_that_cannot_judge_does_not_send_the_agent_back(judge_step: Any, detail: str, tmp_path: Path) -> None:
    """The answer was not judged: answering again cannot fix that, so the agent is not asked to
    (no feedback about a broken judge, no attempts spent); the answer is delivered with a warning."""
    path = tmp_path / "team.yaml"
    path.write_text(
        textwrap.dedent("""\
        version: 1
        name: solo
        supervisor: lead
        max_attempts: 3
        accept:
          - judge: {rubric: Names two languages., model: my-judge}
        agents:
          lead: {}
        """),
        encoding="utf-8",
    )
    model = ScriptedModel({"lead": ["Rust and Go."], "accept:judge": [judge_step]})

    result = teamrun.load_team(path, chat_model=model).run_sync("Name two languages")

    model.assert_complete()  # the lead answered once, the judge was asked once
    assert (result.status, result.final_text) == ("done", "Rust and Go.")
    (record,) = result.acceptance
    assert (record.attempts, record.passed, record.detail) == (1, False, detail)
    assert result.warnings == [f"accept: lead failed judge my-judge >= 0.7: {detail} after 1 attempt"]


@pytest.mark.parametrize(("defaults", "expected"), [("defaults: {model: team-model}\n", "team-model"), ("", "offline")])
def test_a_judge_without_a_model_uses_the_team_default(tmp_path: Path, defaults: str, expected: str) -> None:
    path = tmp_path / "team.yaml"
    path.write_text(
        "version: 1\nname: solo\nsupervisor: lead\n"
        + defaults
        + "accept:\n  - judge: {rubric: Names a language.}\nagents:\n  lead: {}\n",
        encoding="utf-8",
    )
    model = ScriptedModel({"lead": ["Rust."], "accept:judge": ['{"score": 1, "reason": "ok"}']})

    assert main(["validate", "--strict", str(path)]) == 0
    result = teamrun.load_team(path, chat_model=model).run_sync("Name a language")

    model.assert_complete()
    assert result.acceptance[0].passed
    assert [c.settings.model for c in model.calls_of("accept:judge")] == [expected]


# -- a limit reached at the judge --------------------------------------------------------------------

JUDGED_UNDER_A_LIMIT = """\
version: 1
name: judged
supervisor: lead
limits: {{max_total_tokens: {tokens}}}
max_attempts: 3
accept:
  - judge: {{rubric: Names two languages., model: my-judge}}
agents:
  lead: {{}}
"""


def test_a_token_limit_that_refuses_the_judge_ends_the_run_budget_exhausted_through_the_cli(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The offline lead's first answer uses up max_total_tokens: the judge is not asked, the answer is
    delivered unchecked, and the run ends budget_exhausted (exit 3), as a limit reached anywhere else does."""
    path = tmp_path / "team.yaml"
    path.write_text(JUDGED_UNDER_A_LIMIT.format(tokens=1).replace("model: my-judge", "model: offline"), "utf-8")

    code = main(["execute", str(path), "-i", "Name two languages", "--progress", "none", "--json"])

    shown = json.loads(capsys.readouterr().out)
    assert (code, shown["status"], shown["stopped_by"]) == (3, "budget_exhausted", "limits.max_total_tokens (1)")
    assert shown["final_text"].startswith("[offline simulation] Task: Name two languages")
    (record,) = shown["acceptance"]
    assert (record["attempts"], record["passed"], record["stopped_by"]) == (1, False, "limits.max_total_tokens (1)")
    assert shown["usage"]["requests"] == 1  # no judge call, and no extra turn past the used-up limit


def test_a_worker_whose_judge_is_refused_by_the_run_limit_ends_budget_exhausted_and_so_does_the_run(
    tmp_path: Path,
) -> None:
    path = tmp_path / "team.yaml"
    path.write_text(
        textwrap.dedent("""\
        version: 1
        name: judged-worker
        supervisor: lead
        limits: {max_total_tokens: 1000}
        agents:
          lead:
            delegates_to: [writer]
          writer:
            description: Writes.
            accept:
              - judge: {rubric: Names two languages., model: my-judge}
        """),
        encoding="utf-8",
    )
    heavy = ModelReply(text="Rust and Go.", usage=Usage(900, 200, 1), finish_reason="stop")
    model = ScriptedModel(
        {
            "lead": [delegate("writer", task="name two languages"), "Rust and Go, as the writer said."],
            "writer": [heavy],
        }
    )
    events = EventRecorder()

    result = teamrun.load_team(path, chat_model=model).run_sync("Name two languages", subscribers=[events])

    model.assert_complete()  # no judge call
    (delegation,) = result.delegations
    assert (delegation.status, delegation.response) == ("budget_exhausted", "Rust and Go.")
    assert delegation.error == "limits.max_total_tokens (1000)"
    assert (result.status, result.stopped_by) == ("budget_exhausted", "limits.max_total_tokens (1000)")
    assert result.final_text == "Rust and Go, as the writer said."  # the lead's last turn
    budget = [e for e in events.events if e.kind == "budget"]
    assert [(e.agent, e.data.get("limit")) for e in budget] == [
        ("writer", "limits.max_total_tokens"),  # its judge refused
        ("lead", "limits.max_total_tokens"),  # its next turn refused: the last turn
    ]


def test_a_judge_whose_own_call_uses_up_the_limit_and_fails_the_answer_ends_the_run_budget_exhausted(
    tmp_path: Path,
) -> None:
    """The judge graded (its call went past the limit) and failed the answer: no attempt is left to pay for,
    the agent gets its last turn, and the run ends budget_exhausted."""
    path = tmp_path / "team.yaml"
    path.write_text(JUDGED_UNDER_A_LIMIT.format(tokens=1000), encoding="utf-8")
    verdict = ModelReply(
        text='{"score": 0.1, "reason": "one language"}', usage=Usage(900, 200, 1), finish_reason="stop"
    )
    model = ScriptedModel({"lead": ["Rust.", "Rust, and I ran out."], "accept:judge": [verdict]})

    result = teamrun.load_team(path, chat_model=model).run_sync("Name two languages")

    model.assert_complete()
    assert (result.status, result.stopped_by) == ("budget_exhausted", "limits.max_total_tokens (1000)")
    assert result.final_text == "Rust, and I ran out."
