"""Typed events the engine emits while a team runs.

One :class:`EventBus` per run; the console view, the trace file and the logs
are subscribers, not separate code paths. Events are plain frozen data so a
subscriber can keep them, serialise them or drop them.
"""

from __future__ import annotations

import contextlib
import itertools
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

import structlog

EventKind = Literal[
    "run_start", "run_end",
    "agent_start", "agent_end",
    "llm_start", "llm_end", "llm_retry",
    "tool_start", "tool_end",
    "delegation_start", "delegation_end",
    "hook", "budget", "warning",
]

_log = structlog.get_logger(__name__)


@dataclass(frozen=True)
class Event:
    """Something that happened in a run, placed in the span tree."""

    kind: EventKind
    run_id: str
    span_id: str
    parent_span_id: str | None
    agent_path: tuple[str, ...]
    """Supervisor first, then each worker down to the one this event is about."""
    depth: int
    time: float = field(default_factory=time.monotonic)
    """``time.monotonic()`` when the event was emitted."""
    data: Mapping[str, Any] = field(default_factory=dict)
    """Kind-specific details: usage, cost, status, tool name, durations, errors."""

    @property
    def agent(self) -> str:
        return self.agent_path[-1] if self.agent_path else ""


Subscriber = Callable[[Event], None]


class EventBus:
    """Fans events out to subscribers. A subscriber that fails is dropped (and logged), never fatal."""

    def __init__(self, run_id: str) -> None:
        self.run_id = run_id
        self._subscribers: list[Subscriber] = []
        self._ids = itertools.count(1)

    def subscribe(self, subscriber: Subscriber) -> None:
        self._subscribers.append(subscriber)

    def new_span_id(self) -> str:
        return f"s{next(self._ids)}"

    def emit(
        self,
        kind: EventKind,
        *,
        span_id: str,
        parent_span_id: str | None,
        agent_path: tuple[str, ...],
        **data: Any,
    ) -> Event:
        event = Event(kind, self.run_id, span_id, parent_span_id, agent_path, len(agent_path) - 1, data=data)
        for subscriber in list(self._subscribers):
            try:
                subscriber(event)
            except Exception as exc:  # a broken view (say, stderr closed by `| head`) must not break the run
                self._subscribers.remove(subscriber)
                with contextlib.suppress(Exception):
                    _log.warning("event_subscriber_dropped", subscriber=repr(subscriber), error=str(exc))
        return event
