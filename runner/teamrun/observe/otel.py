"""``--otel``: the run's spans exported with the OpenTelemetry SDK.

Spans nest the way observability UIs expect — ``run`` → ``invoke_agent lead``
→ ``delegate researcher`` → ``invoke_agent researcher`` → ``chat <model>`` /
``execute_tool <tool>`` — with start and end times taken from the events and
GenAI semantic-convention attributes (``gen_ai.operation.name``,
``gen_ai.agent.name``, ``gen_ai.system`` / ``gen_ai.provider.name``,
``gen_ai.request.model`` (the first model of an agent's list) and
``gen_ai.response.model`` (the one that answered: a fallback's, with
``teamrun.fallback`` saying why), ``gen_ai.usage.input_tokens`` /
``output_tokens`` / ``cache_read.input_tokens`` / ``cache_creation.input_tokens``,
``gen_ai.response.finish_reasons``, ``gen_ai.tool.name``), so tracing backends
that know the convention show teamrun runs without a mapping. What happens inside a span (a retry, a
warning, what an agent recalled from memory or saved) is an event of that span with the event's fields as
``teamrun.*`` attributes (content fields only with ``content``). The OTLP
endpoint comes from the standard variables (``OTEL_EXPORTER_OTLP_ENDPOINT``,
``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``, ``OTEL_EXPORTER_OTLP_HEADERS``...).

The SDK is optional (the ``otel`` extra). Nothing here imports it
until an exporter is built.
"""

from __future__ import annotations

import importlib
import os
import threading
from collections.abc import Iterable, Mapping
from typing import Any

from teamrun.errors import UsageError
from teamrun.events import AgentStart, DelegationStart, Event, LlmEnd, LlmIO, LlmStart, RunStart, ToolStart
from teamrun.extras import install_hint
from teamrun.observe.spans import END_KINDS, POINT_KINDS, START_KINDS, SpanIndex, SpanKey, SpanKind
from teamrun.observe.trace_file import CONTENT_FIELDS, wall_clock
from teamrun.secrets import Redactor

__all__ = [
    "EXPORT_TIMEOUT_S",
    "OTelExporter",
    "export_timeout_s",
    "gen_ai_system",
    "otlp_tracer_provider",
    "require_otel",
    "shutdown_provider",
]

_FAILED = frozenset({"error", "failed"})

_CACHE_USAGE = {
    "cached_tokens": "gen_ai.usage.cache_read.input_tokens",
    "cache_write_tokens": "gen_ai.usage.cache_creation.input_tokens",
}
"""Usage counts of the provider's prompt cache and their GenAI semantic-convention names (semconv 0.66b)."""


def require_otel(*, exporter: bool = False) -> None:
    """Raise a :class:`UsageError` saying what to install when the OpenTelemetry packages are missing."""
    modules = ["opentelemetry.sdk.trace"]
    if exporter:
        modules.append("opentelemetry.exporter.otlp.proto.http.trace_exporter")
    try:
        for module in modules:
            importlib.import_module(module)
    except ImportError as exc:
        raise UsageError(
            f"--otel needs the OpenTelemetry SDK and OTLP exporter, which are not installed ({exc.name} is "
            f"missing); install them with: {install_hint('otel')}"
        ) from None


EXPORT_TIMEOUT_S = 2.0
"""How long one export (all its retries included) may take, unless ``OTEL_EXPORTER_OTLP_TRACES_TIMEOUT``
or ``OTEL_EXPORTER_OTLP_TIMEOUT`` says otherwise. The SDK's own default (10 s, retrying with backoff)
made a run with no collector listening wait that long at exit; a CLI run should not."""

_TIMEOUT_VARIABLES = ("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", "OTEL_EXPORTER_OTLP_TIMEOUT")


def export_timeout_s(environ: Mapping[str, str] | None = None) -> float | None:
    """The export timeout teamrun sets: ``None`` (the SDK reads it) when a standard variable sets one."""
    env = os.environ if environ is None else environ
    return None if any(env.get(name) for name in _TIMEOUT_VARIABLES) else EXPORT_TIMEOUT_S


def otlp_tracer_provider(service_name: str = "teamrun") -> Any:
    """A ``TracerProvider`` sending spans over OTLP/HTTP to the endpoint the standard env vars name.

    Each export gives up after :data:`EXPORT_TIMEOUT_S` (retries included); shut it down with
    :func:`shutdown_provider`.
    """
    require_otel(exporter=True)
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    provider = TracerProvider(resource=Resource.create({"service.name": service_name}))
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(timeout=export_timeout_s())))
    return provider


