"""A worker that itself delegates: lead → manager → two specialists, over the real HTTP path."""

from __future__ import annotations

import json
from typing import Any

import teamrun
from teamrun.events import Event
from tests.fakeserver import FakeOpenAI, Reply, text, tool_calls

TEAM = """\
    supervisor: lead
    limits: {max_depth: 2}
    agents:
      lead: {model: openai/lead, delegates_to: [manager]}
      manager:
        model: openai/manager
        description: Splits a question between two specialists and summarises.
        delegates_to: [spec_a, spec_b]
      spec_a: {model: openai/spec_a, description: Knows about A.}
      spec_b: {model: openai/spec_b, description: Knows about B.}
    """

RAW_A = "SPEC-A-RAW: the A measurements are 1, 2, 3"
RAW_B = "SPEC-B-RAW: the B measurements are 4, 5, 6"


def _tool_contents(request: dict[str, Any]) -> list[dict[str, Any]]:
    return [json.loads(m["content"]) for m in request["messages"] if m.get("role") == "tool"]


def _script(server: FakeOpenAI, manager_answer: Any) -> None:
    server.script(
        "lead",
        [
            tool_calls(("ask_manager", {"task": "investigate A and B"})),
            text("lead: final"),
        ],
    )
    server.script(
        "manager",
        [
            tool_calls(("ask_spec_a", {"task": "measure A"}), ("ask_spec_b", {"task": "measure B"})),
        ],
    )
    server.handler("manager", manager_answer)
    server.script("spec_a", [text(RAW_A, delay=0.2)])
    server.script("spec_b", [text(RAW_B, delay=0.2)])


def test_answers_flow_up_one_level_at_a_time(fake_openai: FakeOpenAI, write_team: Any) -> None:
    def summarise(request: dict[str, Any]) -> Reply:
        answers = {r["agent"]: r["response"] for r in _tool_contents(request)}
        assert answers == {"spec_a": RAW_A, "spec_b": RAW_B}  # the manager received both answers
        return text("MANAGER-SUMMARY: A is smaller than B")

    _script(fake_openai, summarise)
    events: list[Event] = []
    team = teamrun.load_team(write_team(TEAM))

    result = team.run_sync("compare A and B", subscribers=[events.append])

    assert result.status == "done", result.error
    assert result.final_text == "lead: final"
    # specialists ran concurrently under the manager
    spec = fake_openai.requests("spec_a") + fake_openai.requests("spec_b")
    assert spec[0].start < spec[1].end and spec[1].start < spec[0].end
    # the manager's answer reached the lead ...
    lead_second = fake_openai.requests("lead")[1].request
    assert _tool_contents(lead_second) == [
        {"agent": "manager", "status": "ok", "response": "MANAGER-SUMMARY: A is smaller than B"}
    ]
    # ... and the specialists' raw text never did
    for record in fake_openai.requests("lead"):
        dumped = json.dumps(record.request)
        assert "SPEC-A-RAW" not in dumped and "SPEC-B-RAW" not in dumped
    # the specialists only saw their own task, not the lead's conversation
    spec_a_messages = fake_openai.requests("spec_a")[0].request["messages"]
    assert spec_a_messages[-1] == {"role": "user", "content": "measure A"}
    assert "compare A and B" not in json.dumps(spec_a_messages)

    by_agent = {d.agent: d for d in result.delegations}
    assert set(by_agent) == {"manager", "spec_a", "spec_b"}
    placed = {name: (d.parent, d.agent_path) for name, d in by_agent.items()}
    assert placed == {
        "manager": ("lead", ("lead", "manager")),
        "spec_a": ("manager", ("lead", "manager", "spec_a")),
        "spec_b": ("manager", ("lead", "manager", "spec_b")),
    }
    assert by_agent["spec_a"].response == RAW_A
    assert by_agent["manager"].response == "MANAGER-SUMMARY: A is smaller than B"
    assert all(d.status == "ok" and d.usage.total_tokens > 0 for d in result.delegations)
    # the specialists finish (and are recorded) before the manager does
    order = [d.agent for d in result.delegations]
    assert order.index("manager") == 2
    as_dict = {d["agent"]: d for d in result.as_dict()["delegations"]}
    assert as_dict["spec_b"]["agent_path"] == ["lead", "manager", "spec_b"]
    assert {name: s.invocations for name, s in result.agents.items()} == {
        "lead": 1,
        "manager": 1,
        "spec_a": 1,
        "spec_b": 1,
    }

    starts = {e.agent: e for e in events if e.kind == "agent_start"}
    assert starts["spec_a"].agent_path == ("lead", "manager", "spec_a")
    assert starts["spec_a"].depth == 2
    assert starts["manager"].depth == 1 and starts["lead"].depth == 0
    fake_openai.assert_complete()


def test_raw_text_reaches_the_lead_only_when_the_manager_passes_it_on(fake_openai: FakeOpenAI, write_team: Any) -> None:
    def pass_on_a(request: dict[str, Any]) -> Reply:
        answers = {r["agent"]: r["response"] for r in _tool_contents(request)}
        return text(f"quoting A verbatim: {answers['spec_a']}")

    _script(fake_openai, pass_on_a)

    result = teamrun.load_team(write_team(TEAM)).run_sync("compare A and B")

    assert result.status == "done", result.error
    lead_second = json.dumps(fake_openai.requests("lead")[1].request)
    assert "SPEC-A-RAW" in lead_second  # passed on by the manager
    assert "SPEC-B-RAW" not in lead_second  # not passed on
    fake_openai.assert_complete()
