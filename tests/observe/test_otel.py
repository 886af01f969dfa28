"""OpenTelemetry: the run's spans nest run → supervisor → delegation → worker → llm, with event times."""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

import teamrun
from teamrun.cli import main
from teamrun.extras import install_hint
from tests.fakeserver import FakeOpenAI
from tests.observe.conftest import TeamWriter
from tests.observe.teams import script_fan_out

pytest.importorskip("opentelemetry.sdk.trace")

from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from teamrun.observe.otel import OTelExporter


def _spans(team_file: Path, task: str, **exporter: Any) -> list[ReadableSpan]:
    memory = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    result = teamrun.load_team(team_file).run_sync(task, subscribers=[OTelExporter(provider, **exporter)])
    assert result.status == "done"
    provider.shutdown()
    return list(memory.get_finished_spans())


def test_spans_nest_supervisor_delegation_worker_llm(fake_openai: FakeOpenAI, write_team: TeamWriter) -> None:
    script_fan_out(fake_openai)

    spans = _spans(write_team(), "compare a, b and c")

    by_id = {s.context.span_id: s for s in spans}  # type: ignore[union-attr]

    def parent(span: ReadableSpan) -> ReadableSpan | None:
        return by_id.get(span.parent.span_id) if span.parent is not None else None

    (run,) = [s for s in spans if s.name == "run observed-team"]
    (lead,) = [s for s in spans if s.name == "invoke_agent lead"]
    assert run.parent is None and parent(lead) is run
    assert len({s.context.trace_id for s in spans}) == 1  # type: ignore[union-attr]
    lead_calls = [s for s in spans if s.name == "chat openai/lead"]
    assert len(lead_calls) == 2 and all(parent(s) is lead for s in lead_calls)
    for worker in ("alpha", "beta", "gamma"):
        (delegation,) = [s for s in spans if s.name == f"delegate {worker}"]
        (agent,) = [s for s in spans if s.name == f"invoke_agent {worker}"]
        (llm,) = [s for s in spans if s.name == f"chat openai/{worker}"]
        assert parent(delegation) is lead and parent(agent) is delegation and parent(llm) is agent
        for outer, inner in ((run, lead), (lead, delegation), (delegation, agent), (agent, llm)):
            assert outer.start_time <= inner.start_time <= inner.end_time <= outer.end_time  # type: ignore[operator]
        attributes = dict(llm.attributes or {})
        assert attributes["gen_ai.operation.name"] == "chat"
        assert attributes["gen_ai.request.model"] == f"openai/{worker}"
        assert attributes["gen_ai.provider.name"] == "openai"
        assert int(attributes["gen_ai.usage.input_tokens"]) > 0  # type: ignore[arg-type]
        assert dict(agent.attributes or {})["gen_ai.agent.name"] == worker
        assert "teamrun.task" not in dict(delegation.attributes or {})  # no content unless asked
        assert delegation.status.status_code == StatusCode.UNSET
    assert dict(run.attributes or {})["teamrun.status"] == "done"


def test_content_attributes_only_when_asked(fake_openai: FakeOpenAI, write_team: TeamWriter) -> None:
    script_fan_out(fake_openai, delay=0.0)

    spans = _spans(write_team(), "compare a, b and c", content=True)

    (run,) = [s for s in spans if s.name.startswith("run ")]
    (alpha,) = [s for s in spans if s.name == "invoke_agent alpha"]
    assert dict(run.attributes or {})["teamrun.input"] == "compare a, b and c"
    assert dict(alpha.attributes or {})["teamrun.task"] == "about a"


def test_otel_flag_without_the_packages_is_a_clear_usage_error(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    for name in [m for m in sys.modules if m.startswith("opentelemetry")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "opentelemetry", None)  # what a missing package looks like to import

    team = str(Path(__file__).resolve().parents[2] / "teams" / "research-report.yaml")
    code = main(["execute", team, "-i", "x", "--otel"])

    assert code == 2
    err = capsys.readouterr().err
    assert "--otel needs the OpenTelemetry SDK" in err and f"install them with: {install_hint('otel')}\n" in err


class _Collector(BaseHTTPRequestHandler):
    posts: list[tuple[str, str, int]] = []

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.posts.append((self.path, self.headers.get("Content-Type", ""), len(body)))
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def collector() -> Iterator[str]:
    """A stand-in OTLP/HTTP collector on loopback; yields its endpoint."""
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Collector)
    _Collector.posts = []
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()


