"""Workflows read and write the workspace, end to end through ``teamrun execute``.

``{{ workspace.<entry> }}`` in a step's template is the entry's value as the step starts; ``write: <entry>``
writes the step's output to the entry when the step ends, by the workflow (writer ``workflow``), with the
entry's merge rule and schema; a refused write fails the step. Against the local fake provider (a handler
per agent, answering from the request alone) and on the offline model; order is read from the trace's
recorded times, never from the wall clock.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.cli_run import run_cli
from tests.fakeserver import FakeOpenAI, Reply, text
from tests.workflow.conftest import read_trace

WriteTeam = Callable[[str], Path]
REPO = Path(__file__).resolve().parents[2]
SUBJECTS = ["Rust", "Go", "Zig"]


def _task(request: dict[str, Any]) -> str:
    return next(m["content"] for m in request["messages"] if m["role"] == "user")


def _execute(team: Path, tmp_path: Path, *extra: str) -> tuple[Any, dict[str, Any], list[dict[str, Any]]]:
    trace = tmp_path / "trace.jsonl"
    argv = ["execute", str(team), "-i", "Compare languages", "--trace", str(trace), "--json", "--progress", "none"]
    result = run_cli([*argv, *extra])
    data = json.loads(result.out) if result.out.strip().startswith("{") else {}
    return result, data, read_trace(trace)


def _writes(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [e for e in events if e["kind"] == "workspace_write"]


def _delegations(events: list[dict[str, Any]], kind: str) -> dict[str, float]:
    """``{step label: time}`` of the steps' ``delegation_start`` or ``delegation_end`` events."""
    steps = {e["span_id"]: e["data"]["step"] for e in events if e["kind"] == "delegation_start"}
    return {steps[e["span_id"]]: e["time"] for e in events if e["kind"] == kind and e["span_id"] in steps}


RESEARCH_TEAM = """\
    workspace:
      entries:
        findings:
          description: Facts found so far.
          schema:
            type: array
            items:
              type: object
              properties: {claim: {type: string}, source: {type: string}}
              required: [claim, source]
              additionalProperties: false
          merge: append
        report:
          schema: {type: string, maxLength: MAX}
    workflow:
      steps:
        - id: plan
          agent: planner
        - id: research
          map: steps.plan.output.subjects
          agent: researcher
          write: findings
        - id: write
          agent: writer
          input: |
            {% for f in workspace.findings %}{{ f.claim }} [{{ f.source }}]
            {% endfor %}
          write: report
        - id: edit
          agent: editor
          input: "Edit: {{ workspace.report }}"
      output: "{{ workspace.report }} / {{ steps.edit.text }}"
    agents:
      planner:
        model: openai/planner
        output_schema:
          type: object
          properties: {subjects: {type: array, items: {type: string}}}
          required: [subjects]
      researcher:
        model: openai/researcher
        output_schema:
          type: object
          properties: {claim: {type: string}, source: {type: string}}
          required: [claim, source]
      writer: {model: openai/writer}
      editor: {model: openai/editor}
    """


def _serve_research(server: FakeOpenAI) -> None:
    server.handler("planner", lambda request: text(json.dumps({"subjects": SUBJECTS})))

    def researcher(request: dict[str, Any]) -> Reply:
        subject = _task(request)
        return text(json.dumps({"claim": f"{subject} is fast", "source": f"{subject.lower()}.md"}))

    server.handler("researcher", researcher)
    server.handler("writer", lambda request: text("Report: " + " ".join(_task(request).split())))
    server.handler("editor", lambda request: text("edited"))


