"""Showing a run as it happens, on stderr: a live agent tree on a terminal, plain lines otherwise,
one log line per event with ``--log-format json``.

Each view is an event-bus subscriber; stdout stays reserved for the answer.
While the tree is drawn on ``sys.stderr``, anything else written there (log
lines, an approval prompt) goes through the tree, which prints it above itself
and redraws below it, so neither overwrites the other.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, TextIO

from teamrun.events import (
    AcceptCheck,
    AgentEnd,
    AgentStart,
    Budget,
    DelegationEnd,
    DelegationStart,
    Event,
    Hook,
    LlmEnd,
    LlmIO,
    LlmRetry,
    LlmWait,
    MemoryRecall,
    RunEnd,
    RunStart,
    RunWarning,
    ToolEnd,
    ToolStart,
    content_fields,
)
from teamrun.money import format_usd
from teamrun.observe.bidi import inert, isolate
from teamrun.secrets import Redactor

_MARKS = {
    "running": "●",
    "ok": "✓",
    "done": "✓",
    "error": "✗",
    "budget_exhausted": "◐",
    "rejected": "⊘",
    "cancelled": "⊘",
    "waiting": "◷",
}
_IN = " \N{SINGLE RIGHT-POINTING ANGLE QUOTATION MARK} "
"""Between the names of an agent path: ``lead > researcher`` with a single angle quote."""


_WAIT_REASONS = {
    "requests_per_minute": "its requests per minute",
    "tokens_per_minute": "its tokens per minute",
    "retry_after": "the provider's Retry-After",
}
"""An ``llm_wait``'s reason as the console says it."""


def _tokens(count: int) -> str:
    return f"{count / 1000:.1f}k tok" if count >= 1000 else f"{count} tok"


class _RunModels:
    """The models a run called, for its summary: those without a price are said once there ("cost unknown for
    model X"), instead of an ``llm_cost_unknown`` log line in the middle of the progress."""

    def __init__(self) -> None:
        self.seen: dict[str, None] = {}
        self.usage_unknown = False
        """Some call, agent or remote worker of the run reported no usable usage: its totals are not all known."""

    def note(self, event: Event) -> None:
        model = event.model if isinstance(event, AgentStart | LlmEnd) else None
        if model and not model.startswith(("offline", "a2a:")):
            self.seen.setdefault(model, None)
        if isinstance(event, AgentEnd | LlmEnd) and event.usage_known is False:
            self.usage_unknown = True

    def spent(self, event: RunEnd) -> str:
        """The run's tokens and cost for its summary; never a pretended 0 when some usage is unknown."""
        total = event.usage.get("total_tokens", 0)
        if self.usage_unknown and not total:
            return "tokens and cost not reported"
        tokens = _tokens(total)
        cached = event.usage.get("cached_tokens", 0)
        tokens += f" ({_tokens(cached).removesuffix(' tok')} cached)" if cached else ""
        if self.usage_unknown:
            return f"at least {tokens}, {format_usd(event.cost)}, some calls reported no usage"
        return f"{tokens}, {format_usd(event.cost)}"

    def unpriced(self) -> str:
        """``cost unknown for model X: ...`` for the run's summary, or ``""``."""
        if not self.seen:
            return ""
        from teamrun.llm.adapter import cost_unknown  # LiteLLM was loaded by the run already

        unknown = [model for model in self.seen if cost_unknown(model)]
        if not unknown:
            return ""
        models = ", ".join(isolate(model) for model in unknown)
        return f"cost unknown for model{'s' * (len(unknown) > 1)} {models}: counted as $0; max_cost_usd cannot limit it"


@dataclass
class _Node:
    name: str
    parent: str | None
    status: str = "running"
    tokens: int = 0
    cost: float = 0.0
    detail: str = ""
    children: list[str] = field(default_factory=list)
    usage_known: bool = True
    """False for a remote (``a2a:``) worker until it reports usage: shown as not reported, never 0."""