def test_otel_flag_exports_to_the_endpoint_from_the_standard_variables(
    fake_openai: FakeOpenAI,
    write_team: TeamWriter,
    collector: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    restore_structlog: None,
) -> None:
    pytest.importorskip("opentelemetry.exporter.otlp.proto.http.trace_exporter")
    script_fan_out(fake_openai, delay=0.0)
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", collector)

    code = main(["execute", str(write_team()), "-i", "go", "--progress", "none", "--otel"])

    assert code == 0, capsys.readouterr().err
    assert capsys.readouterr().out.strip() == "a, b and c compared"
    assert _Collector.posts and all(p[0] == "/v1/traces" for p in _Collector.posts)
    assert _Collector.posts[0][1] == "application/x-protobuf" and _Collector.posts[0][2] > 200


_OFFLINE_TEAM = """\
version: 1
name: otel-offline
supervisor: lead
defaults: {model: offline}
agents:
  lead: {description: Leads., delegates_to: [alpha]}
  alpha: {description: Looks things up.}
"""


def _unused_port() -> int:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture
def recording_exporter(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Every OTLP exporter the CLI builds, recording each export (start, end, result) and its shutdown."""
    import time

    from opentelemetry.exporter.otlp.proto.http import trace_exporter as module

    made: list[Any] = []

    class Recording(module.OTLPSpanExporter):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self.requested_timeout = kwargs.get("timeout")
            self.exports: list[tuple[float, float, Any, int]] = []
            self.shut_down = False
            made.append(self)

        def export(self, spans: Any) -> Any:
            started = time.monotonic()
            result = super().export(spans)
            self.exports.append((started, time.monotonic(), result, len(spans)))
            return result

        def shutdown(self) -> None:
            self.shut_down = True
            super().shutdown()

    monkeypatch.setattr(module, "OTLPSpanExporter", Recording)
    for name in ("OTEL_EXPORTER_OTLP_TIMEOUT", "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT"):
        monkeypatch.delenv(name, raising=False)
    return made


def test_otel_with_no_collector_gives_up_after_a_short_bounded_export(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    recording_exporter: list[Any],
    capsys: pytest.CaptureFixture[str],
    restore_structlog: None,
) -> None:
    from opentelemetry.sdk.trace.export import SpanExportResult

    from teamrun.observe.otel import EXPORT_TIMEOUT_S

    team = tmp_path / "team.yaml"
    team.write_text(_OFFLINE_TEAM, encoding="utf-8")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", f"http://127.0.0.1:{_unused_port()}")  # nobody listens

    code = main(["execute", str(team), "-i", "go", "--progress", "none", "--otel"])

    assert code == 0 and capsys.readouterr().out.strip()
    (exporter,) = recording_exporter
    # the exporter the run built is bounded (the SDK's default is 10 s of retries), and its HTTP client honours it
    assert exporter.requested_timeout is not None and exporter.requested_timeout <= 2.0
    assert exporter._client._timeout == exporter.requested_timeout == EXPORT_TIMEOUT_S
    assert exporter.exports, "the spans were sent (and failed) before exit"
    assert all(result == SpanExportResult.FAILURE for _, _, result, _ in exporter.exports)
    assert sum(count for *_, count in exporter.exports) >= 4  # run, lead, delegation, alpha...
    assert exporter.shut_down


def test_otel_export_timeout_from_the_standard_variable_wins(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    recording_exporter: list[Any],
    capsys: pytest.CaptureFixture[str],
    restore_structlog: None,
) -> None:
    from teamrun.observe.otel import export_timeout_s

    team = tmp_path / "team.yaml"
    team.write_text(_OFFLINE_TEAM, encoding="utf-8")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", f"http://127.0.0.1:{_unused_port()}")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "1")

    assert main(["execute", str(team), "-i", "go", "--progress", "none", "--otel"]) == 0

    (exporter,) = recording_exporter
    assert export_timeout_s() is None and exporter.requested_timeout is None
    assert exporter._client._timeout == 1.0


def test_model_content_becomes_span_events_of_the_model_call_with_content_on(tmp_path: Path) -> None:
    from teamrun.observe.trace_file import ContentCapture

    team = tmp_path / "team.yaml"
    team.write_text(_OFFLINE_TEAM, encoding="utf-8")
    found: dict[bool, list[ReadableSpan]] = {}
    for content in (True, False):
        memory = InMemorySpanExporter()
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(memory))
        result = teamrun.load_team(team, wrap_model=ContentCapture).run_sync(
            "go", subscribers=[OTelExporter(provider, content=content)]
        )
        assert result.status == "done"
        provider.shutdown()
        found[content] = list(memory.get_finished_spans())

    chats = [s for s in found[True] if s.name.startswith("chat ")]
    assert chats and all([e.name for e in s.events] == ["llm_io"] for s in chats)
    assert all("teamrun.reply" in (s.events[0].attributes or {}) for s in chats)
    assert not any(s.events for s in found[False] if s.name.startswith("chat "))


def test_model_call_spans_carry_the_gen_ai_semantic_convention_attributes(
    fake_openai: FakeOpenAI, write_team: TeamWriter
) -> None:
    from teamrun.events import Event, LlmEnd

    script_fan_out(fake_openai, delay=0.0)
    ends: dict[str, LlmEnd] = {}

    def keep(event: Event) -> None:
        if isinstance(event, LlmEnd):
            ends[event.span_id] = event

    memory = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    team = teamrun.load_team(write_team())
    assert team.run_sync("compare", subscribers=[OTelExporter(provider), keep]).status == "done"
    provider.shutdown()

    chats = [s for s in memory.get_finished_spans() if s.name.startswith("chat ")]
    assert len(chats) == len(ends) == 5
    for span in chats:
        attributes = dict(span.attributes or {})
        end = ends[str(attributes["teamrun.span_id"])]
        assert attributes["gen_ai.operation.name"] == "chat"
        assert attributes["gen_ai.system"] == "openai"
        assert attributes["gen_ai.request.model"] == span.name.removeprefix("chat ")
        assert attributes["gen_ai.usage.input_tokens"] == end.usage["input_tokens"] > 0
        assert attributes["gen_ai.usage.output_tokens"] == end.usage["output_tokens"] > 0
        assert list(attributes["gen_ai.response.finish_reasons"]) == [end.finish_reason]  # type: ignore[arg-type]


def test_tool_spans_name_the_tool_and_offline_calls_name_their_system(tmp_path: Path) -> None:
    memory = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    team = teamrun.load_team(Path(__file__).resolve().parents[2] / "teams" / "research-report.yaml", model="offline")
    assert team.run_sync("Compare Rust and Go", subscribers=[OTelExporter(provider)]).status == "done"
    provider.shutdown()

    spans = memory.get_finished_spans()
    tools = [dict(s.attributes or {}) for s in spans if s.name.startswith("execute_tool ")]
    assert tools and all(
        t["gen_ai.operation.name"] == "execute_tool" and t["gen_ai.tool.name"] == "notes" for t in tools
    )
    chats = [dict(s.attributes or {}) for s in spans if s.name.startswith("chat ")]
    assert chats and all(c["gen_ai.system"] == "teamrun" and c["gen_ai.request.model"] == "offline" for c in chats)


@pytest.mark.parametrize(
    ("model", "system"),
    [
        ("openai/gpt-4o-mini", "openai"),
        ("anthropic/claude-3-5-haiku", "anthropic"),
        ("gpt-4o", "openai"),
        ("claude-3-opus", "anthropic"),
        ("gemini/gemini-1.5-pro", "gcp.gemini"),
        ("ollama/llama3", "ollama"),
        ("bedrock/anthropic.claude-v2", "aws.bedrock"),
        ("offline", "teamrun"),
        ("my-local-model", None),
    ],
)
def test_gen_ai_system_of_litellm_model_strings(model: str, system: str | None) -> None:
    from teamrun.observe.otel import gen_ai_system

    assert gen_ai_system(model) == system