def shutdown_provider(provider: Any) -> None:
    """Send what is left and stop: at most one bounded export (spans still queued), then shutdown."""
    timeout = export_timeout_s() or EXPORT_TIMEOUT_S
    provider.force_flush(int(timeout * 1000))
    provider.shutdown()


_SYSTEMS = {
    "gemini": "gcp.gemini",
    "vertex_ai": "gcp.vertex_ai",
    "bedrock": "aws.bedrock",
    "azure": "azure.ai.openai",
    "azure_ai": "azure.ai.inference",
    "mistral": "mistral_ai",
    "offline": "teamrun",
    "replay": "teamrun",
}
"""LiteLLM provider prefixes whose GenAI semantic-convention name differs (the rest are the same word)."""
_BARE = (
    ("gpt-", "openai"),
    ("o1", "openai"),
    ("o3", "openai"),
    ("o4", "openai"),
    ("chatgpt", "openai"),
    ("claude", "anthropic"),
    ("gemini", "gcp.gemini"),
    ("command", "cohere"),
)
"""Model names LiteLLM accepts without a provider prefix, by how they begin."""


def gen_ai_system(model: str) -> str | None:
    """The ``gen_ai.system`` of a LiteLLM model string (``openai/gpt-4o`` → ``openai``); ``None`` when unknown."""
    provider, slash, _ = model.partition("/")
    if slash:
        return _SYSTEMS.get(provider, provider)
    if model in _SYSTEMS:
        return _SYSTEMS[model]
    return next((system for start, system in _BARE if model.startswith(start)), None)


def _ns(monotonic: float) -> int:
    return int(wall_clock(monotonic) * 1_000_000_000)


def _attribute(value: Any) -> Any:
    """An OpenTelemetry attribute value (str, bool, int, float or a list of one of them): a list of numbers stays
    one (a recall's ``scores``; whole and fractional numbers together as floats), anything else is its text."""
    if isinstance(value, bool | int | float | str):
        return value
    if not isinstance(value, list | tuple):
        return str(value)
    if all(isinstance(v, str) for v in value):
        return list(value)
    for kind in (bool, int, float):  # the SDK takes a list of one type only (a bool is no int here)
        if all(type(v) is kind for v in value):
            return list(value)
    if all(type(v) in (int, float) for v in value):
        return [float(v) for v in value]
    return str(value)


