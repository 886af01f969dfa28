"""Reading a trace file back into a span tree, even when the run was killed half-way.

A line that is not JSON (a kill mid-write leaves at most the last one cut) is
skipped and noted; spans that never ended are marked ``unfinished`` and last
until the trace's final event.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from teamrun.errors import UsageError
from teamrun.events import DelegationStart, Event, LlmStart, RunStart, ToolStart, content_fields, event_from_record
from teamrun.observe.spans import END_KINDS, POINT_KINDS, START_KINDS, SpanIndex, SpanKey, SpanKind

__all__ = ["Trace", "TraceNode", "build_tree", "read_trace", "typed_events"]

UNFINISHED = "unfinished"
_CONTENT = content_fields()


@dataclass
class TraceNode:
    """One span: a run, an agent invocation, a delegation, a model call or a tool call."""

    kind: SpanKind
    span_id: str
    name: str
    agent_path: tuple[str, ...]
    start: float
    end: float | None = None
    status: str = UNFINISHED
    usage: dict[str, int] = field(default_factory=dict)
    cost: float = 0.0
    error: str | None = None
    attributes: dict[str, Any] = field(default_factory=dict)
    """Other start/end data: model, tool names called, stopped_by, task (with content)..."""
    notes: list[dict[str, Any]] = field(default_factory=list)
    """Point events inside the span: warnings, budget stops, hook errors, retries, content."""
    children: list[TraceNode] = field(default_factory=list)
    last_seen: float = 0.0
    """Time of the last event of the span's run, the end of an unfinished span."""

    @property
    def finished(self) -> bool:
        return self.end is not None

    @property
    def duration_s(self) -> float:
        return max((self.end if self.end is not None else self.last_seen) - self.start, 0.0)

    @property
    def tokens(self) -> int:
        """This span's tokens; for an agent whose end reported none (unfinished, or an older trace), what its
        finished model calls used; for a run likewise, what all its agents used (the run line has the totals,
        even in a trace cut short)."""
        if self.usage:
            return int(self.usage.get("total_tokens", 0))
        return sum(part.tokens for part in self._parts())

    @property
    def spent_usd(self) -> float:
        """This span's cost, summed like :attr:`tokens` for an unfinished agent or run."""
        if self.finished:
            return self.cost
        return self.cost + sum(part.spent_usd for part in self._parts())

    def _parts(self) -> list[TraceNode]:
        """What a span's spending is the sum of when its end did not say: an agent's model calls, a run's
        agents (each agent's own spending, its workers being agents of their own)."""
        if self.kind not in ("agent", "run"):
            return []
        if self.kind == "agent":
            return [c for c in self.children if c.kind == "llm"]
        return [node for node in self.walk() if node.kind == "agent"]

    def walk(self) -> Iterator[TraceNode]:
        yield self
        for child in self.children:
            yield from child.walk()

    def find(self, kind: SpanKind, name: str | None = None) -> list[TraceNode]:
        return [n for n in self.walk() if n.kind == kind and (name is None or n.name == name)]


@dataclass
class Trace:
    """A read trace: its records, the span trees (one root per run) and what looked wrong."""

    records: list[dict[str, Any]]
    roots: list[TraceNode]
    header: dict[str, Any] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)

    @property
    def complete(self) -> bool:
        """Every run in the trace ended (it was not killed or cut); lines skipped or mended are in ``problems``."""
        runs = [r for r in self.roots if r.kind == "run"]
        return bool(runs) and all(r.finished for r in runs)

    @property
    def content(self) -> bool:
        return bool(self.header.get("content"))

    @property
    def events(self) -> list[Event]:
        """The records as typed events (kinds this version does not know are left out)."""
        return typed_events(self.records)


def read_trace(path: str | Path) -> Trace:
    """Read a trace file; a missing or unreadable file, or one that is no regular file (a device like
    /dev/urandom, a pipe, a folder: reading it would not end), is a :class:`UsageError`."""
    try:
        if not Path(path).is_file() and Path(path).exists():
            raise UsageError(
                f"{path} is not a regular file: a trace is the .jsonl file `teamrun execute --trace` wrote"
            )
        text = Path(path).read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        raise UsageError(f"cannot read the trace file {path}: {exc.strerror}") from None
    return parse_trace(text.splitlines(), source=str(path))


def parse_trace(lines: Iterable[str], *, source: str = "<trace>") -> Trace:
    """Read trace lines; a line that cannot be a trace record is skipped and noted in ``problems``.

    ``NaN``, ``Infinity`` and numbers too big for a float are not JSON (a browser's ``JSON.parse``
    refuses them): each is read as ``null`` and noted.
    """
    records: list[dict[str, Any]] = []
    problems: list[str] = []
    header: dict[str, Any] = {}
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        where = f"{source}:{number}"
        not_json: list[str] = []
        try:
            record = json.loads(
                line,
                parse_constant=_as_null(not_json),
                parse_float=_finite_or_null(not_json),
                parse_int=_int_or_null(not_json),
            )
        except RecursionError:
            problems.append(f"{where}: nested too deep to read; skipped")
            continue
        except ValueError:  # json.JSONDecodeError, or a number JSON allows and Python will not read
            problems.append(f"{where}: not a JSON line (cut short?); skipped")
            continue
        if not_json:
            problems.append(f"{where}: {', '.join(not_json)} is not JSON; read as null")
        wrong = _malformed(record)
        if wrong:
            problems.append(f"{where}: {wrong}; skipped")
        elif record["kind"] == "trace":
            header = record
        else:
            records.append(record)
    if not records and not header:
        raise UsageError(f"{source} is not a teamrun trace (no trace records in it)")
    return Trace(records, build_tree(records), header, problems)


