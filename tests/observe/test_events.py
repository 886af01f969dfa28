"""The typed events: one class per kind, built from keyword data by the bus, rebuilt from trace lines."""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

import pytest

import teamrun
from teamrun.events import (
    EVENT_TYPES,
    AgentStart,
    DelegationEnd,
    Event,
    EventBus,
    LlmRetry,
    ToolEnd,
    event_from_record,
)
from teamrun.observe.trace_file import TraceWriter
from teamrun.observe.trace_read import read_trace
from teamrun.testing import EventRecorder

TEAM = """\
version: 1
name: events-team
supervisor: lead
defaults: {model: offline}
agents:
  lead: {description: Leads., delegates_to: [alpha, beta]}
  alpha: {description: Looks things up.}
  beta: {description: Writes.}
"""


def _bus() -> tuple[EventBus, list[Event]]:
    bus = EventBus("r1")
    seen: list[Event] = []
    bus.subscribe(seen.append)
    return bus, seen


def test_emit_builds_the_typed_event_for_the_kind() -> None:
    bus, seen = _bus()

    bus.emit(
        "tool_end",
        span_id="s3",
        parent_span_id="s2",
        agent_path=("lead", "alpha"),
        tool="grep",
        status="error",
        error="exit 2",
        chars=10,
    )

    (event,) = seen
    assert isinstance(event, ToolEnd) and event.kind == "tool_end"
    assert (event.tool, event.status, event.error, event.chars) == ("grep", "error", "exit 2", 10)
    assert (event.run_id, event.agent, event.depth) == ("r1", "alpha", 1)
    assert event.data == {"tool": "grep", "status": "error", "error": "exit 2", "chars": 10}


@pytest.mark.parametrize(
    ("kind", "data", "message"),
    [
        ("tool_end", {"tool": "grep", "status": "ok", "stauts": "ok"}, "unknown field(s) stauts"),
        ("tool_end", {"tool": "grep"}, "missing field(s) status"),
        ("delegation_end", {"status": "ok"}, "missing field(s) worker"),
        ("tool_finished", {}, "unknown event kind 'tool_finished'"),
    ],
)
def test_emit_rejects_unknown_and_missing_fields(kind: str, data: dict[str, object], message: str) -> None:
    bus, seen = _bus()

    with pytest.raises(TypeError, match=message.replace("(", r"\(").replace(")", r"\)")):
        bus.emit(kind, span_id="s1", parent_span_id=None, agent_path=("lead",), **data)
    assert seen == []


def test_publish_hands_a_prebuilt_event_to_every_subscriber() -> None:
    bus, seen = _bus()
    event = LlmRetry(
        run_id="r1",
        span_id="s4",
        parent_span_id=None,
        agent_path=("lead",),
        attempt=1,
        max_attempts=3,
        delay_s=0.5,
        error="429",
    )

    assert bus.publish(event) is event
    assert seen == [event]


def test_every_kind_has_a_class_and_every_field_a_docstring() -> None:
    import inspect

    from teamrun import events

    assert set(EVENT_TYPES) == set(events.EventKind.__args__)  # type: ignore[attr-defined]
    source = inspect.getsource(events)
    for kind, cls in EVENT_TYPES.items():
        assert cls.kind == kind and cls.__doc__
        for field in dataclasses.fields(cls):
            if field.name in events.BASE_FIELDS:
                continue
            body = inspect.getsource(cls)
            assert f"    {field.name}:" in body, (kind, field.name)
            after = body.split(f"    {field.name}:", 1)[1].splitlines()[1].strip()
            assert after.startswith('"""'), f"{kind}.{field.name} has no docstring under it"
    assert "class RunWarning" in source


def test_events_of_a_run_are_typed_and_workers_hang_below_their_delegation(tmp_path: Path) -> None:
    path = tmp_path / "team.yaml"
    path.write_text(TEAM, encoding="utf-8")
    recorder = EventRecorder()

    result = teamrun.load_team(path).run_sync("go", subscribers=[recorder])

    assert result.status == "done"
    starts = {e.agent: e for e in recorder.events if isinstance(e, AgentStart)}
    delegations = {e.worker: e for e in recorder.events if isinstance(e, DelegationEnd)}
    for worker in ("alpha", "beta"):
        agent = starts[worker]
        assert agent.parent_span_id == delegations[worker].span_id != agent.span_id
        assert agent.model == "offline"
    assert starts["lead"].parent_span_id == recorder.events[0].span_id  # the run span


