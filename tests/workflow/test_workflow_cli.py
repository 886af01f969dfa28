"""Workflows end to end through ``teamrun execute``: chain, map, route, loop and team steps, limits.

Each agent talks to the local fake provider (a handler per agent, answering from the request alone);
order and concurrency are read from the trace's recorded times, never from the wall clock.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.cli_run import run_cli
from tests.fakeserver import FakeOpenAI, Reply, http_error, text, tool_calls
from tests.waiting import wait_until_async
from tests.workflow.conftest import read_trace, step_spans

WriteTeam = Callable[[str], Path]


def _task(request: dict[str, Any]) -> str:
    """The step's task: the first user message of the request."""
    return next(m["content"] for m in request["messages"] if m["role"] == "user")


def _echo(agent: str, delay: float = 0.0) -> Callable[[dict[str, Any]], Reply]:
    return lambda request: text(f"{agent} did <{_task(request)}>", delay=delay)


PLANNER = (
    "planner: {model: openai/planner, instructions: Plan., output_schema: {type: object, properties: "
    "{title: {type: string}, topics: {type: array, items: {type: string}}}, required: [title, topics]}}"
)


def _plan(topics: list[str]) -> Callable[[dict[str, Any]], Reply]:
    return lambda request: text(json.dumps({"title": "Langs", "topics": topics}))


Executed = tuple[Any, dict[str, Any], list[dict[str, Any]]]


def _execute(team: Path, tmp_path: Path, *extra: str, input: str = "Compare Rust and Go") -> Executed:
    trace = tmp_path / "trace.jsonl"
    out = tmp_path / "result.json"
    result = run_cli(["execute", str(team), "-i", input, "--trace", str(trace), "--json", "--progress", "none", *extra])
    data = json.loads(result.out) if result.out.strip().startswith("{") else {}
    out.write_text(result.out, encoding="utf-8")
    return result, data, read_trace(trace)


