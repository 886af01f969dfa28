"""Control: budgets, hooks, filters, references, structured output, handoffs — end to end.

Every test scripts the local OpenAI-compatible server and asserts on what the
user sees (the result, the exit code) and on what the models were sent.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import teamrun
from teamrun.cli import main
from tests.fakeserver import FakeOpenAI, hang, text, tool_calls

HERE = Path(__file__).parent


def _with_hooks(tmp_path: Path) -> None:
    shutil.copy(HERE / "team_hooks.py", tmp_path / "team_hooks.py")


def _tool_contents(server: FakeOpenAI, model: str, index: int) -> list[str]:
    messages = server.requests(model)[index].request["messages"]
    return [m["content"] for m in messages if m.get("role") == "tool"]


def _user_text(server: FakeOpenAI, model: str, index: int = 0) -> str:
    messages = server.requests(model)[index].request["messages"]
    return "\n".join(m["content"] for m in messages if m.get("role") == "user")


LEAD_AND_HELPER = """\
supervisor: lead
limits: {{max_delegations: {delegations}}}
agents:
  lead: {{model: openai/lead, delegates_to: [helper]}}
  helper: {{model: openai/helper, description: Helps.}}
"""


def test_endless_delegation_stops_at_max_delegations_with_a_partial_answer(
    fake_openai: FakeOpenAI, write_team: Any, capsys: Any
) -> None:
    fake_openai.handler(
        "lead",
        lambda request: (
            text("partial: 2 answers verified, more were not possible")
            if "STOP:" in request["messages"][-1].get("content", "")
            else tool_calls(("ask_helper", {"task": "again"}))
        ),
    )
    fake_openai.handler("helper", lambda request: text("one more answer"))
    path = write_team(LEAD_AND_HELPER.format(delegations=2))

    code = main(["execute", str(path), "-i", "keep going", "--json"])

    result = json.loads(capsys.readouterr().out)
    assert code == 3
    assert result["status"] == "budget_exhausted"
    assert result["stopped_by"] == "limits.max_delegations (2)"
    assert result["final_text"] == "partial: 2 answers verified, more were not possible"
    assert [d["status"] for d in result["delegations"]] == ["ok", "ok", "rejected"]
    assert len(fake_openai.requests("helper")) == 2


def test_cost_limit_stops_a_model_that_keeps_calling_tools(fake_openai: FakeOpenAI, write_team: Any) -> None:
    fake_openai.handler(
        "gpt-4o-mini",
        lambda request: (
            text("stopping: spent the budget")
            if "STOP:" in request["messages"][-1].get("content", "")
            else tool_calls(("echo", {"word": "again"}))
        ),
    )
    team = teamrun.load_team(
        write_team("""\
        supervisor: solo
        limits: {max_cost_usd: 0.0002}
        agents:
          solo: {model: openai/gpt-4o-mini, tools: [echo]}
        tools:
          echo:
            command: ["python3", "-c", "import sys; print(sys.argv[1] * 200)", "{{ word }}"]
            parameters: {word: {type: string}}
        """)
    )

    result = team.run_sync("loop")

    assert result.status == "budget_exhausted"
    assert result.stopped_by == "limits.max_cost_usd (0.0002)"
    assert result.final_text == "stopping: spent the budget"
    assert result.cost >= 0.0002
    calls = len(fake_openai.requests("gpt-4o-mini"))
    assert 2 < calls < 40  # it stopped because of the price table, not a step limit


def test_parallel_workers_one_out_of_budget_the_other_done(fake_openai: FakeOpenAI, write_team: Any) -> None:
    fake_openai.script(
        "lead", [tool_calls(("ask_slow", {"task": "a"}), ("ask_fast", {"task": "b"})), text("both back")]
    )
    fake_openai.script("slow", [tool_calls(("echo", {"word": "x"})), text("slow: what I verified so far")])
    fake_openai.script("fast", [text("fast result")])
    team = teamrun.load_team(
        write_team("""\
        supervisor: lead
        agents:
          lead: {model: openai/lead, delegates_to: [slow, fast]}
          slow: {model: openai/slow, description: Slow., tools: [echo], budget: {max_steps: 1}}
          fast: {model: openai/fast, description: Fast.}
        tools:
          echo: {command: ["echo", "{{ word }}"], parameters: {word: {type: string}}}
        """)
    )

    result = team.run_sync("go")

    assert result.status == "done" and result.final_text == "both back"
    by_agent = {d.agent: d for d in result.delegations}
    assert by_agent["slow"].status == "budget_exhausted"
    assert by_agent["slow"].response == "slow: what I verified so far"
    assert by_agent["slow"].error == "agents.slow.budget.max_steps (1)"
    assert by_agent["fast"].status == "ok" and by_agent["fast"].response == "fast result"
    fake_openai.assert_complete()


HOOKED = """\
supervisor: lead
agents:
  lead:
    model: openai/lead
    delegates_to: [helper]
    delegation:
      hooks:
        on_error: {on_error}
        on_complete:
          - call: team_hooks:explode
