"""OTel (issue 44.4): what an agent recalled from long-term memory and what it saved are events of its
``invoke_agent`` span, at the time they happened, with the attributes docs/view.md lists (ids and scores as
lists of strings and of numbers); the query and the facts only with content."""

from __future__ import annotations

from pathlib import Path

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import teamrun
from teamrun.events import Event, MemoryRecall, MemorySave
from teamrun.observe.otel import OTelExporter

DESK = Path(__file__).resolve().parents[2] / "teams" / "support-desk.yaml"


def _run(tmp_path: Path, *, content: bool) -> tuple[list[ReadableSpan], list[MemoryRecall | MemorySave]]:
    """support-desk for customer-42 on the offline model and embedding (the desk saves "example" and recalls it
    before its last turn; billing searches): the finished spans, and the memory events the run emitted."""
    memory = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    emitted: list[MemoryRecall | MemorySave] = []

    def keep(event: Event) -> None:
        if isinstance(event, MemoryRecall | MemorySave):
            emitted.append(event)

    team = teamrun.load_team(DESK, store=tmp_path / "teamrun.db")
    exporter = OTelExporter(provider, content=content)
    assert team.run_sync("example", resource="customer-42", subscribers=[exporter, keep]).status == "done"
    provider.shutdown()
    return list(memory.get_finished_spans()), emitted


@pytest.mark.parametrize("content", [False, True])
def test_recalls_and_saves_are_events_of_the_agents_span_with_ids_scores_and_facts_only_with_content(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, content: bool
) -> None:
    monkeypatch.delenv("TEAMRUN_MODEL", raising=False)  # the team file's models: offline unless these say otherwise
    monkeypatch.delenv("TEAMRUN_EMBEDDING_MODEL", raising=False)
    spans, emitted = _run(tmp_path, content=content)
    assert any(isinstance(e, MemoryRecall) and e.ids for e in emitted)  # the desk recalled what it saved
    assert {e.how for e in emitted if isinstance(e, MemoryRecall)} == {"recall", "search"}
    assert [e.status for e in emitted if isinstance(e, MemorySave)] == ["saved"]

    for agent in ("desk", "billing"):
        (span,) = [s for s in spans if s.name == f"invoke_agent {agent}"]
        mine = [e for e in emitted if e.agent_path[-1] == agent]
        assert [e.name for e in span.events] == [e.kind for e in mine]
        for event, said in zip(mine, span.events, strict=True):
            attributes = dict(said.attributes or {})
            assert span.start_time is not None and span.end_time is not None
            assert span.start_time <= said.timestamp <= span.end_time
            assert attributes["teamrun.resource"] == "customer-42"
            if isinstance(event, MemoryRecall):
                assert attributes["teamrun.how"] == event.how
                assert attributes["teamrun.ids"] == tuple(event.ids)
                assert attributes["teamrun.scores"] == tuple(event.scores)  # numbers, not a string of a list
                assert all(isinstance(s, float) for s in attributes["teamrun.scores"])  # type: ignore[union-attr]
                assert attributes["teamrun.replayed"] is False
                if content:
                    assert attributes["teamrun.query"] == event.query
                    assert attributes["teamrun.facts"] == tuple(event.facts)
                else:
                    assert "teamrun.query" not in attributes and "teamrun.facts" not in attributes
            else:
                assert isinstance(event, MemorySave)
                assert attributes["teamrun.status"] == "saved" and attributes["teamrun.id"] == event.id
                assert (attributes.get("teamrun.fact") == "example") if content else "teamrun.fact" not in attributes