def test_trace_lines_rebuild_the_same_typed_events(tmp_path: Path) -> None:
    path = tmp_path / "team.yaml"
    path.write_text(TEAM, encoding="utf-8")
    recorder = EventRecorder()
    trace_path = tmp_path / "run.jsonl"

    with TraceWriter(trace_path, content=True) as writer:
        teamrun.load_team(path).run_sync("go", subscribers=[recorder, writer])

    rebuilt = read_trace(trace_path).events
    assert [type(e) for e in rebuilt] == [type(e) for e in recorder.events]
    for original, again in zip(recorder.events, rebuilt, strict=True):
        assert again.data == json.loads(json.dumps(original.data))  # tuples come back as lists
        assert (again.span_id, again.parent_span_id, again.agent_path) == (
            original.span_id,
            original.parent_span_id,
            original.agent_path,
        )


def test_a_trace_line_without_content_still_rebuilds() -> None:
    event = event_from_record(
        {
            "kind": "delegation_start",
            "run_id": "r",
            "span_id": "s3",
            "parent_span_id": "s2",
            "agent_path": ["lead"],
            "time": 1.0,
            "data": {"worker": "alpha", "new": 1},
        }
    )

    assert event.kind == "delegation_start" and event.data == {"worker": "alpha", "task": ""}


def test_model_content_reaches_every_subscriber_through_the_bus(tmp_path: Path) -> None:
    from teamrun.events import LlmIO, LlmStart
    from teamrun.observe.trace_file import ContentCapture

    path = tmp_path / "team.yaml"
    path.write_text(TEAM, encoding="utf-8")
    recorder = EventRecorder()

    result = teamrun.load_team(path, wrap_model=ContentCapture).run_sync("go", subscribers=[recorder])

    assert result.status == "done"
    calls = {e.span_id: e for e in recorder.events if isinstance(e, LlmStart)}
    io = [e for e in recorder.events if isinstance(e, LlmIO)]
    assert len(io) == len(calls) >= 3
    for event in io:
        assert calls[event.span_id].agent_path == event.agent_path  # in the model call's span
    first = next(e for e in io if e.agent_path == ("lead",))
    assert [m["role"] for m in first.new_messages] == ["system", "user"] and first.turn == 1


def test_docs_list_every_kind_with_its_fields() -> None:
    docs = (Path(__file__).resolve().parents[2] / "docs" / "events.md").read_text(encoding="utf-8")
    rows = {
        line.split("|")[1].strip(" `"): line.split("|")[2]
        for line in docs.splitlines()
        if line.startswith("| `") and line.count("|") == 4
    }
    for kind, cls in EVENT_TYPES.items():
        assert kind in rows, f"docs/events.md has no row for {kind}"
        own = [
            f.name
            for f in dataclasses.fields(cls)
            if f.name not in {"run_id", "span_id", "parent_span_id", "agent_path", "time"}
        ]
        listed = re.findall(r"`(\w+)`", re.sub(r"\([^)]*\)", "", rows[kind]))
        assert listed == own, (kind, listed, own)


def test_a_trace_written_when_workers_shared_the_delegation_span_still_reads_as_a_tree(tmp_path: Path) -> None:
    def line(kind: str, span: str, parent: str | None, path: list[str], at: float, **data: object) -> str:
        return json.dumps(
            {
                "kind": kind,
                "run_id": "r",
                "span_id": span,
                "parent_span_id": parent,
                "agent_path": path,
                "depth": len(path) - 1,
                "time": at,
                "data": data,
            }
        )

    old = tmp_path / "old.jsonl"
    old.write_text(
        "\n".join(
            [
                json.dumps({"kind": "trace", "format": "teamrun-trace", "v": 1, "content": False}),
                line("run_start", "s1", None, [], 0.0, team="t"),
                line("agent_start", "s2", "s1", ["lead"], 0.1, model="m"),
                line("delegation_start", "s3", "s2", ["lead"], 0.2, worker="w"),
                line("agent_start", "s3", "s2", ["lead", "w"], 0.3, model="m"),  # the worker reused the span id
                line("llm_start", "s4", "s3", ["lead", "w"], 0.4, model="m"),
                line("llm_end", "s4", "s3", ["lead", "w"], 0.5, status="ok", usage={"total_tokens": 9}),
                line("agent_end", "s3", "s2", ["lead", "w"], 0.6, status="ok"),
                line("delegation_end", "s3", "s2", ["lead"], 0.7, worker="w", status="ok"),
                line("agent_end", "s2", "s1", ["lead"], 0.8, status="ok"),
                line("run_end", "s1", None, [], 0.9, status="done"),
            ]
        )
        + "\n",
        encoding="utf-8",
    )

    trace = read_trace(old)

    assert trace.complete
    (run,) = trace.roots
    (lead,) = run.children
    (delegation,) = lead.children
    (worker,) = delegation.children
    assert (delegation.kind, worker.kind, worker.name, worker.tokens) == ("delegation", "agent", "w", 9)