_LINE_CHARS = 200


class PlainProgress:
    """One line per notable event, for logs and pipes."""

    shows_warnings = True
    """Run warnings are among its lines (the CLI leaves them out of the log lines then)."""
    says_unknown_cost = True
    """Its run summary says which models had no price (the CLI leaves ``llm_cost_unknown`` log lines out then)."""

    def __init__(self, stream: TextIO | None = None, *, redactor: Redactor | None = None) -> None:
        self.stream = stream or sys.stderr
        self.redactor = redactor or Redactor()
        """Masks every line as the trace masks it (the run's secrets; a secret answer: :meth:`keep_secrets`)."""
        self.started = time.monotonic()
        self.models = _RunModels()
        self.recalled: dict[str, list[str]] = {}
        """The memories each agent span recalled last (a recall that found the same is not said again)."""

    def __call__(self, event: Event) -> None:
        if event.kind == "run_start":
            self.started = event.time  # times count from the run, not from start-up
            self.models = _RunModels()
        self.models.note(event)
        line = self._line(event)
        if line:
            line = inert(" ".join(self.redactor.text(line).split()))  # one event, one line: tool errors can span
            # several; a secret (an argument's key a refusal names) is masked as in the trace
            if len(line) > _LINE_CHARS and not isinstance(event, RunWarning | RunEnd):  # their ends matter
                line = line[: _LINE_CHARS - 1] + "…"
            self.stream.write(f"[{event.time - self.started:7.2f}s] {line}\n")
            self.stream.flush()

    def keep_secrets(self, values: Iterable[str]) -> None:
        """Mask these values too from now on (:meth:`~teamrun.events.EventBus.keep_secrets`)."""
        self.redactor.add(values, declared=True)

    def _line(self, event: Event) -> str | None:
        who = _IN.join(map(isolate, event.agent_path))
        match event:
            case AgentStart():
                return f"{who}: started ({isolate(event.model)})"
            case AgentEnd():
                stop = f", stopped by {event.stopped_by}" if event.stopped_by else ""
                spent = (
                    f"{_tokens(event.usage.get('total_tokens', 0))}, {format_usd(event.cost)}"
                    if event.usage_known
                    else "tokens and cost not reported"
                )
                return f"{who}: {event.status} ({spent}{stop})"
            case DelegationStart():
                step = f" (step {event.step})" if event.step else ""
                return f"{who} → {isolate(event.worker)}: delegated{step}"
            case DelegationEnd() if event.status == "waiting":
                return f"{who} → {isolate(event.worker)}: waiting for a person"
            case DelegationEnd() if event.status != "ok":
                return f"{who} → {isolate(event.worker)}: {event.status}: {event.error}"
            case ToolEnd() if event.status == "waiting":
                return f"{who}: waiting for a person: tool {isolate(event.tool)}"
            case ToolEnd():
                error = f": {event.error}" if event.error else ""
                return f"{who}: tool {isolate(event.tool)} {event.status}{error}"
            case LlmRetry():
                return f"{who}: model call retry {event.attempt} after {event.error}"
            case LlmWait():
                why = _WAIT_REASONS.get(event.reason, event.reason)
                return f"{who}: waiting {event.seconds:.1f}s for {isolate(event.model)} ({why})"
            case MemoryRecall() if event.how == "recall":
                if self.recalled.get(event.span_id) == event.ids:
                    return None  # the same facts as before this agent's previous turn: said once
                self.recalled[event.span_id] = list(event.ids)
                found = f"{len(event.ids)} fact(s), best {max(event.scores):.2f}" if event.scores else "no facts"
                replayed = " (from the journal)" if event.replayed else ""
                return f"{who}: recalled {found} about {isolate(event.resource)}{replayed}"
            case MemoryRecall() if event.how == "messages" and event.ids:  # quoted from the resource's other threads
                key = f"{event.span_id} messages"
                if self.recalled.get(key) == event.ids:
                    return None
                self.recalled[key] = list(event.ids)
                replayed = " (from the journal)" if event.replayed else ""
                best = f", best {max(event.scores):.2f}" if event.scores else ""
                return f"{who}: recalled {len(event.ids)} earlier message(s) of other threads{best}{replayed}"
            case Hook():
                what = ", ".join(event.actions) if event.status == "ok" else f"failed: {event.message}"
                return f"{who}: hook {event.hook} on {event.target}: {what}"
            case AcceptCheck() if event.status == "passed":
                return f"{who}: accept: attempt {event.attempt} passed"
            case AcceptCheck():
                again = ", answering again" if event.status == "retry" else ""
                return (
                    f"{who}: accept: attempt {event.attempt}/{event.max_attempts} failed {event.check}: "
                    f"{event.detail}{again}"
                )
            case RunWarning():
                return f"{who}: warning: {event.message}"
            case Budget():
                return f"{who}: budget: {event.reason}"
            case RunEnd():
                unpriced = self.models.unpriced()
                spent = self.models.spent(event) + (f" ({unpriced})" if unpriced else "")
                return f"run {event.status} in {event.duration_s:.2f}s, {spent}"
        return None


