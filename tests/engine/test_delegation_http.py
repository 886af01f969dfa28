"""Delegation through the real LiteLLM HTTP path, seen from the server's own request log."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import teamrun
from tests.engine.team_tools import RAW_MARKER
from tests.fakeserver import FakeOpenAI, RequestRecord, http_error, text, tool_calls

THREE_WORKERS = """\
supervisor: lead
agents:
  lead:
    model: openai/lead
    delegates_to: [alpha, beta, gamma]
    delegation: {{parallel: {parallel}, max_concurrency: 4}}
  alpha: {{model: openai/alpha, description: Researches alpha.}}
  beta: {{model: openai/beta, description: Researches beta.}}
  gamma: {{model: openai/gamma, description: Researches gamma.}}
"""


def _fan_out(server: FakeOpenAI, *, delay: float) -> None:
    server.script(
        "lead",
        [
            tool_calls(("ask_alpha", {"task": "a"}), ("ask_beta", {"task": "b"}), ("ask_gamma", {"task": "c"})),
            text("summary of a, b, c"),
        ],
    )
    for worker in ("alpha", "beta", "gamma"):
        server.script(worker, [text(f"{worker} result", delay=delay)])


def _overlapping(records: list[RequestRecord]) -> bool:
    return any(a.start < b.end and b.start < a.end for i, a in enumerate(records) for b in records[i + 1 :])


def _tool_messages(record: RequestRecord) -> list[dict[str, Any]]:
    return [m for m in record.request["messages"] if m.get("role") == "tool"]


def test_three_workers_in_one_turn_run_at_the_same_time(fake_openai: FakeOpenAI, write_team: Any) -> None:
    _fan_out(fake_openai, delay=0.3)
    team = teamrun.load_team(write_team(THREE_WORKERS.format(parallel="true")))

    result = team.run_sync("research a, b and c")

    assert result.status == "done"
    assert result.final_text == "summary of a, b, c"
    workers = [r for r in fake_openai.requests() if r.model != "lead"]
    assert len(workers) == 3 and _overlapping(workers)
    assert max(r.start for r in workers) < min(r.end for r in workers)  # all three in flight at once
    assert sorted(d.agent for d in result.delegations) == ["alpha", "beta", "gamma"]
    assert all(d.status == "ok" and d.usage.total_tokens > 0 for d in result.delegations)
    fake_openai.assert_complete()


def test_parallel_false_runs_workers_one_at_a_time(fake_openai: FakeOpenAI, write_team: Any) -> None:
    _fan_out(fake_openai, delay=0.1)
    team = teamrun.load_team(write_team(THREE_WORKERS.format(parallel="false")))

    result = team.run_sync("research a, b and c")

    assert result.status == "done"
    workers = sorted((r for r in fake_openai.requests() if r.model != "lead"), key=lambda r: r.start)
    assert not _overlapping(workers)
    # the supervisor still gets all three answers, in the order it asked
    second = fake_openai.requests("lead")[1]
    answers = [json.loads(m["content"])["agent"] for m in _tool_messages(second)]
    assert answers == ["alpha", "beta", "gamma"]


def test_worker_tool_output_stays_in_the_worker_context(
    fake_openai: FakeOpenAI, write_team: Any, tmp_path: Path
) -> None:
    shutil.copy(Path(__file__).with_name("team_tools.py"), tmp_path / "team_tools.py")
    fake_openai.script("lead", [tool_calls(("ask_reader", {"task": "read example.com"})), text("short answer")])
    fake_openai.script(
        "reader",
        [
            tool_calls(("fetch_page", {"url": "https://example.com"})),
            text("The page is about examples."),
        ],
    )
    team = teamrun.load_team(
        write_team("""\
        supervisor: lead
        agents:
          lead: {model: openai/lead, delegates_to: [reader]}
          reader: {model: openai/reader, description: Reads pages., tools: [fetch_page]}
        tools:
          fetch_page: {python: "team_tools:fetch_page", max_output_chars: 40000}
        """)
    )

    result = team.run_sync("what is example.com about?")

    assert result.status == "done"
    reader_second = fake_openai.requests("reader")[1]
    assert any(RAW_MARKER in (m.get("content") or "") for m in _tool_messages(reader_second))
    for request in fake_openai.requests("lead"):
        assert RAW_MARKER not in json.dumps(request.request)
    lead_second = fake_openai.requests("lead")[1]
    assert json.loads(_tool_messages(lead_second)[0]["content"])["response"] == "The page is about examples."


def test_a_failing_worker_keeps_its_siblings_results(fake_openai: FakeOpenAI, write_team: Any) -> None:
    fake_openai.script(
        "lead",
        [
            tool_calls(("ask_alpha", {"task": "a"}), ("ask_beta", {"task": "b"}), ("ask_gamma", {"task": "c"})),
            text("partial summary"),
        ],
    )
    fake_openai.script("alpha", [text("alpha result")])
    fake_openai.script("beta", [http_error(500), http_error(500)])  # num_retries: 1 → two attempts
    fake_openai.script("gamma", [text("gamma result")])
    team = teamrun.load_team(write_team(THREE_WORKERS.format(parallel="true")))

    result = team.run_sync("research a, b and c")

    assert result.status == "done"
    assert len(fake_openai.requests("beta")) == 2
    answers = _tool_messages(fake_openai.requests("lead")[1])
    seen = {r["agent"]: r for r in (json.loads(m["content"]) for m in answers)}
    assert seen["alpha"]["response"] == "alpha result"
    assert seen["gamma"]["response"] == "gamma result"
    assert seen["beta"]["status"] == "error" and "500" in seen["beta"]["error"]
    statuses = {d.agent: d.status for d in result.delegations}
    assert statuses == {"alpha": "ok", "beta": "error", "gamma": "ok"}
    fake_openai.assert_complete()


def test_invented_agents_and_malformed_arguments_do_not_crash_the_run(fake_openai: FakeOpenAI, write_team: Any) -> None:
    fake_openai.script(
        "lead",
        [
            tool_calls(("delegate_task", {"task": "look", "agents": ["alpha", "ghost"]})),
            tool_calls(("delegate_task", {"task": "look", "agents": ["ghost"]}), ("delegate_task", '{"task": "oops')),
            text("done anyway"),
        ],
    )
    fake_openai.script("alpha", [text("alpha saw it")])
    team = teamrun.load_team(
        write_team("""\
        supervisor: lead
        agents:
          lead:
            model: openai/lead
            delegates_to: [alpha, beta]
            delegation: {tool: delegate_task}
          alpha: {model: openai/alpha, description: Looks at things.}
          beta: {model: openai/beta, description: Looks at other things.}
        """)
    )

    result = team.run_sync("look")

    assert result.status == "done" and result.final_text == "done anyway"
    assert [d.agent for d in result.delegations] == ["alpha"]
    assert any("ghost" in w for w in result.warnings)
    offered = fake_openai.requests("lead")[0].request["tools"][0]["function"]["parameters"]
    assert offered["properties"]["agents"]["items"]["enum"] == ["alpha", "beta"]
    third = _tool_messages(fake_openai.requests("lead")[2])
    assert "choose from: alpha, beta" in third[-2]["content"]
    assert "not valid JSON" in third[-1]["content"]
    fake_openai.assert_complete()


def test_streaming_responses_run_the_same_team(fake_openai: FakeOpenAI, write_team: Any) -> None:
    _fan_out(fake_openai, delay=0.0)
    path = write_team(THREE_WORKERS.format(parallel="true"))
    path.write_text(path.read_text().replace("  num_retries: 1", "  num_retries: 1\n  stream: true"))

    result = teamrun.load_team(path).run_sync("research a, b and c")

    assert result.status == "done" and result.final_text == "summary of a, b, c"
    assert all(r.request.get("stream") is True for r in fake_openai.requests())
    assert sorted(d.response for d in result.delegations) == ["alpha result", "beta result", "gamma result"]