class OTelExporter:
    """An event-bus subscriber that turns a run's events into OpenTelemetry spans.

    ``tracer_provider``: the provider to use (default: the global one). With
    ``content`` the task and input texts become span attributes too; secrets
    are masked either way.
    """

    def __init__(self, tracer_provider: Any = None, *, content: bool = False, redactor: Redactor | None = None) -> None:
        require_otel()
        from opentelemetry import trace

        provider = tracer_provider if tracer_provider is not None else trace.get_tracer_provider()
        from teamrun._version import __version__

        self._trace = trace
        self.tracer = provider.get_tracer("teamrun", __version__)
        self.content = content
        self.redactor = redactor or Redactor()
        self._index = SpanIndex()
        self._open: dict[SpanKey, Any] = {}
        self._lock = threading.Lock()

    def keep_secrets(self, values: Iterable[str]) -> None:
        """Mask these values too from now on (a secret answer: :meth:`~teamrun.events.EventBus.keep_secrets`)."""
        self.redactor.add(values, declared=True)

    def __call__(self, event: Event) -> None:
        if isinstance(event, LlmIO) and not self.content:
            return  # nothing but content
        with self._lock:
            key_span = f"{event.run_id}:{event.span_id}"
            parent_span = f"{event.run_id}:{event.parent_span_id}" if event.parent_span_id else None
            if event.kind in START_KINDS:
                self._start(START_KINDS[event.kind], key_span, parent_span, event)
            elif event.kind in END_KINDS:
                span = self._open.pop((END_KINDS[event.kind], key_span), None)
                if span is not None:
                    self._end(span, event)
                if event.kind == "run_end":
                    self._end_leftovers(event)
            elif event.kind in POINT_KINDS:
                owner = self._index.owner(event.kind, key_span, parent_span)
                span = self._open.get(owner) if owner is not None else None
                if span is not None:
                    span.add_event(event.kind, attributes=self._attributes(event), timestamp=_ns(event.time))

    def _start(self, kind: SpanKind, span_id: str, parent_span_id: str | None, event: Event) -> None:
        key, parent = self._index.start(kind, span_id, parent_span_id)
        parent_span = self._open.get(parent) if parent is not None else None
        context = self._trace.set_span_in_context(parent_span) if parent_span is not None else None
        name, attributes = self._describe(kind, event)
        span_kind = self._trace.SpanKind.CLIENT if kind == "llm" else self._trace.SpanKind.INTERNAL
        self._open[key] = self.tracer.start_span(
            name, context=context, kind=span_kind, attributes=attributes, start_time=_ns(event.time)
        )

    def _describe(self, kind: SpanKind, event: Event) -> tuple[str, dict[str, Any]]:
        attributes: dict[str, Any] = {
            "teamrun.run_id": event.run_id,
            "teamrun.span_id": event.span_id,
            "teamrun.agent_path": "/".join(event.agent_path),
        }
        match event:
            case RunStart():
                name = f"run {event.team}".strip()
                attributes["teamrun.team"] = event.team
            case AgentStart():
                name = f"invoke_agent {event.agent}"
                attributes.update({"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": event.agent})
                attributes.update(self._model_attributes(event.model))
            case DelegationStart():
                name = f"delegate {event.worker}"
                attributes.update({"teamrun.delegation.worker": event.worker, "teamrun.delegation.parent": event.agent})
            case LlmStart():
                name = f"chat {event.model}".strip()
                attributes["gen_ai.operation.name"] = "chat"
                attributes["gen_ai.agent.name"] = event.agent
                attributes.update(self._model_attributes(event.model))
            case ToolStart():
                name = f"execute_tool {event.tool}"
                attributes.update({"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": event.tool})
            case _:
                name = event.kind
        if self.content:
            for field in ("input", "task"):
                value = getattr(event, field, None)
                if isinstance(value, str) and value:
                    attributes[f"teamrun.{field}"] = value
        return name, self.redactor.value(attributes)

    @staticmethod
    def _model_attributes(model: Any) -> dict[str, Any]:
        if not model:
            return {}
        shown = str(model)
        found = {"gen_ai.request.model": shown}
        system = gen_ai_system(shown)
        if system is not None:  # the convention's older name and its newer one, so either kind of backend reads it
            found["gen_ai.system"] = system
            found["gen_ai.provider.name"] = system
        return found

    def _attributes(self, event: Event) -> dict[str, Any]:
        shown = {
            f"teamrun.{k}": _attribute(v)
            for k, v in event.data.items()
            if v is not None and (self.content or k not in CONTENT_FIELDS)
        }
        return dict(self.redactor.value(shown))

    def _end(self, span: Any, event: Event) -> None:
        status = str(getattr(event, "status", None) or "ok")
        span.set_attribute("teamrun.status", status)
        usage = getattr(event, "usage", None)
        if getattr(event, "usage_known", True) is False:  # a remote worker that reported none: no pretended 0
            span.set_attribute("teamrun.usage_known", False)
        elif isinstance(usage, Mapping):
            span.set_attribute("gen_ai.usage.input_tokens", int(usage.get("input_tokens", 0)))
            span.set_attribute("gen_ai.usage.output_tokens", int(usage.get("output_tokens", 0)))
            for field, name in _CACHE_USAGE.items():  # only when the provider reported some: no made-up 0
                if usage.get(field):
                    span.set_attribute(name, int(usage[field]))
        if isinstance(event, LlmEnd):
            self._answered(span, event)
        cost = getattr(event, "cost", None)
        if isinstance(cost, int | float):
            span.set_attribute("teamrun.cost_usd", float(cost))
        finish = getattr(event, "finish_reason", None)
        if finish:
            span.set_attribute("gen_ai.response.finish_reasons", [str(finish)])
        for field in ("stopped_by", "tool_calls", "chars"):
            value = getattr(event, field, None)
            if value not in (None, [], (), ""):
                span.set_attribute(f"teamrun.{field}", _attribute(value))
        if status in _FAILED:
            error = self.redactor.text(str(getattr(event, "error", None) or status))
            span.set_status(self._trace.Status(self._trace.StatusCode.ERROR, error))
        span.end(end_time=_ns(event.time))

    def _answered(self, span: Any, event: LlmEnd) -> None:
        """``gen_ai.response.model``: the model of the agent's list that answered (``llm_end``'s ``model``, set
        for a model with ``fallbacks``), else the one asked (``gen_ai.request.model``); and why not the first."""
        if str(event.status) != "ok":
            return
        asked = (getattr(span, "attributes", None) or {}).get("gen_ai.request.model")
        answered = event.model or asked
        if answered:
            span.set_attribute("gen_ai.response.model", self.redactor.text(str(answered)))
        if event.fallback:
            span.set_attribute("teamrun.fallback", self.redactor.text(event.fallback))

    def _end_leftovers(self, event: Event) -> None:
        """Spans the run stopped before they ended (cancelled workers) end with the run."""
        for key in [k for k in self._open if k[1].startswith(f"{event.run_id}:")]:
            span = self._open.pop(key)
            span.set_attribute("teamrun.status", "unfinished")
            span.end(end_time=_ns(event.time))
