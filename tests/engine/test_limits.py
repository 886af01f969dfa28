"""Limits that end a run for sure (issue 11): run-level limits stop every agent, refusals stop the
agent that asked, a default step limit, honest last turns, truncated and empty answers, name clashes."""

from __future__ import annotations

import json
import textwrap
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

import teamrun
from teamrun.cli import main
from teamrun.defaults import DEFAULT_MAX_STEPS, DEFAULT_MAX_TOKENS
from teamrun.llm.types import ModelReply, Usage
from teamrun.testing import ScriptedModel, tool_call
from tests.fakeserver import FakeOpenAI, text, tool_calls


def _stopped(request: dict[str, Any]) -> bool:
    return "STOP:" in str(request["messages"][-1].get("content") or "")


def test_a_run_level_tool_call_limit_hit_by_workers_ends_the_whole_run(
    fake_openai: FakeOpenAI, write_team: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    fake_openai.handler(
        "lead", lambda r: text("lead: partial") if _stopped(r) else tool_calls(("ask_helper", {"task": "look again"}))
    )
    fake_openai.handler(
        "helper", lambda r: text("helper: what I found") if _stopped(r) else tool_calls(("echo", {"word": "x"}))
    )
    path = write_team("""\
        supervisor: lead
        limits: {max_tool_calls: 2}
        agents:
          lead: {model: openai/lead, delegates_to: [helper], budget: {max_steps: 10}}
          helper: {model: openai/helper, description: H., tools: [echo]}
        tools:
          echo: {command: ["echo", "{{ word }}"], parameters: {word: {type: string}}}
        """)

    code = main(["execute", str(path), "-i", "fan out", "--json"])

    result = json.loads(capsys.readouterr().out)
    assert code == 3
    assert result["status"] == "budget_exhausted"
    assert result["stopped_by"] == "limits.max_tool_calls (2)"
    assert result["final_text"] == "lead: partial"
    # the 3rd tool call is refused; its worker answers; the lead then gets only its last turn
    assert result["agents"]["helper"]["tool_calls"] == 2
    assert [d["status"] for d in result["delegations"]] == ["budget_exhausted"]
    assert len(fake_openai.requests("lead")) == 2  # one delegation, then its last turn
    assert _stopped(fake_openai.requests("lead")[-1].request)


def test_a_used_up_delegation_limit_does_not_stop_a_worker_already_running(
    fake_openai: FakeOpenAI, write_team: Any
) -> None:
    fake_openai.script(
        "lead",
        [
            tool_calls(("ask_alpha", {"task": "a"}), ("ask_beta", {"task": "b"})),
            text("lead: alpha's answer only"),  # its last turn: beta was refused
        ],
    )
    fake_openai.script("alpha", [tool_calls(("echo", {"word": "x"})), text("alpha done")])
    team = teamrun.load_team(
        write_team("""\
        supervisor: lead
        limits: {max_delegations: 1}
        agents:
          lead: {model: openai/lead, delegates_to: [alpha, beta]}
          alpha: {model: openai/alpha, description: A., tools: [echo]}
          beta: {model: openai/beta, description: B.}
        tools:
          echo: {command: ["echo", "{{ word }}"], parameters: {word: {type: string}}}
        """)
    )

    result = team.run_sync("go")

    assert result.status == "budget_exhausted" and result.stopped_by == "limits.max_delegations (1)"
    by_agent = {d.agent: d for d in result.delegations}
    assert by_agent["alpha"].status == "ok" and by_agent["alpha"].response == "alpha done"
    assert by_agent["beta"].status == "rejected"
    fake_openai.assert_complete()


def test_a_depth_refusal_stops_the_agent_that_keeps_asking(fake_openai: FakeOpenAI, write_team: Any) -> None:
    fake_openai.handler(
        "lead",
        lambda r: text("lead done") if r["messages"][-1]["role"] == "tool" else tool_calls(("ask_mid", {"task": "t"})),
    )
    fake_openai.handler(
        "mid",
        lambda r: text("mid answers without leaf") if _stopped(r) else tool_calls(("ask_leaf", {"task": "deeper"})),
    )
    team = teamrun.load_team(
        write_team("""\
        supervisor: lead
        agents:
          lead: {model: openai/lead, delegates_to: [mid], budget: {max_depth: 1}}
          mid: {model: openai/mid, description: M., delegates_to: [leaf], budget: {max_steps: 10}}
          leaf: {model: openai/leaf, description: L.}
        """)
    )

    result = team.run_sync("go")

    assert result.status == "done" and result.final_text == "lead done"
    assert len(fake_openai.requests("mid")) == 2  # one refused delegation, then its last turn
    by_agent = {d.agent: d for d in result.delegations}
    assert by_agent["leaf"].status == "rejected"
    assert by_agent["mid"].status == "ok" and by_agent["mid"].response == "mid answers without leaf"
    assert "agents.lead.budget.max_depth (1) has been reached" in str(
        fake_openai.requests("mid")[-1].request["messages"][-1]["content"]
    )


def test_without_limits_a_looping_model_stops_at_the_default_step_limit(
    fake_openai: FakeOpenAI, write_team: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    calls = {"n": 0}

    def loop(request: dict[str, Any]) -> Any:
        calls["n"] += 1
        if _stopped(request):
            return text("stopped by the default")
        return text("gave up by itself") if calls["n"] > 40 else tool_calls(("echo", {"word": "again"}))

    fake_openai.handler("solo", loop)
    path = write_team("""\
        supervisor: solo
        agents:
          solo: {model: openai/solo, tools: [echo]}
        tools:
          echo: {command: ["echo", "{{ word }}"], parameters: {word: {type: string}}}
        """)

    code = main(["execute", str(path), "-i", "loop", "--json"])

    result = json.loads(capsys.readouterr().out)
    assert code == 3 and result["status"] == "budget_exhausted"
    assert result["stopped_by"].startswith(f"agents.solo.budget.max_steps ({DEFAULT_MAX_STEPS}, teamrun's default")
    assert result["final_text"] == "stopped by the default"
    assert len(fake_openai.requests("solo")) == DEFAULT_MAX_STEPS + 1
    in_force = result["limits_in_force"]
    assert in_force["defaults"]["max_steps"] == DEFAULT_MAX_STEPS
    assert in_force["defaults"]["max_tokens"] == DEFAULT_MAX_TOKENS
    assert in_force["default_max_steps_for"] == ["solo"]


SOLO = """\
version: 1
name: solo
supervisor: solo
{limits}
agents:
  solo: {{tools: [echo]}}
tools:
  echo: {{command: ["echo", "{{{{ word }}}}"], parameters: {{word: {{type: string}}}}}}
"""


def _solo(tmp_path: Path, model: ScriptedModel, limits: str = "") -> teamrun.Team:
    path = tmp_path / "team.yaml"
    path.write_text(textwrap.dedent(SOLO.format(limits=limits)), encoding="utf-8")
    return teamrun.load_team(path, chat_model=model)


def _spending(reply: ModelReply | str, input_tokens: int, output_tokens: int) -> ModelReply:
    reply = ModelReply(reply, finish_reason="stop") if isinstance(reply, str) else reply
    return replace(reply, usage=Usage(input_tokens, output_tokens, 1))


def test_the_last_turn_is_capped_and_an_overshoot_is_reported(tmp_path: Path) -> None:
    model = ScriptedModel(
        {
            "solo": [
                _spending(tool_call("echo", word="a"), 300, 100),
                _spending(tool_call("echo", word="b"), 300, 100),
                _spending("what I have", 500, 150),  # the last turn
            ]
        }
    )

    result = _solo(tmp_path, model, "limits: {max_total_tokens: 800}").run_sync("go")

    assert result.status == "budget_exhausted" and result.stopped_by == "limits.max_total_tokens (800)"
    last = model.calls_of("solo")[-1]
    assert last.tools == () and last.settings.max_tokens == 200  # nothing left: the minimum answer
    assert result.overshoot == {"limits.max_total_tokens": {"limit": 800, "used": 1450, "over": 650}}
    assert any("limits.max_total_tokens (800) was overshot: 1450 used" in w for w in result.warnings)
    assert result.as_dict()["overshoot"] == result.overshoot
    model.assert_complete()


def test_the_last_turn_gets_what_the_token_limit_leaves(tmp_path: Path) -> None:
    model = ScriptedModel(
        {
            "solo": [
                _spending(tool_call("echo", word="a"), 300, 100),
                _spending("what I have", 400, 100),  # the last turn
            ]
        }
    )

    result = _solo(tmp_path, model, "limits: {max_steps: 1, max_total_tokens: 5000}").run_sync("go")

    assert result.stopped_by == "agents.solo.budget.max_steps (1)"
    cap = model.calls_of("solo")[-1].settings.max_tokens
    assert cap is not None and 200 < cap < 5000 - 400
    assert result.overshoot == {}
    model.assert_complete()


def test_the_last_turn_gets_what_the_cost_limit_leaves_at_the_price_so_far(tmp_path: Path) -> None:
    model = ScriptedModel(
        {
            "solo": [
                replace(_spending(tool_call("echo", word="a"), 300, 100), cost_usd=0.001),
                replace(_spending(tool_call("echo", word="b"), 300, 100), cost_usd=0.001),
                _spending("what I have", 400, 100),  # the last turn
            ]
        }
    )

    result = _solo(tmp_path, model, "limits: {max_steps: 2, max_cost_usd: 0.01}").run_sync("go")

    assert result.stopped_by == "agents.solo.budget.max_steps (2)"
    cap = model.calls_of("solo")[-1].settings.max_tokens
    # $0.008 left at $0.0000025 a token: 3,200 tokens, less what the last turn sends
    assert cap is not None and 200 < cap < 3200
    model.assert_complete()


def test_an_answer_cut_off_at_the_output_limit_is_continued_once(tmp_path: Path) -> None:
    model = ScriptedModel(
        {
            "solo": [
                ModelReply("The answer is", finish_reason="length"),
                ModelReply(" 42.", finish_reason="stop"),
            ]
        }
    )

    result = _solo(tmp_path, model).run_sync("go")

    assert result.status == "done" and result.final_text == "The answer is 42."
    assert "cut off" in str(model.calls_of("solo")[1].messages[-1]["content"])
    assert result.warnings == []
    model.assert_complete()


def test_an_answer_still_cut_off_after_the_continuation_is_flagged_truncated(tmp_path: Path) -> None:
    model = ScriptedModel(
        {
            "solo": [
                ModelReply("The answer", finish_reason="length"),
                ModelReply(" is", finish_reason="length"),
            ]
        }
    )

    result = _solo(tmp_path, model).run_sync("go")

    assert result.final_text == "The answer is"
    assert any(w.startswith("truncated: solo's answer was cut off") for w in result.warnings)
    model.assert_complete()


def test_an_empty_answer_is_asked_for_again(tmp_path: Path) -> None:
    model = ScriptedModel({"solo": ["", "the real answer"]})

    result = _solo(tmp_path, model).run_sync("go")

    assert result.status == "done" and result.final_text == "the real answer"
    model.assert_complete()


def test_an_empty_answer_twice_fails_the_run_naming_the_agent(tmp_path: Path) -> None:
    model = ScriptedModel({"solo": ["", "   "]})

    result = _solo(tmp_path, model).run_sync("go")

    assert result.status == "failed"
    assert result.error == "solo gave an empty final answer, also when asked once more"
    model.assert_complete()


def test_a_user_tool_named_like_a_delegation_tool_is_refused(
    fake_openai: FakeOpenAI, write_team: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    fake_openai.script("lead", [text("would have answered")])
    path = write_team("""\
        supervisor: lead
        agents:
          lead: {model: openai/lead, delegates_to: [w], tools: [ask_w]}
          w: {model: openai/w, description: W.}
        tools:
          ask_w: {command: ["echo", "hi"]}
        """)

    code = main(["execute", str(path), "-i", "go"])

    assert code == 2
    assert "ask_w" in capsys.readouterr().err
    assert fake_openai.requests("lead") == []