class EventLog:
    """One log line per event (``--log-format json``: one JSON object per line), on stderr.

    Each line's ``event`` is the event kind; it carries ``run_id``, ``span_id``,
    ``parent_span_id``, ``agent`` and ``agent_path`` and the kind's own fields,
    except content (prompts, answers, tool payloads: see ``--trace-content``).
    Lines are rendered like every other log line but shown whatever ``-v`` says:
    they are the progress view (``-q`` turns them off).
    """

    shows_warnings = True
    """Run warnings are among its lines (the CLI leaves them out of the log lines then)."""

    def __init__(self, stream: TextIO | None = None) -> None:
        self.stream = stream

    def __call__(self, event: Event) -> None:
        from teamrun.logs import log_line

        if isinstance(event, LlmIO):
            return  # nothing but content
        level = _level(event)
        fields = {k: v for k, v in event.data.items() if k not in _CONTENT}
        line = log_line(
            level,
            event.kind,
            run_id=event.run_id,
            span_id=event.span_id,
            parent_span_id=event.parent_span_id,
            agent=event.agent,
            agent_path="/".join(event.agent_path),
            **fields,
        )
        stream = self.stream or sys.stderr
        stream.write(line + "\n")
        stream.flush()


_CONTENT = content_fields()


def _level(event: Event) -> str:
    if isinstance(event, LlmRetry | RunWarning | Budget) or (isinstance(event, Hook) and event.status != "ok"):
        return "warning"
    if isinstance(event, RunEnd) and event.status == "failed":
        return "error"
    return "info"


class _AboveTree:
    """Stands in for ``sys.stderr`` while a tree is drawn there: other output goes above the tree."""

    def __init__(self, tree: LiveTree, real: TextIO) -> None:
        self._tree = tree
        self.real = real

    def write(self, text: str) -> int:
        return self._tree.write_above(text)

    def flush(self) -> None:
        self.real.flush()

    def __getattr__(self, name: str) -> Any:  # encoding, isatty, fileno, ...
        return getattr(self.real, name)


_ALWAYS_DRAWN = 200
"""Up to this many nodes, every end of an agent, delegation or tool redraws the tree at once; a larger
tree is redrawn at most every ``interval`` (each frame costs a line per node: redrawing it on every one of
thousands of ends would grow with the square of the workers)."""