"""


def test_a_failing_hook_is_recorded_and_ignored(fake_openai: FakeOpenAI, write_team: Any, tmp_path: Path) -> None:
    _with_hooks(tmp_path)
    fake_openai.script("lead", [tool_calls(("ask_helper", {"task": "t"})), text("fine")])
    fake_openai.script("helper", [text("helper answer")])
    path = write_team(HOOKED.format(on_error="continue") + "  helper: {model: openai/helper, description: H.}\n")

    result = teamrun.load_team(path).run_sync("go")

    assert result.status == "done"
    assert result.delegations[0].status == "ok"
    assert json.loads(_tool_contents(fake_openai, "lead", 1)[0])["response"] == "helper answer"
    assert result.hook_errors == [
        {
            "hook": "on_complete[0]",
            "agent": "lead",
            "target": "helper",
            "message": "RuntimeError: hook exploded for helper",
        }
    ]


def test_a_failing_hook_with_on_error_fail_fails_the_delegation(
    fake_openai: FakeOpenAI, write_team: Any, tmp_path: Path
) -> None:
    _with_hooks(tmp_path)
    fake_openai.script("lead", [tool_calls(("ask_helper", {"task": "t"})), text("worked around it")])
    fake_openai.script("helper", [text("helper answer")])
    path = write_team(HOOKED.format(on_error="fail") + "  helper: {model: openai/helper, description: H.}\n")
    events: list[Any] = []

    result = teamrun.load_team(path).run_sync("go", subscribers=[events.append])

    seen = json.loads(_tool_contents(fake_openai, "lead", 1)[0])
    assert seen["status"] == "error" and "hook exploded" in seen["error"]
    assert result.delegations[0].status == "error"
    assert result.final_text == "worked around it"
    ends = [e.data["status"] for e in events if e.kind == "delegation_end"]
    assert ends == ["error"]  # the event tells what the supervisor was given, after the hooks


def test_bail_returns_the_worker_text_without_another_supervisor_call(fake_openai: FakeOpenAI, write_team: Any) -> None:
    fake_openai.script("lead", [tool_calls(("ask_helper", {"task": "t"}))])  # no second lead reply scripted
    fake_openai.script("helper", [text("FINAL: the answer is 42")])
    team = teamrun.load_team(
        write_team("""\
        supervisor: lead
        agents:
          lead:
            model: openai/lead
            delegates_to: [helper]
            delegation:
              hooks:
                on_complete:
                  - when: "success and result.startswith('FINAL')"
                    bail: true
          helper: {model: openai/helper, description: H.}
        """)
    )

    events: list[Any] = []
    result = team.run_sync("go", subscribers=[events.append])

    assert result.status == "done"
    assert result.final_text == "FINAL: the answer is 42"
    fired = [e.data for e in events if e.kind == "hook"]
    assert fired == [
        {"status": "ok", "hook": "on_complete[0]", "agent": "lead", "target": "helper", "actions": ["bail"]}
    ]
    assert result.delegations[0].bailed is True
    assert len(fake_openai.requests("lead")) == 1
    fake_openai.assert_complete()


def test_declarative_hooks_steer_delegation(fake_openai: FakeOpenAI, write_team: Any, tmp_path: Path) -> None:
    _with_hooks(tmp_path)
    fake_openai.script(
        "lead",
        [
            tool_calls(("ask_researcher", {"task": "find facts"}), ("ask_writer", {"task": "write"})),
            text("done"),
        ],
    )
    fake_openai.script("researcher", [text("facts")])
    team = teamrun.load_team(
        write_team("""\
        supervisor: lead
        agents:
          lead:
            model: openai/lead
            delegates_to: [researcher, writer]
            delegation:
              hooks:
                on_start:
                  - when: "agent == 'researcher'"
                    append_prompt: "Focus on 2024-2025 data."
                    max_steps: 5
                  - when: "agent == 'writer'"
                    reject: "No writing before the research is checked."
                on_complete:
                  - when: "success"
                    call: team_hooks:tag_result
                    feedback: "{{ agent }} finished; check its sources."
          researcher: {model: openai/researcher, description: R.}
          writer: {model: openai/writer, description: W.}
        """)
    )

    result = team.run_sync("go")

    assert result.status == "done"
    assert _user_text(fake_openai, "researcher") == "find facts\n\nFocus on 2024-2025 data."
    assert fake_openai.requests("writer") == []
    seen = [json.loads(c) for c in _tool_contents(fake_openai, "lead", 1)]
    assert seen[0]["response"] == "[checked by hook] facts"
    assert seen[1] == {
        "agent": "writer",
        "status": "rejected",
        "response": "No writing before the research is checked.",
        "error": "rejected by an on_start hook",
    }
    assert "researcher finished; check its sources." in _user_text(fake_openai, "lead", 1)


def test_on_iteration_feedback_and_stop(fake_openai: FakeOpenAI, write_team: Any) -> None:
    fake_openai.handler(
        "lead",
        lambda request: (
            text("wrapped up")
            if "STOP:" in request["messages"][-1].get("content", "")
            else tool_calls(("ask_helper", {"task": "more"}))
        ),
    )
    fake_openai.handler("helper", lambda request: text("ok"))
    team = teamrun.load_team(
        write_team("""\
        supervisor: lead
        agents:
          lead:
            model: openai/lead
            delegates_to: [helper]
            delegation:
              hooks:
                on_iteration:
                  - when: "iteration >= 2"
                    feedback: "Wrap up: answer with what you have."
                  - when: "iteration >= 3"
                    stop: true
          helper: {model: openai/helper, description: H.}
        """)
    )

    result = team.run_sync("go")

    assert result.status == "done" and result.final_text == "wrapped up"
    assert len(fake_openai.requests("lead")) == 4  # 3 steps, then the last turn
    assert "Wrap up: answer with what you have." in _user_text(fake_openai, "lead", 2)


def test_a_reference_reaches_the_second_worker_byte_for_byte(fake_openai: FakeOpenAI, write_team: Any) -> None:
    findings = 'Line one — with "quotes", {braces}, <<<fences>>> and trailing spaces   \n\tand a tab.'
    fake_openai.script(
        "lead",
        [
            tool_calls(("ask_researcher", {"task": "research"})),
            tool_calls(
                (
                    "ask_writer",
                    {
                        "task": "write it up",
                        "context_from_refs": [
                            {"ref": "researcher-1", "as": "findings", "note": "the facts to use"},
                            "ghost-9",
                        ],
                    },
                )
            ),
            text("report done"),
        ],
    )
    fake_openai.script("researcher", [text(findings)])
    fake_openai.script("writer", [text("the report")])
    team = teamrun.load_team(
        write_team("""\
        supervisor: lead
        agents:
          lead:
            model: openai/lead
            delegates_to: [researcher, writer]
            delegation: {result_references: true}
          researcher: {model: openai/researcher, description: R.}
          writer: {model: openai/writer, description: W.}
        """)
    )

    result = team.run_sync("go")

    assert json.loads(_tool_contents(fake_openai, "lead", 1)[0])["ref"] == "researcher-1"
    prompt = _user_text(fake_openai, "writer")
    assert f"\n{findings}\n<<<END " in prompt
    assert "not as instructions" in prompt and "(use: the facts to use)" in prompt
    assert any("ghost-9" in w for w in result.warnings)
    assert result.final_text == "report done"


def test_output_schema_answer_repaired_once(fake_openai: FakeOpenAI, write_team: Any) -> None:
    fake_openai.script("lead", [tool_calls(("ask_extractor", {"task": "extract"})), text("ok")])
    fake_openai.script(
        "extractor",
        [
            text('{"name": "teamrun"}'),
            text('```json\n{"name": "teamrun", "stars": 5}\n```'),
        ],
    )
    team = teamrun.load_team(
        write_team("""\
        supervisor: lead
        agents:
          lead: {model: openai/lead, delegates_to: [extractor]}
          extractor:
            model: openai/extractor
            description: Extracts.
            output_schema:
              type: object
              required: [name, stars]
              properties: {name: {type: string}, stars: {type: integer}}
        """)
    )

    result = team.run_sync("go")

    first = fake_openai.requests("extractor")[0].request
    assert first["response_format"]["json_schema"]["schema"]["required"] == ["name", "stars"]
    repair = fake_openai.requests("extractor")[1].request["messages"][-1]["content"]
    assert "'stars' is a required property" in repair
    assert result.delegations[0].response == '{"name": "teamrun", "stars": 5}'
    fake_openai.assert_complete()


def test_output_schema_still_invalid_fails_the_delegation(fake_openai: FakeOpenAI, write_team: Any) -> None:
    fake_openai.script("lead", [tool_calls(("ask_extractor", {"task": "extract"})), text("gave up")])
    fake_openai.script("extractor", [text("not json"), text("still not json")])
    team = teamrun.load_team(
        write_team("""\
        supervisor: lead
        agents:
          lead: {model: openai/lead, delegates_to: [extractor]}
          extractor:
            model: openai/extractor
            description: Extracts.
            max_repair_turns: 1
            output_schema: {type: object}
        """)
    )

    result = team.run_sync("go")

    assert result.delegations[0].status == "error"
    assert "does not match its output_schema" in (result.delegations[0].error or "")
    fake_openai.assert_complete()


def test_handoff_ping_pong_stops_at_max_handoffs(fake_openai: FakeOpenAI, write_team: Any) -> None:
    def bounce(target: str):  # type: ignore[no-untyped-def]
        return lambda request: (
            text(f"final from the agent holding the conversation ({target} was next)")
            if "STOP:" in request["messages"][-1].get("content", "")
            else tool_calls((f"transfer_to_{target}", {"reason": "not mine"}))
        )

    fake_openai.handler("billing", bounce("tech"))
    fake_openai.handler("tech", bounce("billing"))
    team = teamrun.load_team(
        write_team("""\
        supervisor: billing
        limits: {max_handoffs: 3}
        agents:
          billing: {model: openai/billing, description: Billing questions., handoffs: [tech]}
          tech: {model: openai/tech, description: Technical questions., handoffs: [billing]}
        """)
    )

    result = team.run_sync("my invoice crashes the app")

    assert result.status == "budget_exhausted"
    assert result.stopped_by == "limits.max_handoffs (3)"
    # billing → tech → billing → tech (3 handoffs); tech's next transfer is refused, then its last turn
    assert len(fake_openai.requests("billing")) == 2 and len(fake_openai.requests("tech")) == 3
    assert result.final_text == "final from the agent holding the conversation (billing was next)"
    # each agent that takes over sees the conversation so far, under its own system prompt
    taken = fake_openai.requests("tech")[0].request["messages"]
    assert taken[1] == {"role": "user", "content": "my invoice crashes the app"}
    assert taken[0]["content"].startswith("You are tech.")


def test_message_filter_controls_what_the_worker_sees(fake_openai: FakeOpenAI, write_team: Any, tmp_path: Path) -> None:
    fake_openai.script(
        "lead",
        [
            tool_calls(("ask_helper", {"task": "help"}), content="Public plan: launch on Monday."),
            text("done"),
        ],
    )
    fake_openai.script("helper", [text("ok")])
    team = teamrun.load_team(
        write_team("""\
        supervisor: lead
        agents:
          lead:
            model: openai/lead
            delegates_to: [helper]
            delegation:
              message_filter: {drop_matching: ["(?i)confidential"], exclude_roles: [tool]}
          helper: {model: openai/helper, description: H.}
        """)
    )

    team.run_sync("Plan the launch. CONFIDENTIAL: the price is 9 dollars.")

    seen = _user_text(fake_openai, "helper")
    assert (
        seen == "help\n\n## Conversation of lead so far (for context)\n"
        "[assistant] Public plan: launch on Monday. [called: ask_helper]"
    )


def test_message_filter_without_rules_shares_the_user_turn(fake_openai: FakeOpenAI, write_team: Any) -> None:
    fake_openai.script("lead", [tool_calls(("ask_helper", {"task": "help"})), text("done")])
    fake_openai.script("helper", [text("ok")])
    team = teamrun.load_team(
        write_team("""\
        supervisor: lead
        agents:
          lead:
            model: openai/lead
            delegates_to: [helper]
            delegation:
              message_filter: {last: 5, python: "team_hooks:keep_user_only"}
          helper: {model: openai/helper, description: H.}
        """)
    )
    shutil.copy(HERE / "team_hooks.py", Path(team.loaded.base_dir) / "team_hooks.py")

    team.run_sync("Plan the launch in public.")

    assert "[user] Plan the launch in public." in _user_text(fake_openai, "helper")


def test_a_worker_timeout_stops_that_worker_only(fake_openai: FakeOpenAI, write_team: Any) -> None:
    fake_openai.script("lead", [tool_calls(("ask_slow", {"task": "s"}), ("ask_fast", {"task": "f"})), text("went on")])
    fake_openai.script("slow", [hang(30)])
    fake_openai.script("fast", [text("fast result")])
    team = teamrun.load_team(
        write_team("""\
        supervisor: lead
        agents:
          lead: {model: openai/lead, delegates_to: [slow, fast]}
          slow: {model: openai/slow, description: Slow., budget: {timeout_s: 0.5}}
          fast: {model: openai/fast, description: Fast.}
        """)
    )

    result = team.run_sync("go")

    assert result.status == "done" and result.final_text == "went on"
    by_agent = {d.agent: d for d in result.delegations}
    assert by_agent["slow"].status == "budget_exhausted"
    assert by_agent["slow"].error == "agents.slow.budget.timeout_s (0.5) reached"
    assert by_agent["fast"].response == "fast result"


def test_run_timeout_ends_budget_exhausted_with_finished_results(
    fake_openai: FakeOpenAI, write_team: Any, capsys: Any
) -> None:
    fake_openai.script("lead", [tool_calls(("ask_slow", {"task": "s"}), ("ask_fast", {"task": "f"}))])
    fake_openai.script("slow", [hang(30)])
    fake_openai.script("fast", [text("fast result")])
    path = write_team("""\
        supervisor: lead
        limits: {timeout_s: 1}
        agents:
          lead: {model: openai/lead, delegates_to: [slow, fast]}
          slow: {model: openai/slow, description: Slow.}
          fast: {model: openai/fast, description: Fast.}
        """)

    code = main(["execute", str(path), "-i", "go", "--json"])

    result = json.loads(capsys.readouterr().out)
    assert code == 3
    assert result["status"] == "budget_exhausted" and result["stopped_by"] == "limits.timeout_s (1.0)"
    assert "- fast: fast result" in result["final_text"]
    # the hung endpoint is named (the run said only that its timeout was reached)
    assert (
        f"limits.timeout_s (1.0) was reached while waiting on slow's call to openai/slow at {fake_openai.url}"
        in (result["warnings"])
    )
    assert {d["agent"]: d["status"] for d in result["delegations"]} == {"fast": "ok", "slow": "cancelled"}


def test_per_task_tool_cap_and_hook_context_reach_the_worker(fake_openai: FakeOpenAI, write_team: Any) -> None:
    fake_openai.script("lead", [tool_calls(("ask_helper", {"task": "look twice", "max_tool_calls": 1})), text("ok")])
    fake_openai.script(
        "helper",
        [
            tool_calls(("echo", {"word": "one"}), ("echo", {"word": "two"})),
            text("only one lookup was allowed"),  # the last turn, without tools
        ],
    )
    team = teamrun.load_team(
        write_team("""\
        supervisor: lead
        agents:
          lead:
            model: openai/lead
            delegates_to: [helper]
            delegation:
              hooks:
                on_start:
                  - context: {ticket: T-42}
          helper:
            model: openai/helper
            description: H.
            instructions: "You work on ticket {{ context.ticket }}."
            tools: [echo]
        tools:
          echo: {command: ["echo", "{{ word }}"], parameters: {word: {type: string}}}
        """)
    )

    result = team.run_sync("go")

    helper = fake_openai.requests("helper")
    assert helper[0].request["messages"][0]["content"] == "You work on ticket T-42."
    results = _tool_contents(fake_openai, "helper", 1)
    assert results[0] == "one\n"
    assert "agents.helper.budget.max_tool_calls (1) reached" in results[1]
    assert result.delegations[0].status == "budget_exhausted"
    assert result.agents["helper"].tool_calls == 1
    fake_openai.assert_complete()


def test_depth_limits_refuse_delegations_below_them(fake_openai: FakeOpenAI, write_team: Any) -> None:
    """`budget.max_depth` on an agent counts levels below it; the worker is told, the run goes on."""
    fake_openai.script("lead", [tool_calls(("ask_manager", {"task": "t"})), text("lead done")])
    fake_openai.script("manager", [tool_calls(("ask_specialist", {"task": "t"})), text("manager done")])
    fake_openai.script("specialist", [tool_calls(("ask_helper", {"task": "t"})), text("specialist done")])
    team = teamrun.load_team(
        write_team("""\
        supervisor: lead
        limits: {max_depth: 3}
        agents:
          lead: {model: openai/lead, delegates_to: [manager]}
          manager:
            model: openai/manager
            description: M.
            delegates_to: [specialist]
            budget: {max_depth: 1}
          specialist: {model: openai/specialist, description: S., delegates_to: [helper]}
          helper: {model: openai/helper, description: H.}
        """)
    )

    result = team.run_sync("go")

    assert result.status == "done" and result.final_text == "lead done"
    by_agent = {d.agent: d for d in result.delegations}
    assert by_agent["helper"].status == "rejected"
    assert by_agent["helper"].error == (
        "agents.manager.budget.max_depth (1) reached: helper cannot be delegated to from here"
    )
    assert by_agent["specialist"].status == "ok"
    assert fake_openai.requests("helper") == []
    fake_openai.assert_complete()
