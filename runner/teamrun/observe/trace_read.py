"""Reading a trace file back into a span tree, even when the run was killed half-way.

A line that is not JSON (a kill mid-write leaves at most the last one cut) is
skipped and noted; spans that never ended are marked ``unfinished`` and last
until the trace's final event.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from teamrun.errors import UsageError
from teamrun.observe.spans import END_KINDS, POINT_KINDS, START_KINDS, SpanIndex, SpanKey, SpanKind

__all__ = ["Trace", "TraceNode", "build_tree", "read_trace"]

UNFINISHED = "unfinished"


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
    """Time of the trace's last event, the end of an unfinished span."""

    @property
    def finished(self) -> bool:
        return self.end is not None

    @property
    def duration_s(self) -> float:
        return max((self.end if self.end is not None else self.last_seen) - self.start, 0.0)

    @property
    def tokens(self) -> int:
        """This span's tokens; for an unfinished agent, what its finished model calls used."""
        if self.usage:
            return int(self.usage.get("total_tokens", 0))
        if self.kind == "agent":
            return sum(c.tokens for c in self.children if c.kind == "llm")
        return 0

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
        """Every run in the trace ended (it was not killed or cut)."""
        runs = [r for r in self.roots if r.kind == "run"]
        return bool(runs) and all(r.finished for r in runs) and not self.problems

    @property
    def content(self) -> bool:
        return bool(self.header.get("content"))


def read_trace(path: str | Path) -> Trace:
    """Read a trace file; a missing or unreadable file is a :class:`UsageError`."""
    try:
        text = Path(path).read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        raise UsageError(f"cannot read the trace file {path}: {exc.strerror}") from None
    return parse_trace(text.splitlines(), source=str(path))


def parse_trace(lines: Iterable[str], *, source: str = "<trace>") -> Trace:
    records: list[dict[str, Any]] = []
    problems: list[str] = []
    header: dict[str, Any] = {}
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            problems.append(f"{source}:{number}: not a JSON line (cut short?); skipped")
            continue
        if not isinstance(record, dict) or "kind" not in record:
            problems.append(f"{source}:{number}: not a trace record; skipped")
        elif record["kind"] == "trace":
            header = record
        else:
            records.append(record)
    if not records and not header:
        raise UsageError(f"{source} is not a teamrun trace (no trace records in it)")
    return Trace(records, build_tree(records), header, problems)


def build_tree(records: Iterable[Mapping[str, Any]]) -> list[TraceNode]:
    """The span trees of ``records`` (trace lines or ``Event``-shaped dicts), roots in order."""
    index = SpanIndex()
    nodes: dict[SpanKey, TraceNode] = {}
    roots: list[TraceNode] = []
    last = 0.0
    for record in records:
        kind = str(record.get("kind"))
        run_id = str(record.get("run_id") or "")
        span = f"{run_id}:{record.get('span_id') or ''}"  # span ids restart with each run
        parent_span = f"{run_id}:{record['parent_span_id']}" if record.get("parent_span_id") else None
        data: Mapping[str, Any] = record.get("data") or {}
        at = float(record.get("time") or 0.0)
        last = max(last, at)
        if kind in START_KINDS:
            span_kind = START_KINDS[kind]
            key, parent = index.start(span_kind, span, parent_span)
            node = TraceNode(span_kind, str(record.get("span_id") or ""), _name(span_kind, record, data),
                             tuple(record.get("agent_path") or ()), at, attributes=dict(data))
            if node.kind == "run":
                node.attributes["run_id"] = run_id
            nodes[key] = node
            (nodes[parent].children if parent in nodes else roots).append(node)
        elif kind in END_KINDS:
            found = nodes.get((END_KINDS[kind], span))
            if found is not None:
                _close(found, at, data)
        elif kind in POINT_KINDS:
            owner = index.owner(kind, span, parent_span)
            if owner in nodes:
                nodes[owner].notes.append({"kind": kind, "time": at, **data})
    for node in nodes.values():
        node.last_seen = last
    return roots


def _name(kind: SpanKind, record: Mapping[str, Any], data: Mapping[str, Any]) -> str:
    if kind == "run":
        return str(data.get("team") or record.get("run_id") or "run")
    if kind == "delegation":
        return str(data.get("worker") or "")
    if kind == "llm":
        return str(data.get("model") or "model")
    if kind == "tool":
        return str(data.get("tool") or "tool")
    path = record.get("agent_path") or ()
    return str(path[-1]) if path else ""


def _close(node: TraceNode, at: float, data: Mapping[str, Any]) -> None:
    node.end = at
    node.status = str(data.get("status") or "ok")
    usage = data.get("usage")
    if isinstance(usage, Mapping):
        node.usage = {str(k): int(v) for k, v in usage.items() if isinstance(v, int)}
    cost = data.get("cost")
    node.cost = float(cost) if isinstance(cost, int | float) else 0.0
    node.error = str(data["error"]) if data.get("error") else None
    node.attributes.update({k: v for k, v in data.items() if k not in ("status", "usage", "cost", "error")})