class LiveTree:
    """A tree of agents redrawn in place (at most ten times a second)."""

    says_unknown_cost = True
    """Below its last frame, it says which models had no price (the CLI leaves ``llm_cost_unknown`` out then)."""

    def __init__(
        self,
        stream: TextIO | None = None,
        *,
        interval: float = 0.1,
        max_lines: int | None = None,
        redactor: Redactor | None = None,
    ) -> None:
        self.stream = stream or sys.stderr
        self.redactor = redactor or Redactor()
        """Masks every line of the frame as the trace masks it (see :meth:`keep_secrets`)."""
        self.interval = interval
        self.max_lines = max_lines
        """Most lines one frame takes (the rest summed up in its last line); ``None``: the terminal's height
        when the stream is a terminal (a taller frame cannot be redrawn in place), else no limit."""
        self.nodes: dict[str, _Node] = {}
        self.roots: list[str] = []
        self.owners: dict[str, str | None] = {}
        """Delegation span → the agent span that delegated (agents hang below delegations)."""
        self.workers: dict[str, str] = {}
        """Delegation span → the span of the worker it started (the node its outcome updates)."""
        self.drawn = 0
        self.last_draw = 0.0
        self.pending = ""
        """The unfinished last line written above the tree (a prompt waiting for its answer):
        no redraw until it is finished, so the cursor stays where the person types."""
        self._lock = threading.RLock()
        self._stand_in: _AboveTree | None = None
        self.models = _RunModels()

    def __call__(self, event: Event) -> None:
        with self._lock:
            self._update(event)

    def _update(self, event: Event) -> None:
        self.models.note(event)
        if isinstance(event, RunStart) and self.stream is sys.stderr and self._stand_in is None:
            self._stand_in = _AboveTree(self, self.stream)
            sys.stderr = self._stand_in
        match event:
            case DelegationStart():
                self.owners[event.span_id] = event.parent_span_id
            case AgentStart():
                self._agent_start(event)
            case LlmEnd() if event.parent_span_id in self.nodes:
                node = self.nodes[event.parent_span_id]
                node.tokens += event.usage.get("total_tokens", 0)
                node.cost += event.cost
            case ToolStart() if event.parent_span_id in self.nodes:
                self.nodes[event.parent_span_id].detail = f"tool {isolate(event.tool)}"
            case ToolEnd() if self.pending and repr(event.tool) in self.pending:
                self.pending, self.drawn = "", 0  # the prompt about this tool was answered (on a new line)
            case AgentEnd() if event.span_id in self.nodes:
                node = self.nodes[event.span_id]
                node.status, node.detail, node.usage_known = event.status, "", event.usage_known
            case DelegationEnd():
                self._delegation_end(event)
            case RunEnd():
                for node in self.nodes.values():  # agents the run stopped before they ended
                    if node.status == "running":
                        node.status, node.detail = "cancelled", ""
                if self.pending:
                    self.pending, self.drawn = "", 0
                    self.stream.write("\n")
        ends = isinstance(event, AgentEnd | DelegationEnd | ToolEnd) and len(self.nodes) <= _ALWAYS_DRAWN
        self._draw(force=ends or isinstance(event, RunEnd))
        if isinstance(event, RunEnd) and (unpriced := self.models.unpriced()):
            self.stream.write(inert(self.redactor.text(unpriced)) + "\n")  # below the last frame, which stays
            self.stream.flush()
            self.drawn = 0
        if isinstance(event, RunEnd) and self._stand_in is not None:
            if sys.stderr is self._stand_in:
                sys.stderr = self._stand_in.real
            self._stand_in = None

    def keep_secrets(self, values: Iterable[str]) -> None:
        """Mask these values too from now on (:meth:`~teamrun.events.EventBus.keep_secrets`)."""
        self.redactor.add(values, declared=True)

    def _agent_start(self, event: AgentStart) -> None:
        """A new agent node, below the agent that delegated to it (through its delegation span)."""
        if event.parent_span_id in self.owners:
            self.workers.setdefault(event.parent_span_id, event.span_id)
        node = _Node(event.agent, event.parent_span_id, usage_known=not event.model.startswith("a2a:"))
        self.nodes[event.span_id] = node
        parent = self._agent_span(event.parent_span_id)
        if parent is not None and parent in self.nodes and parent != event.span_id:
            self.nodes[parent].children.append(event.span_id)
        else:
            self.roots.append(event.span_id)

    def write_above(self, text: str) -> int:
        """Print ``text`` above the tree; the tree is redrawn below it once the line is complete."""
        if not text:
            return 0
        with self._lock:
            if not self.pending:
                self._clear()
            self.stream.write(text)
            self.pending = (self.pending + text).rsplit("\n", 1)[-1]
            if self.pending:
                self.stream.flush()
            else:
                self._draw(force=True)
        return len(text)

    def _delegation_end(self, event: DelegationEnd) -> None:
        """The delegation's outcome is the final word on its worker (cancelled, not error)."""
        status = event.status
        node = self.nodes.get(self.workers.get(event.span_id, event.span_id))
        if node is None:  # refused before the worker started: show it, with why
            owner = self._agent_span(event.parent_span_id)
            if owner is None or owner not in self.nodes:
                return
            node = _Node(event.worker, owner, status=status)
            self.nodes[event.span_id] = node
            self.nodes[owner].children.append(event.span_id)
        if status != "ok":
            node.status, node.detail = status, ""

    def _agent_span(self, span: str | None) -> str | None:
        if span is None or span in self.nodes:
            return span
        return self.owners.get(span)

    def _lines(self, limit: int | None = None) -> list[str]:
        """The frame: one line per node, or, past ``limit`` nodes, the first ``limit - 1`` and a line summing
        up the agents not shown (a frame costs at most ``limit`` lines, however many workers run)."""
        lines: list[str] = []
        room = len(self.nodes) if limit is None or len(self.nodes) <= limit else max(limit - 1, 0)

        def walk(span: str, prefix: str, last: bool, top: bool) -> None:
            if len(lines) >= room:
                return
            node = self.nodes[span]
            branch = "" if top else ("└─ " if last else "├─ ")
            mark = _MARKS.get(node.status, "·")
            extra = f"  {node.detail}" if node.detail else ""
            spent = f"{_tokens(node.tokens)}  {format_usd(node.cost)}" if node.usage_known else "usage not reported"
            lines.append(inert(f"{prefix}{branch}{mark} {isolate(node.name)}  {node.status}  {spent}{extra}"))
            child_prefix = prefix if top else prefix + ("   " if last else "│  ")
            for i, child in enumerate(node.children):
                if len(lines) >= room:
                    break
                walk(child, child_prefix, i == len(node.children) - 1, False)

        for root in self.roots:
            walk(root, "", True, True)
        if room < len(self.nodes):
            counts = Counter(node.status for node in self.nodes.values())
            summary = ", ".join(f"{count:,} {status}" for status, count in sorted(counts.items()))
            lines.append(f"… {len(self.nodes) - len(lines):,} more not shown ({len(self.nodes):,} agents: {summary})")
        return lines

    def _clear(self) -> None:
        """Take the last frame off the screen; the cursor ends where it began."""
        if self.drawn:
            self.stream.write(f"\x1b[{self.drawn}F\x1b[J")
            self.drawn = 0

    def _draw(self, *, force: bool) -> None:
        now = time.monotonic()
        if self.pending or (not force and now - self.last_draw < self.interval):
            return
        self.last_draw = now
        lines = self._lines(self.max_lines if self.max_lines is not None else _terminal_lines(self.stream))
        self._clear()
        self.stream.write("".join(self.redactor.text(line) + "\n" for line in lines))
        self.stream.flush()
        self.drawn = len(lines)


def _terminal_lines(stream: TextIO) -> int | None:
    """The height of the terminal ``stream`` writes to, less one line for the cursor; ``None`` if it is no terminal."""
    try:
        if not stream.isatty():
            return None
        return max(os.get_terminal_size(stream.fileno()).lines - 1, 2)
    except (AttributeError, OSError, ValueError):
        return None