def test_a_map_writes_its_items_to_an_entry_and_the_next_step_reads_them(
    write_team: WriteTeam, fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    _serve_research(fake_openai)
    team = write_team(RESEARCH_TEAM.replace("MAX", "4000"))
    assert run_cli(["validate", str(team)]).code == 0

    result, data, events = _execute(team, tmp_path)

    assert result.code == 0, result.err
    findings = [{"claim": f"{s} is fast", "source": f"{s.lower()}.md"} for s in SUBJECTS]
    report = "Report: Rust is fast [rust.md] Go is fast [go.md] Zig is fast [zig.md]"
    workspace = data["workspace"]["entries"]
    assert workspace["findings"] == {"version": 1, "value": findings, "written_by": ["workflow"]}
    assert workspace["report"] == {"version": 2, "value": report, "written_by": ["workflow"]}
    assert data["final_text"] == f"{report} / edited"
    # the writer read the findings from the workspace, the editor the report the writer's step wrote
    (writer,) = fake_openai.requests("writer")
    assert " ".join(_task(writer.request).split()) == "Rust is fast [rust.md] Go is fast [go.md] Zig is fast [zig.md]"
    (editor,) = fake_openai.requests("editor")
    assert _task(editor.request) == f"Edit: {report}"
    # each write is an event naming its step, by the workflow, after its step's agents ended
    writes = _writes(events)
    assert [(w["data"]["step"], w["data"]["entry"], w["data"]["status"], w["agent_path"]) for w in writes] == [
        ("research", "findings", "applied", ["workflow"]),
        ("write", "report", "applied", ["workflow"]),
    ]
    assert [(w["data"]["version_before"], w["data"]["version_after"]) for w in writes] == [(0, 1), (0, 2)]
    ends, starts = _delegations(events, "delegation_end"), _delegations(events, "delegation_start")
    assert max(ends[f"research[{i}]"] for i in range(3)) <= writes[0]["time"] <= starts["write"]
    assert ends["write"] <= writes[1]["time"] <= starts["edit"]


def test_a_refused_write_fails_the_step_saying_why_and_no_later_step_runs(
    write_team: WriteTeam, fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    _serve_research(fake_openai)
    team = write_team(RESEARCH_TEAM.replace("MAX", "20"))  # the writer's report is longer

    result, data, events = _execute(team, tmp_path)

    assert result.code != 0
    assert data["status"] == "failed"
    said = data["error"] + result.err
    assert "workflow step 'write': writing its output to workspace entry 'report' was refused (schema)" in said
    assert "the value of 'report' would not satisfy its schema: at the value: fails 'maxLength' (20)" in said
    assert fake_openai.requests("editor") == []
    assert data["workspace"]["entries"]["report"] == {"version": 0, "value": None, "written_by": []}
    refused = [w["data"] for w in _writes(events) if w["data"]["status"] == "refused"]
    assert [(w["step"], w["entry"], w["reason"]) for w in refused] == [("write", "report", "schema")]


def test_a_loop_step_reads_the_value_its_previous_iteration_wrote(
    write_team: WriteTeam, fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    def writer(request: dict[str, Any]) -> Reply:
        task = _task(request)
        return text("draft two, final" if "draft one" in task else "draft one")

    fake_openai.handler("writer", writer)
    fake_openai.handler("counter", lambda request: text("2"))
    team = write_team("""\
        workspace:
          entries:
            draft: {schema: {type: string}}
            rounds: {schema: {type: integer}, merge: sum}
        workflow:
          steps:
            - id: polish
              loop:
                max_iterations: 3
                until: [{contains: final}]
                steps:
                  - agent: counter
                    write: rounds
                  - agent: writer
                    input: "Round {{ iteration }} of {{ workspace.rounds }}, previous: {{ workspace.draft or 'none' }}"
                    write: draft
        agents:
          writer: {model: openai/writer}
          counter:
            model: openai/counter
            output_schema: {type: integer}
        """)

    result, data, events = _execute(team, tmp_path)

    assert result.code == 0, result.err
    assert [_task(r.request) for r in fake_openai.requests("writer")] == [
        "Round 1 of 2, previous: none",  # each step reads the workspace as it starts
        "Round 2 of 4, previous: draft one",
    ]
    entries = data["workspace"]["entries"]
    assert entries["draft"] == {"version": 4, "value": "draft two, final", "written_by": ["workflow"]}
    assert entries["rounds"] == {"version": 3, "value": 4, "written_by": ["workflow"]}  # 2 + 2 (sum)
    assert [(w["data"]["step"], w["data"]["entry"]) for w in _writes(events)] == [
        ("counter", "rounds"),
        ("writer", "draft"),
        ("counter", "rounds"),
        ("writer", "draft"),
    ]


def test_the_workflow_write_does_not_need_the_entrys_writers_and_agents_still_do(
    write_team: WriteTeam, fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    """`write:` on an entry lists the agents its tools let write; a step's write is the file's own."""
    from tests.fakeserver import tool_calls

    def noter(request: dict[str, Any]) -> Reply:
        results = [m for m in request["messages"] if m["role"] == "tool"]
        if not results:  # it may not write `notes`: its tool list has no workspace_write_notes
            names = sorted(t["function"]["name"] for t in request.get("tools") or [])
            return tool_calls(("workspace_read", {"entry": "notes"}), content=",".join(names))
        return text("note from the step")

    fake_openai.handler("noter", noter)
    team = write_team("""\
        workspace:
          entries:
            notes: {schema: {type: array, items: {type: string}}, merge: append, write: [other]}
        workflow:
          steps:
            - agent: noter
              write: notes
            - agent: other
              input: "{{ workspace.notes | join('; ') }}"
        agents:
          noter: {model: openai/noter}
          other: {model: openai/other}
        """)
    fake_openai.handler("other", lambda request: text("other read: " + _task(request)))

    result, data, _ = _execute(team, tmp_path)

    assert result.code == 0, result.err
    (first, _second) = fake_openai.requests("noter")
    tools = sorted(t["function"]["name"] for t in first.request.get("tools") or [])
    assert "workspace_write_notes" not in tools and "workspace_read" in tools
    assert data["workspace"]["entries"]["notes"] == {
        "version": 1,
        "value": ["note from the step"],
        "written_by": ["workflow"],
    }
    assert data["final_text"] == "other read: note from the step"


def test_the_ready_made_workflow_runs_offline_reading_and_writing_the_workspace(tmp_path: Path) -> None:
    team = REPO / "tests" / "config" / "valid" / "workflow_workspace.yaml"

    result, data, events = _execute(team, tmp_path)

    assert result.code == 0, result.err
    entries = data["workspace"]["entries"]
    assert entries["findings"]["written_by"] == ["workflow"] and entries["findings"]["version"] == 1
    assert all(set(f) == {"claim", "source"} for f in entries["findings"]["value"])
    assert isinstance(entries["best"]["value"], int | float) and entries["best"]["version"] == 2
    assert entries["report"]["version"] >= 3 and data["final_text"] == entries["report"]["value"]
    steps = [w["data"]["step"] for w in _writes(events) if w["agent_path"] == ["workflow"]]
    assert steps[:2] == ["research", "score"] and set(steps[2:]) == {"draft"}


def test_validate_locates_a_write_without_a_workspace_and_graph_draws_reads_and_writes(tmp_path: Path) -> None:
    bare = tmp_path / "bare.yaml"
    bare.write_text(
        "version: 1\nname: wf\nworkflow:\n  steps:\n    - agent: researcher\n      write: findings\n"
        "agents:\n  researcher: {instructions: Research.}\n",
        encoding="utf-8",
    )
    checked = run_cli(["validate", str(bare)])
    assert checked.code == 2
    assert f"{bare}:6:14: error: workflow.steps[0].write: writes 'findings', but the file has no 'workspace:'" in (
        checked.out
    )

    graph = run_cli(["graph", str(REPO / "tests" / "config" / "valid" / "workflow_workspace.yaml")])
    assert graph.code == 0, graph.err
    lines = [line.strip() for line in graph.out.splitlines()]
    assert "s2 -->|writes| w_findings" in lines  # the map step
    assert "w_findings -.->|reads| s3" in lines and "s3 -->|writes| w_best" in lines  # the scorer step
    assert "w_findings -.->|reads| s5" in lines and "loop4 -->|writes| w_report" in lines  # the loop's writer
    assert "w_report -.->|reads| finish" in lines
    assert any(line.startswith("w_findings[(") for line in lines)
