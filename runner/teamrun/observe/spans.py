"""Where each event sits in the span tree: run → agent → delegation → agent → llm / tool.

Every span names its parent with ``parent_span_id`` — a worker's agent span
names the delegation span that started it — and :class:`SpanIndex` follows
those links. The trace reader, the OpenTelemetry exporter and the live tree
agree because they all follow the same links.

Traces written before workers had spans of their own gave a delegation and its
worker the same ``span_id``; spans are keyed by ``(kind, span_id)`` so such
files still read as the same tree.
"""

from __future__ import annotations

from typing import Literal

__all__ = ["END_KINDS", "POINT_KINDS", "START_KINDS", "SpanIndex", "SpanKey", "SpanKind"]

SpanKind = Literal["run", "agent", "delegation", "llm", "tool"]
SpanKey = tuple[SpanKind, str]

START_KINDS: dict[str, SpanKind] = {
    "run_start": "run",
    "agent_start": "agent",
    "delegation_start": "delegation",
    "llm_start": "llm",
    "tool_start": "tool",
}
END_KINDS: dict[str, SpanKind] = {
    "run_end": "run",
    "agent_end": "agent",
    "delegation_end": "delegation",
    "llm_end": "llm",
    "tool_end": "tool",
}
POINT_KINDS = frozenset(
    {
        "warning",
        "budget",
        "hook",
        "llm_retry",
        "llm_wait",
        "llm_io",
        "accept",
        "workspace_write",
        "board_op",
        "remote_update",
        "memory_recall",
        "memory_save",
    }
)
"""Events that happen inside a span rather than opening or closing one."""

_PARENT_ORDER: tuple[SpanKind, ...] = ("agent", "run", "delegation")


class SpanIndex:
    """Remembers the spans seen so far and places new ones."""

    def __init__(self) -> None:
        self.parents: dict[SpanKey, SpanKey | None] = {}

    def __contains__(self, key: object) -> bool:
        return key in self.parents

    def start(self, kind: SpanKind, span_id: str, parent_span_id: str | None) -> tuple[SpanKey, SpanKey | None]:
        """Register a span that starts; returns its key and its parent's key (``None`` for a root)."""
        key: SpanKey = (kind, span_id)
        parent: SpanKey | None
        if kind == "agent" and ("delegation", span_id) in self.parents:  # an old trace: shared ids
            parent = ("delegation", span_id)
        else:
            parent = self._find(parent_span_id)
        self.parents[key] = parent
        return key, parent

    def owner(self, event_kind: str, span_id: str, parent_span_id: str | None) -> SpanKey | None:
        """The span a point event (warning, retry, ...) belongs to."""
        if event_kind in ("llm_retry", "llm_wait", "llm_io") and ("llm", span_id) in self.parents:
            return ("llm", span_id)
        return self._find(span_id) or self._find(parent_span_id)

    def _find(self, span_id: str | None) -> SpanKey | None:
        if span_id is None:
            return None
        for kind in _PARENT_ORDER:
            if (kind, span_id) in self.parents:
                return (kind, span_id)
        return None
