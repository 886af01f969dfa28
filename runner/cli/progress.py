"""Showing a run as it happens, on stderr: a live agent tree on a terminal, plain lines otherwise.

Both views are event-bus subscribers; stdout stays reserved for the answer.
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field
from typing import TextIO

from teamrun.events import Event

_MARKS = {"running": "●", "ok": "✓", "done": "✓", "error": "✗", "budget_exhausted": "◐",
          "rejected": "⊘", "cancelled": "⊘"}
_IN = " \N{SINGLE RIGHT-POINTING ANGLE QUOTATION MARK} "
"""Between the names of an agent path: ``lead > researcher`` with a single angle quote."""


def _tokens(count: int) -> str:
    return f"{count / 1000:.1f}k tok" if count >= 1000 else f"{count} tok"


@dataclass
class _Node:
    name: str
    parent: str | None
    status: str = "running"
    tokens: int = 0
    cost: float = 0.0
    detail: str = ""
    children: list[str] = field(default_factory=list)


class PlainProgress:
    """One line per notable event, for logs and pipes."""

    def __init__(self, stream: TextIO | None = None) -> None:
        self.stream = stream or sys.stderr
        self.started = time.monotonic()

    def __call__(self, event: Event) -> None:
        line = self._line(event)
        if line:
            self.stream.write(f"[{event.time - self.started:7.2f}s] {line}\n")
            self.stream.flush()

    def _line(self, event: Event) -> str | None:
        data = event.data
        who = _IN.join(event.agent_path)
        if event.kind == "agent_start":
            return f"{who}: started ({data.get('model')})"
        if event.kind == "agent_end":
            usage = data.get("usage", {})
            stop = f", stopped by {data['stopped_by']}" if data.get("stopped_by") else ""
            spent = f"{_tokens(usage.get('total_tokens', 0))}, ${data.get('cost', 0):.4f}"
            return f"{who}: {data.get('status')} ({spent}{stop})"
        if event.kind == "delegation_start":
            return f"{who} → {data.get('worker')}: delegated"
        if event.kind == "delegation_end" and data.get("status") != "ok":
            return f"{who} → {data.get('worker')}: {data.get('status')}: {data.get('error')}"
        if event.kind == "tool_end":
            error = f": {data.get('error')}" if data.get("error") else ""
            return f"{who}: tool {data.get('tool')} {data.get('status')}{error}"
        if event.kind == "llm_retry":
            return f"{who}: model call retry {data.get('attempt')} after {data.get('error')}"
        if event.kind in ("warning", "budget"):
            return f"{who}: {event.kind}: {data.get('message') or data.get('reason')}"
        if event.kind == "run_end":
            tokens = _tokens(data.get("usage", {}).get("total_tokens", 0))
            took = f"{data.get('duration_s', 0):.2f}s"
            return f"run {data.get('status')} in {took}, {tokens}, ${data.get('cost', 0):.4f}"
        return None


class LiveTree:
    """A tree of agents redrawn in place (at most ten times a second)."""

    def __init__(self, stream: TextIO | None = None, *, interval: float = 0.1) -> None:
        self.stream = stream or sys.stderr
        self.interval = interval
        self.nodes: dict[str, _Node] = {}
        self.roots: list[str] = []
        self.owners: dict[str, str | None] = {}
        """Delegation span → the agent span that delegated (agents hang below delegations)."""
        self.drawn = 0
        self.last_draw = 0.0

    def __call__(self, event: Event) -> None:
        if event.kind == "delegation_start":
            self.owners[event.span_id] = event.parent_span_id
        elif event.kind == "agent_start":
            node = _Node(event.agent, event.parent_span_id)
            self.nodes[event.span_id] = node
            parent = self._agent_span(event.parent_span_id)
            if parent is not None:
                self.nodes[parent].children.append(event.span_id)
            else:
                self.roots.append(event.span_id)
        elif event.kind == "llm_end" and event.parent_span_id in self.nodes:
            node = self.nodes[event.parent_span_id]
            node.tokens += event.data.get("usage", {}).get("total_tokens", 0)
            node.cost += event.data.get("cost", 0.0)
        elif event.kind == "tool_start" and event.parent_span_id in self.nodes:
            self.nodes[event.parent_span_id].detail = f"tool {event.data.get('tool')}"
        elif event.kind == "agent_end" and event.span_id in self.nodes:
            node = self.nodes[event.span_id]
            node.status, node.detail = str(event.data.get("status")), ""
        elif event.kind == "delegation_end" and event.span_id in self.nodes:
            # The delegation's outcome is the final word on a worker (e.g. cancelled, not error).
            status = str(event.data.get("status"))
            if status != "ok":
                self.nodes[event.span_id].status, self.nodes[event.span_id].detail = status, ""
        elif event.kind == "run_end":
            for node in self.nodes.values():  # agents the run stopped before they ended
                if node.status == "running":
                    node.status, node.detail = "cancelled", ""
        self._draw(force=event.kind in ("run_end", "agent_end", "delegation_end"))

    def _agent_span(self, span: str | None) -> str | None:
        if span is None or span in self.nodes:
            return span
        return self.owners.get(span)

    def _lines(self) -> list[str]:
        lines: list[str] = []

        def walk(span: str, prefix: str, last: bool, top: bool) -> None:
            node = self.nodes[span]
            branch = "" if top else ("└─ " if last else "├─ ")
            mark = _MARKS.get(node.status, "·")
            extra = f"  {node.detail}" if node.detail else ""
            lines.append(f"{prefix}{branch}{mark} {node.name}  {node.status}  "
                         f"{_tokens(node.tokens)}  ${node.cost:.4f}{extra}")
            child_prefix = prefix if top else prefix + ("   " if last else "│  ")
            for i, child in enumerate(node.children):
                walk(child, child_prefix, i == len(node.children) - 1, False)

        for root in self.roots:
            walk(root, "", True, True)
        return lines

    def _draw(self, *, force: bool) -> None:
        now = time.monotonic()
        if not force and now - self.last_draw < self.interval:
            return
        self.last_draw = now
        lines = self._lines()
        if self.drawn:
            self.stream.write(f"\x1b[{self.drawn}F\x1b[J")
        self.stream.write("".join(line + "\n" for line in lines))
        self.stream.flush()
        self.drawn = len(lines)
