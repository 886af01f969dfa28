"""The offline model uses the workspace tools: it reads, writes with the version read, and retries a refusal."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from teamrun.engine.team import load_team
from teamrun.events import Event
from teamrun.llm.offline import simulate
from tests.workspace.conftest import WORKERS, write_team


def test_offline_workers_read_then_write_and_retry_a_stale_replace(tmp_path: Path) -> None:
    team = load_team(write_team(tmp_path), model="offline")
    events: list[Event] = []
    result = asyncio.run(team.run("Plan the launch", subscribers=[events.append]))

    assert result.status == "done", result.error
    writes = [e for e in events if e.kind == "workspace_write" and e.entry == "plan"]
    applied = [e for e in writes if e.status == "applied"]
    changed = [e.version_after for e in applied if e.version_after != e.version_before]
    assert changed == sorted(set(changed))  # one change per version (the same value again changes nothing)
    assert any(e.status == "refused" and e.reason == "stale" for e in writes)
    assert {e.agent for e in applied} == set(WORKERS)  # the stale ones re-wrote from the version they were given
    assert result.workspace["entries"]["plan"]["written_by"] and result.workspace["entries"]["count"]["value"] > 0


def test_offline_reads_first_and_writes_with_the_version_it_read(tmp_path: Path) -> None:
    from teamrun.config.loader import load_config
    from teamrun.engine.workspace.tools import workspace_tools

    config = load_config(write_team(tmp_path)).config
    tools = workspace_tools(config, "w1")
    messages: list[dict[str, object]] = [{"role": "user", "content": "Plan the launch"}]
    first = simulate(messages, tools)
    assert [c.name for c in first.tool_calls] == ["workspace_read"] * 3
    read = {"entry": "plan", "version": 4, "value": "x", "written_by": ["w2"], "merge": "replace"}
    messages += [
        {"role": "assistant", "content": None, "tool_calls": [_call("c1", "workspace_read", {"entry": "plan"})]},
        {"role": "tool", "tool_call_id": "c1", "content": json.dumps(read)},
    ]
    second = simulate(messages, tools)
    plan = next(c for c in second.tool_calls if c.name == "workspace_write_plan")
    assert json.loads(plan.arguments)["version"] == 4
    refused = {"status": "refused", "entry": "plan", "version": 5, "reason": "stale", "message": "m", "value": "y"}
    messages += [
        {"role": "assistant", "content": None, "tool_calls": [_call("c2", "workspace_write_plan", {})]},
        {"role": "tool", "tool_call_id": "c2", "content": json.dumps(refused)},
    ]
    third = simulate(messages, tools)
    assert [(c.name, json.loads(c.arguments)["version"]) for c in third.tool_calls if "plan" in c.name] == [
        ("workspace_write_plan", 5)
    ]


def _call(call_id: str, name: str, arguments: dict[str, object]) -> dict[str, object]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": json.dumps(arguments)}}


def test_every_write_is_a_span_event_in_opentelemetry() -> None:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from teamrun.observe.otel import OTelExporter

    memory = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    team = load_team(Path(__file__).resolve().parents[2] / "teams" / "shared-findings.yaml", model="offline")
    events: list[Event] = []
    result = team.run_sync("Rust and Go", subscribers=[OTelExporter(provider), events.append])
    provider.shutdown()

    assert result.status == "done"
    exported = [
        dict(e.attributes or {}) for s in memory.get_finished_spans() for e in s.events if e.name == "workspace_write"
    ]
    writes = [e for e in events if e.kind == "workspace_write"]
    assert len(exported) == len(writes) >= 3
    assert {(a["teamrun.entry"], a["teamrun.status"]) for a in exported} == {(w.entry, w.status) for w in writes}
