"""Showing a trace's delegation tree: as text for people, JSON for tools, Mermaid for docs.

In the text and Mermaid views a delegation and the worker run it started are
one line (the delegation's outcome is the final word on the worker); the JSON
view keeps every span, nested as in OpenTelemetry.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Literal

from teamrun.money import format_usd
from teamrun.observe.bidi import inert, isolate
from teamrun.observe.trace_read import UNFINISHED, Trace, TraceNode

__all__ = ["TraceFormat", "render_json", "render_mermaid", "render_text", "render_trace"]

TraceFormat = Literal["text", "json", "mermaid"]

_MARKS = {
    "ok": "✓",
    "done": "✓",
    "handed_off": "→",
    "error": "✗",
    "failed": "✗",
    "budget_exhausted": "◐",
    "rejected": "⊘",
    "cancelled": "⊘",
    "waiting": "◷",
    UNFINISHED: "…",
}


@dataclass
class _Line:
    """One agent as shown: a worker merges its delegation and its own agent span."""

    name: str
    status: str
    node: TraceNode
    """The agent span (or the delegation, when the worker never started)."""
    duration_s: float
    error: str | None
    calls: list[TraceNode]
    workers: list[_Line]


def _agent_line(agent: TraceNode, delegation: TraceNode | None = None) -> _Line:
    status = agent.status
    if delegation is not None and delegation.finished and (delegation.status != "ok" or not agent.finished):
        status = delegation.status
    error = agent.error or (delegation.error if delegation is not None else None)
    duration = delegation.duration_s if delegation is not None else agent.duration_s
    calls = [c for c in agent.children if c.kind in ("llm", "tool")]
    return _Line(agent.name, status, agent, duration, error, calls, _workers(agent))


def _workers(agent: TraceNode) -> list[_Line]:
    lines: list[_Line] = []
    for child in agent.children:
        if child.kind == "delegation":
            runs = [c for c in child.children if c.kind == "agent"]
            if runs:
                lines += [_agent_line(run, child) for run in runs]
            else:  # refused before the worker started
                lines.append(_Line(child.name, child.status, child, child.duration_s, child.error, [], []))
        elif child.kind == "agent":  # a handoff inside this agent's place in the tree
            lines.append(_agent_line(child))
    return lines


def _count(count: int) -> str:
    return f"{count / 1000:.1f}k" if count >= 1000 else str(count)


def _tokens(count: int) -> str:
    return f"{_count(count)} tok"


def _short(error: str | None) -> str:
    if not error:
        return ""
    first = error.strip().splitlines()[0] if error.strip() else error
    first = first if len(first) <= 160 else first[:159] + "…"
    return f"  error: {first}"


def _spent(node: TraceNode, duration_s: float) -> str:
    return f"{duration_s:.2f}s  {_usage_text(node, '  ')}"


def _usage_text(node: TraceNode, sep: str) -> str:
    """Tokens and cost, or that they were not reported (a remote worker: never a pretended 0)."""
    if node.attributes.get("usage_known") is False:
        return "usage not reported"
    cached = node.usage.get("cached_tokens", 0)  # of the input, read from the provider's cache
    of_which = f" ({_count(cached)} cached)" if cached else ""
    return f"{_tokens(node.tokens)}{of_which}{sep}{format_usd(node.spent_usd)}"


def _call_counts(line: _Line) -> str:
    llm = sum(1 for c in line.calls if c.kind == "llm")
    tools = sum(1 for c in line.calls if c.kind == "tool")
    parts = [f"{llm} llm call{'s' * (llm != 1)}"] if llm else []
    parts += [f"{tools} tool call{'s' * (tools != 1)}"] if tools else []
    return f"  ({', '.join(parts)})" if parts else ""


def render_text(trace: Trace, *, calls: bool = False) -> str:
    """The delegation tree, one line per agent run: status, duration, tokens, cost."""
    out: list[str] = []

    def call_line(node: TraceNode) -> str:
        mark = _MARKS.get(node.status, "·")
        if node.kind != "llm":
            return (
                f"{mark} tool {isolate(node.name)}  {node.status}  {_spent(node, node.duration_s)}{_short(node.error)}"
            )
        called = node.attributes.get("tool_calls")
        extra = f" → {', '.join(isolate(str(c)) for c in called)}" if called else ""
        fallback = node.attributes.get("fallback")
        extra += f"  fallback: {isolate(str(fallback))}" if fallback else ""
        answered = node.attributes.get("model") or node.name  # llm_end's: the model of the list that answered
        spent = _spent(node, node.duration_s)
        return f"{mark} llm {isolate(str(answered))}  {node.status}  {spent}{extra}{_short(node.error)}"

    def walk(line: _Line, prefix: str, last: bool) -> None:
        branch = "└─ " if last else "├─ "
        error = _short(line.error)
        mark = _MARKS.get(line.status, "·")
        out.append(
            f"{prefix}{branch}{mark} {isolate(line.name)}  {line.status}  "
            f"{_spent(line.node, line.duration_s)}{_call_counts(line)}{error}"
        )
        inner = prefix + ("   " if last else "│  ")
        items: list[_Line | TraceNode] = [*(line.calls if calls else []), *line.workers]
        if calls:
            items.sort(key=lambda item: item.node.start if isinstance(item, _Line) else item.start)
        for i, item in enumerate(items):
            is_last = i == len(items) - 1
            if isinstance(item, _Line):
                walk(item, inner, is_last)
            else:
                out.append(f"{inner}{'└─ ' if is_last else '├─ '}{call_line(item)}")

    for root in trace.roots:
        if root.kind == "run":
            run_id = root.attributes.get("run_id") or ""
            mark = _MARKS.get(root.status, "·")
            stopped = f" ({root.attributes['stopped_by']})" if root.attributes.get("stopped_by") else ""
            name = f"{isolate(root.name)} {isolate(str(run_id))}"
            out.append(f"{mark} run {name}  {root.status}{stopped}  {_spent(root, root.duration_s)}")
            agents = [_agent_line(c) for c in root.children if c.kind == "agent"]
        else:
            agents = [_agent_line(root)] if root.kind == "agent" else []
        for i, agent in enumerate(agents):
            walk(agent, "", i == len(agents) - 1)
    for problem in trace.problems:
        out.append(f"note: {problem}")
    if not trace.complete:
        out.append(
            "note: the trace ends before the run did (killed or still running); "
            f"spans marked '{UNFINISHED}' never ended"
        )
    return inert("\n".join(out))  # errors, names and notes come from models, providers and the file


def _node_dict(node: TraceNode, origin: float) -> dict[str, Any]:
    shown: dict[str, Any] = {
        "kind": node.kind,
        "name": node.name,
        "span_id": node.span_id,
        "agent_path": list(node.agent_path),
        "status": node.status,
        "start_s": round(node.start - origin, 6),
        "duration_s": round(node.duration_s, 6),
        "finished": node.finished,
        "usage": node.usage or ({"total_tokens": node.tokens} if node.tokens else {}),
        "cost": None if node.attributes.get("usage_known") is False else node.spent_usd,  # not known: never a 0
        "error": node.error,
    }
    extra = {k: v for k, v in node.attributes.items() if k not in ("team", "worker", "tool")}
    if extra:
        shown["attributes"] = extra
    if node.notes:
        shown["events"] = [{**n, "time": round(float(n.get("time", origin)) - origin, 6)} for n in node.notes]
    shown["children"] = [_node_dict(c, origin) for c in node.children]
    return shown


def render_json(trace: Trace) -> str:
    """Every span nested (run → agent → delegation → agent → llm/tool), times relative to the run start."""
    origin = min((r.start for r in trace.roots), default=0.0)
    body = {
        "complete": trace.complete,
        "content": trace.content,
        "problems": trace.problems,
        "runs": [_node_dict(root, origin) for root in trace.roots],
    }
    return json.dumps(body, indent=2, ensure_ascii=False, default=str)


def _mermaid_label(text: str) -> str:
    return text.replace('"', "#quot;").replace("<", "#lt;").replace(">", "#gt;")


def render_mermaid(trace: Trace) -> str:
    """A ``flowchart TD`` of who delegated to whom, each box with status, duration, tokens and cost."""
    out = ["flowchart TD"]
    ids: dict[int, str] = {}

    def ident(item: object) -> str:
        return ids.setdefault(id(item), f"n{len(ids) + 1}")

    def box(line: _Line) -> str:
        facts = f"{line.status} · {line.duration_s:.2f}s · {_usage_text(line.node, ' · ')}"
        return f'{ident(line)}["{_mermaid_label(isolate(line.name))}<br/>{_mermaid_label(facts)}"]'

    def walk(line: _Line) -> None:
        for worker in line.workers:
            out.append(f"  {ident(line)} --> {box(worker)}")
            walk(worker)

    for root in trace.roots:
        agents = [_agent_line(c) for c in root.children if c.kind == "agent"] if root.kind == "run" else []
        if root.kind == "run":
            facts = f"{root.status} · {root.duration_s:.2f}s · {_tokens(root.tokens)} · {format_usd(root.spent_usd)}"
            out.append(f'  {ident(root)}(["run {_mermaid_label(isolate(root.name))}<br/>{_mermaid_label(facts)}"])')
        for agent in agents:
            out.append(f"  {ident(root)} --> {box(agent)}")
            walk(agent)
    return inert("\n".join(out))


def render_trace(trace: Trace, fmt: TraceFormat = "text", *, calls: bool = False) -> str:
    if fmt == "json":
        return render_json(trace)
    if fmt == "mermaid":
        return render_mermaid(trace)
    return render_text(trace, calls=calls)