def test_a_chain_runs_its_steps_in_order_and_passes_structured_outputs_verbatim(
    write_team: WriteTeam, fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    fake_openai.handler("planner", _plan(["Rust", "Go"]))
    fake_openai.handler("writer", _echo("writer"))
    fake_openai.handler("editor", _echo("editor"))
    team = write_team(f"""\
        workflow:
          steps:
            - id: plan
              agent: planner
              input: "Plan: {{{{ input }}}}"
            - agent: writer
              input: "Title {{{{ steps.plan.output.title }}}}; topics {{{{ steps.plan.output.topics | join(', ') }}}}"
            - agent: editor
        agents:
          {PLANNER}
          writer: {{model: openai/writer, instructions: Write.}}
          editor: {{model: openai/editor, instructions: Edit.}}
        """)
    result, data, events = _execute(team, tmp_path)
    assert result.code == 0, result.err
    assert _task(fake_openai.requests("writer")[0].request) == "Title Langs; topics Rust, Go"
    # the editor's default input is the previous step's output, verbatim
    assert _task(fake_openai.requests("editor")[0].request) == "writer did <Title Langs; topics Rust, Go>"
    assert data["final_text"] == "editor did <writer did <Title Langs; topics Rust, Go>>"
    spans = step_spans(events)
    assert list(spans) == ["plan", "writer", "editor"]
    assert spans["plan"][1] <= spans["writer"][0] and spans["writer"][1] <= spans["editor"][0]
    assert [d["agent"] for d in data["delegations"]] == ["planner", "writer", "editor"]


def test_a_map_runs_items_concurrently_up_to_max_concurrency_and_keeps_their_order(
    write_team: WriteTeam, fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    topics = ["Rust", "Go", "Zig", "Nim", "Odin"]
    fake_openai.handler("planner", _plan(topics))
    fake_openai.handler("researcher", _echo("researcher", delay=0.3))
    fake_openai.handler("writer", _echo("writer"))
    team = write_team(f"""\
        workflow:
          steps:
            - id: plan
              agent: planner
            - id: research
              map: steps.plan.output.topics
              max_concurrency: 2
              agent: researcher
              input: "#{{{{ index }}}} {{{{ item }}}}"
            - agent: writer
              input: "{{% for r in steps.research.output %}}[{{{{ r }}}}]{{% endfor %}}"
        agents:
          {PLANNER}
          researcher: {{model: openai/researcher, instructions: Research.}}
          writer: {{model: openai/writer, instructions: Write.}}
        """)
    result, _data, events = _execute(team, tmp_path)
    assert result.code == 0, result.err
    expected = "".join(f"[researcher did <#{i} {t}>]" for i, t in enumerate(topics))
    assert _task(fake_openai.requests("writer")[0].request) == expected
    spans = step_spans(events)
    items = [spans[f"research[{i}]"] for i in range(len(topics))]
    points = sorted([(start, 1) for start, _, _ in items] + [(end, -1) for _, end, _ in items])
    running, most = 0, 0
    for _, change in points:
        running += change
        most = max(most, running)
    assert most == 2  # items overlapped, never more than max_concurrency
    assert spans["plan"][1] <= min(start for start, _, _ in items)
    assert max(end for _, end, _ in items) <= spans["writer"][0]


def test_a_failing_map_item_is_recorded_and_its_siblings_are_kept(
    write_team: WriteTeam, fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    fake_openai.handler("planner", _plan(["Rust", "broken", "Go"]))

    def researcher(request: dict[str, Any]) -> Reply:
        if "broken" in _task(request):
            return http_error(400, "the provider refused this one")
        return text(f"notes on {_task(request)}")

    fake_openai.handler("researcher", researcher)
    fake_openai.handler("writer", _echo("writer"))
    team = write_team(f"""\
        workflow:
          steps:
            - id: plan
              agent: planner
            - id: research
              map: steps.plan.output.topics
              agent: researcher
            - agent: writer
              input: "{{{{ steps.research.output | tojson }}}} errors={{{{ steps.research.errors | length }}}}"
        agents:
          {PLANNER}
          researcher: {{model: openai/researcher, instructions: Research.}}
          writer: {{model: openai/writer, instructions: Write.}}
        """)
    result, data, events = _execute(team, tmp_path)
    assert result.code == 0, result.err
    assert _task(fake_openai.requests("writer")[0].request) == '["notes on Rust", null, "notes on Go"] errors=1'
    statuses = {step: status for step, (_, _, status) in step_spans(events).items()}
    assert statuses == {"plan": "ok", "research[0]": "ok", "research[1]": "error", "research[2]": "ok", "writer": "ok"}
    assert any("workflow step 'research' item 1 failed" in w for w in data["warnings"])


ROUTED = """\
    workflow:
      steps:
        - id: triage
          agent: classifier
          route:
            on: category
            branches:
              billing:
                - agent: billing
              bug:
                - agent: engineer
                  input: "Fix ({{ steps.triage.choice.category }}): {{ input }}"
            default:
              - agent: generalist
        - agent: closer
    agents:
      classifier:
        model: openai/classifier
        instructions: Classify.
        output_schema:
          type: object
          properties:
            category: {type: string, enum: [billing, bug, other]}
          required: [category]
      billing: {model: openai/billing, instructions: Bill.}
      engineer: {model: openai/engineer, instructions: Fix.}
      generalist: {model: openai/generalist, instructions: Help.}
      closer: {model: openai/closer, instructions: Close.}
    """


@pytest.mark.parametrize(
    ("ticket", "category", "branch_agent", "step"),
    [
        ("I was charged twice", "billing", "billing", "triage>billing/billing"),
        ("The app crashes", "bug", "engineer", "triage>bug/engineer"),
        ("Hello there", "other", "generalist", "triage>default/generalist"),
    ],
)
def test_a_route_runs_the_branch_its_structured_output_names(
    write_team: WriteTeam,
    fake_openai: FakeOpenAI,
    tmp_path: Path,
    ticket: str,
    category: str,
    branch_agent: str,
    step: str,
) -> None:
    fake_openai.handler("classifier", lambda request: text(json.dumps({"category": category})))
    for agent in ("billing", "engineer", "generalist", "closer"):
        fake_openai.handler(agent, _echo(agent))
    result, data, events = _execute(write_team(ROUTED), tmp_path, input=ticket)
    assert result.code == 0, result.err
    assert [d["agent"] for d in data["delegations"]] == ["classifier", branch_agent, "closer"]
    assert list(step_spans(events)) == ["triage", step, "closer"]
    branch_task = _task(fake_openai.requests(branch_agent)[0].request)
    assert branch_task == (f"Fix (bug): {ticket}" if category == "bug" else json.dumps({"category": category}))
    assert data["final_text"] == f"closer did <{branch_agent} did <{branch_task}>>"


LOOP = """\
    workflow:
      steps:
        - id: polish
          loop:
            max_iterations: 3
            until:
              - contains: APPROVED
            steps:
              - id: draft
                agent: writer
                input: "Iteration {{ iteration }}. {{ feedback }}"
    agents:
      writer: {model: openai/writer, instructions: Write.}
    """


def test_a_loop_stops_when_its_check_passes_and_feeds_the_failed_check_back(
    write_team: WriteTeam, fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    fake_openai.handler(
        "writer", lambda request: text("APPROVED draft" if "Iteration 2" in _task(request) else "draft")
    )
    result, data, events = _execute(write_team(LOOP), tmp_path)
    assert result.code == 0, result.err
    tasks = [_task(r.request) for r in fake_openai.requests("writer")]
    assert len(tasks) == 2
    assert tasks[0] == "Iteration 1. "
    assert tasks[1].startswith("Iteration 2. Your answer did not pass the acceptance check 'contains \"APPROVED\"'")
    assert list(step_spans(events)) == ["polish#1/draft", "polish#2/draft"]
    assert [e["data"]["status"] for e in events if e["kind"] == "accept"] == ["retry", "passed"]
    assert data["final_text"] == "APPROVED draft"
    assert not data["warnings"]


def test_a_loop_that_never_passes_stops_at_max_iterations_with_a_warning(
    write_team: WriteTeam, fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    fake_openai.handler("writer", lambda request: text("still a draft"))
    result, data, events = _execute(write_team(LOOP), tmp_path)
    assert result.code == 0, result.err
    assert len(fake_openai.requests("writer")) == 3
    assert list(step_spans(events)) == ["polish#1/draft", "polish#2/draft", "polish#3/draft"]
    assert data["final_text"] == "still a draft"
    assert any("the loop ended after 3 iterations without passing" in w for w in data["warnings"])


def test_a_team_step_runs_a_supervisor_with_its_workers_inside_the_workflow(
    write_team: WriteTeam, fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    def lead(request: dict[str, Any]) -> Reply:
        if not any(m["role"] == "tool" for m in request["messages"]):
            return tool_calls(("ask_researcher", {"task": "dig into " + _task(request)}))
        return text("lead summary: " + json.loads(request["messages"][-1]["content"])["response"])

    fake_openai.handler("lead", lead)
    fake_openai.handler("researcher", _echo("researcher"))
    fake_openai.handler("writer", _echo("writer"))
    team = write_team("""\
        workflow:
          steps:
            - id: investigate
              team: lead
            - agent: writer
        agents:
          lead: {model: openai/lead, instructions: Lead., delegates_to: [researcher]}
          researcher: {model: openai/researcher, instructions: Research., description: Digs.}
          writer: {model: openai/writer, instructions: Write.}
        """)
    result, data, events = _execute(team, tmp_path, input="Rust")
    assert result.code == 0, result.err
    assert data["final_text"] == "writer did <lead summary: researcher did <dig into Rust>>"
    paths = [tuple(e["agent_path"]) for e in events if e["kind"] == "agent_start"]
    assert paths == [("workflow",), ("workflow", "lead"), ("workflow", "lead", "researcher"), ("workflow", "writer")]


def test_a_run_limit_stops_the_workflow_with_the_steps_finished_so_far(
    write_team: WriteTeam, fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    for agent in ("a", "b", "c"):
        fake_openai.handler(agent, _echo(agent))
    team = write_team("""\
        limits: {max_delegations: 2}
        workflow:
          steps:
            - agent: a
            - agent: b
            - agent: c
        agents:
          a: {model: openai/a, instructions: A.}
          b: {model: openai/b, instructions: B.}
          c: {model: openai/c, instructions: C.}
        """)
    result, data, _events = _execute(team, tmp_path, input="go")
    assert result.code == 3, result.err
    assert data["status"] == "budget_exhausted"
    assert data["stopped_by"] == "limits.max_delegations (2)"
    assert fake_openai.requests("c") == []
    assert data["final_text"] == (
        "No final answer: the workflow was stopped (limits.max_delegations (2)). "
        "Steps finished so far:\n- a: a did <go>\n- b: b did <a did <go>>"
    )
    assert [(d["agent"], d["status"]) for d in data["delegations"]] == [("a", "ok"), ("b", "ok"), ("c", "rejected")]


def test_a_token_limit_between_steps_stops_the_workflow_gracefully(
    write_team: WriteTeam, fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    for agent in ("a", "b"):
        fake_openai.handler(agent, _echo(agent))
    team = write_team("""\
        limits: {max_total_tokens: 5}
        workflow:
          steps:
            - agent: a
            - agent: b
        agents:
          a: {model: openai/a, instructions: A.}
          b: {model: openai/b, instructions: B.}
        """)
    result, data, _ = _execute(team, tmp_path, input="go")
    assert result.code == 3, result.err
    assert data["stopped_by"] == "limits.max_total_tokens (5)"
    assert fake_openai.requests("b") == []
    assert data["final_text"].endswith("Steps finished so far:\n- a: a did <go>")


def test_workflow_hooks_run_around_each_step(write_team: WriteTeam, fake_openai: FakeOpenAI, tmp_path: Path) -> None:
    fake_openai.handler("a", _echo("a"))
    team = write_team("""\
        vars: {tone: plain}
        workflow:
          hooks:
            on_start:
              - append_prompt: "Tone: {{ vars.tone }}"
          steps:
            - agent: a
        agents:
          a: {model: openai/a, instructions: A.}
        """)
    result, _data, _ = _execute(team, tmp_path, input="go")
    assert result.code == 0, result.err
    assert _task(fake_openai.requests("a")[0].request) == "go\n\nTone: plain"


def test_a_recorded_workflow_replays_without_the_provider(
    write_team: WriteTeam, fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    fake_openai.handler("planner", _plan(["Rust", "Go", "Zig"]))
    fake_openai.handler("researcher", _echo("researcher"))
    fake_openai.handler("writer", _echo("writer"))
    team = write_team(f"""\
        workflow:
          steps:
            - id: plan
              agent: planner
            - id: research
              map: steps.plan.output.topics
              agent: researcher
            - agent: writer
              input: "{{{{ steps.research.output | join(' / ') }}}}"
        agents:
          {PLANNER}
          researcher: {{model: openai/researcher, instructions: Research.}}
          writer: {{model: openai/writer, instructions: Write.}}
        """)
    cassette = tmp_path / "run.cassette.jsonl"
    recorded, first, _ = _execute(team, tmp_path, "--record", str(cassette))
    assert recorded.code == 0, recorded.err
    asked = len(fake_openai.requests())
    assert asked == 5
    replayed, second, _ = _execute(team, tmp_path, "--replay", str(cassette))
    assert replayed.code == 0, replayed.err
    assert len(fake_openai.requests()) == asked  # the provider was not asked again
    assert (
        second["final_text"]
        == first["final_text"]
        == ("writer did <researcher did <Rust> / researcher did <Go> / researcher did <Zig>>")
    )


def test_the_plain_progress_lines_name_each_step(
    write_team: WriteTeam, fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    fake_openai.handler("planner", _plan(["Rust", "Go"]))
    fake_openai.handler("researcher", _echo("researcher"))
    team = write_team(f"""\
        workflow:
          steps:
            - id: plan
              agent: planner
            - id: research
              map: steps.plan.output.topics
              agent: researcher
        agents:
          {PLANNER}
          researcher: {{model: openai/researcher, instructions: Research.}}
        """)
    result = run_cli(["execute", str(team), "-i", "go", "--progress", "plain"])
    assert result.code == 0, result.err
    delegated = [line.split("] ", 1)[1] for line in result.err.splitlines() if "delegated" in line]
    assert delegated == [
        "workflow → planner: delegated (step plan)",
        "workflow → researcher: delegated (step research[0])",
        "workflow → researcher: delegated (step research[1])",
    ]


def test_cancelling_a_workflow_mid_map_keeps_the_finished_items(
    write_team: WriteTeam, fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    import asyncio

    import teamrun

    fake_openai.handler("planner", _plan(["fast", "slow"]))
    fake_openai.handler(
        "researcher", lambda request: text("done " + _task(request), delay=30.0 if "slow" in _task(request) else 0.0)
    )
    team = write_team(f"""\
        workflow:
          steps:
            - id: plan
              agent: planner
            - id: research
              map: steps.plan.output.topics
              agent: researcher
        agents:
          {PLANNER}
          researcher: {{model: openai/researcher, instructions: Research.}}
        """)

    async def run() -> Any:
        cancel = asyncio.Event()
        loaded = teamrun.load_team(team)
        job = asyncio.create_task(loaded.run("go", cancel=cancel))

        def in_flight() -> bool:  # the fast item answered, the slow one is at the provider
            log = [r for r in fake_openai.requests() if r.model == "researcher"]
            return any(r.end == 0.0 for r in log) and any(r.end for r in log)

        await wait_until_async(in_flight, "the fast item answered, the slow one at the provider", alive=job)
        cancel.set()
        return await job

    result = asyncio.run(run())
    assert (result.status, result.stopped_by) == ("cancelled", "cancelled")
    assert {(d.agent, d.task, d.status) for d in result.delegations} == {
        ("planner", "go", "ok"),
        ("researcher", "fast", "ok"),
        ("researcher", "slow", "cancelled"),
    }
    assert "- researcher: done fast" in result.final_text


def test_in_a_thread_a_step_reads_the_earlier_turns(
    write_team: WriteTeam, fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    fake_openai.handler("a", _echo("a"))
    team = write_team("""\
        workflow:
          steps:
            - agent: a
              input: "{% for m in history %}{{ m.role }}: {{ m.content }} / {% endfor %}now: {{ input }}"
        agents:
          a: {model: openai/a, instructions: A.}
        """)
    store = str(tmp_path / "threads.db")
    first, _, _ = _execute(team, tmp_path, "--thread", "t1", "--store", store, input="hello")
    assert first.code == 0, first.err
    second, data, _ = _execute(team, tmp_path, "--thread", "t1", "--store", store, input="and then?")
    assert second.code == 0, second.err
    assert _task(fake_openai.requests("a")[0].request) == "now: hello"
    assert _task(fake_openai.requests("a")[1].request) == "user: hello / assistant: a did <now: hello> / now: and then?"
    assert data["thread_id"] == "t1"