def _as_null(seen: list[str]) -> Callable[[str], None]:
    def read(constant: str) -> None:
        seen.append(constant)

    return read


def _finite_or_null(seen: list[str]) -> Callable[[str], float | None]:
    def read(text: str) -> float | None:
        value = float(text)
        if math.isfinite(value):
            return value
        seen.append(text)
        return None

    return read


def _int_or_null(seen: list[str]) -> Callable[[str], int | None]:
    """Whole numbers, except those too big for a float (as a browser reads them): null, noted."""

    def read(text: str) -> int | None:
        if len(text.lstrip("-")) <= _FLOAT_DIGITS:
            return int(text)
        seen.append(f"{text[:12]}... ({len(text)} digits)")
        return None

    return read


_FLOAT_DIGITS = 308
"""The most digits a whole number may have and still be a (finite) float."""


def _malformed(record: object) -> str | None:
    """Why ``record`` (a parsed line) cannot be a trace record, or ``None`` when it can."""
    if not isinstance(record, dict) or not isinstance(record.get("kind"), str):
        return "not a trace record"
    if not isinstance(record.get("data", {}), dict | None):
        return "its data is not an object"
    for clock in ("time", "ts"):
        value = record.get(clock, 0.0)
        if isinstance(value, bool) or not isinstance(value, int | float):
            return f"its {clock} is not a number"
    path = record.get("agent_path", [])
    if not isinstance(path, list | None) or not all(isinstance(name, str) for name in path or ()):
        return "its agent_path is not a list of names"
    return None


def typed_events(records: Iterable[Mapping[str, Any] | Event], problems: list[str] | None = None) -> list[Event]:
    """Trace lines turned back into typed events (:data:`~teamrun.events.EVENT_TYPES`); events pass through.

    A line of a kind this version does not know, or missing a required field, is
    skipped (and noted in ``problems`` when given).
    """
    events: list[Event] = []
    for record in records:
        if isinstance(record, Event):
            events.append(record)
            continue
        try:
            events.append(event_from_record(record))
        except (TypeError, ValueError) as exc:
            if problems is not None:
                problems.append(f"{record.get('kind')} record skipped: {exc}")
    return events


def build_tree(records: Iterable[Mapping[str, Any] | Event]) -> list[TraceNode]:
    """The span trees of ``records`` (trace lines or typed events), roots in order.

    Each span hangs below the span its ``parent_span_id`` names; an unfinished one lasts until its run's
    last event (a file may hold several runs).
    """
    index = SpanIndex()
    nodes: dict[SpanKey, TraceNode] = {}
    run_of: dict[SpanKey, str] = {}
    roots: list[TraceNode] = []
    last: dict[str, float] = {}
    for event in typed_events(records):
        kind = event.kind
        span = f"{event.run_id}:{event.span_id}"  # span ids restart with each run
        parent_span = f"{event.run_id}:{event.parent_span_id}" if event.parent_span_id else None
        at = event.time
        last[event.run_id] = max(last.get(event.run_id, at), at)
        if kind in START_KINDS:
            span_kind = START_KINDS[kind]
            key, parent = index.start(span_kind, span, parent_span)
            data = _shown(event)
            node = TraceNode(span_kind, event.span_id, _name(span_kind, event), event.agent_path, at, attributes=data)
            if node.kind == "run":
                node.attributes["run_id"] = event.run_id
            nodes[key] = node
            run_of[key] = event.run_id
            (nodes[parent].children if parent in nodes else roots).append(node)
        elif kind in END_KINDS:
            found = nodes.get((END_KINDS[kind], span))
            if found is not None:
                _close(found, event)
        elif kind in POINT_KINDS:
            owner = index.owner(kind, span, parent_span)
            if owner in nodes:
                nodes[owner].notes.append({"kind": kind, "time": at, **_shown(event)})
    for key, node in nodes.items():
        node.last_seen = last[run_of[key]]
    return roots


def _shown(event: Event) -> dict[str, Any]:
    """The event's own fields, without the content ones the trace left out (empty defaults)."""
    return {k: v for k, v in event.data.items() if not (k in _CONTENT and v in ("", (), [], {}))}


def _name(kind: SpanKind, event: Event) -> str:
    if isinstance(event, RunStart):
        return event.team or event.run_id or "run"
    if isinstance(event, DelegationStart):
        return event.worker
    if isinstance(event, LlmStart):
        return event.model or "model"
    if isinstance(event, ToolStart):
        return event.tool or "tool"
    return event.agent


def _close(node: TraceNode, event: Event) -> None:
    node.end = event.time
    data = event.data
    node.status = str(getattr(event, "status", None) or "ok")
    usage = getattr(event, "usage", None)
    if isinstance(usage, Mapping):
        node.usage = {str(k): int(v) for k, v in usage.items() if isinstance(v, int)}
    cost = getattr(event, "cost", None)
    node.cost = float(cost) if isinstance(cost, int | float) else 0.0
    error = getattr(event, "error", None)
    node.error = str(error) if error else None
    node.attributes.update({k: v for k, v in data.items() if k not in ("status", "usage", "cost", "error")})
