"""``--trace run.jsonl``: every event of a run as one JSON line, written as it happens.

Each line is flushed at once, so a run that is killed still leaves a readable
trace of everything before the kill. Prompts and tool payloads ("content") are
left out unless asked for; usage, cost, status, timings and names are always
there. Secrets are masked in every line, content or not.

Line format (``v`` 1)::

    {"kind": "trace", "format": "teamrun-trace", "v": 1, "content": false, "ts": ...}   # header
    {"kind": "agent_start", "run_id": "...", "span_id": "s2", "parent_span_id": "s1",
     "agent_path": ["lead"], "depth": 0, "time": 812.31, "ts": 1764750000.12, "data": {...}}

``time`` is the event's monotonic clock (durations), ``ts`` the wall clock
(seconds since the epoch). With content, ``llm_io`` lines carry each model
call's new input messages and its reply (:class:`ContentCapture` publishes
them on the run's event bus, like every other event).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import IO, Any

from teamrun.errors import UsageError
from teamrun.events import Event, EventBus, LlmIO, content_fields
from teamrun.llm.types import ChatModel, Message, ModelReply, ModelSettings, ToolSchema, current_scope
from teamrun.secrets import Redactor

__all__ = [
    "CONTENT_FIELDS",
    "TRACE_FORMAT",
    "TRACE_VERSION",
    "ContentCapture",
    "TraceWriter",
    "event_record",
    "wall_clock",
]

TRACE_FORMAT = "teamrun-trace"
TRACE_VERSION = 1

CONTENT_FIELDS = content_fields() | {"prompt", "response", "result", "final_text", "arguments", "output"}
"""Event data fields that carry prompts, answers or tool payloads: kept only with content on."""

_CLOCK_OFFSET = time.time() - time.monotonic()


def event_record(event: Event, data: Mapping[str, Any] | None = None, *, monotonic: bool = False) -> dict[str, Any]:
    """An event as the fields of one JSON line, as trace files and the server's event stream carry it.

    ``data``: the kind's fields to write (default: all of them); ``monotonic``: also its ``time.monotonic()``.
    """
    record: dict[str, Any] = {
        "kind": event.kind,
        "run_id": event.run_id,
        "span_id": event.span_id,
        "parent_span_id": event.parent_span_id,
        "agent_path": list(event.agent_path),
        "depth": event.depth,
    }
    if monotonic:
        record["time"] = round(event.time, 6)
    record["ts"] = round(wall_clock(event.time), 6)
    record["data"] = event.data if data is None else data
    return record


def wall_clock(monotonic: float) -> float:
    """Seconds since the epoch for a ``time.monotonic()`` reading taken in this process."""
    return monotonic + _CLOCK_OFFSET


class TraceWriter:
    """An event-bus subscriber writing JSON lines to ``path`` (truncated first).

    Use it as ``team.run(..., subscribers=[writer])`` and :meth:`close` it after;
    it is also a context manager.
    """

    def __init__(self, path: str | Path, *, content: bool = False, redactor: Redactor | None = None) -> None:
        self.path = Path(path)
        self.content = content
        self.redactor = redactor or Redactor()
        self._lock = threading.Lock()
        try:
            self._file: IO[str] | None = self.path.open("w", encoding="utf-8")
        except OSError as exc:
            raise UsageError(f"cannot write the trace file {self.path}: {exc.strerror}") from None
        self.write(
            {
                "kind": "trace",
                "format": TRACE_FORMAT,
                "v": TRACE_VERSION,
                "content": content,
                "ts": round(time.time(), 6),
            }
        )

    def __call__(self, event: Event) -> None:
        if isinstance(event, LlmIO) and not self.content:
            return  # nothing but content
        data = dict(event.data)
        if not self.content:
            data = {k: v for k, v in data.items() if k not in CONTENT_FIELDS}
        self.write(event_record(event, data, monotonic=True))

    def keep_secrets(self, values: Iterable[str]) -> None:
        """Mask these values too from now on (a secret answer: :meth:`~teamrun.events.EventBus.keep_secrets`)."""
        self.redactor.add(values, declared=True)

    def write(self, record: Mapping[str, Any]) -> None:
        """Write one record (masked) as a line and flush it."""
        line = json.dumps(self.redactor.value(record), ensure_ascii=False, default=str)
        with self._lock:
            if self._file is None:
                return
            self._file.write(line + "\n")
            self._file.flush()

    def capture(self, model: ChatModel) -> ChatModel:
        """``model`` wrapped so each call's content is published as ``llm_io`` events (only when content is on)."""
        return ContentCapture(model) if self.content else model

    def close(self) -> None:
        with self._lock:
            if self._file is not None:
                self._file.close()
                self._file = None

    def __enter__(self) -> TraceWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _new_messages(messages: Sequence[Message]) -> list[Message]:
    """The messages after the last assistant message: what this call adds to the conversation."""
    for index in range(len(messages) - 1, -1, -1):
        if messages[index].get("role") == "assistant":
            return [dict(m) for m in messages[index + 1 :]]
    return [dict(m) for m in messages]


class ContentCapture:
    """A :class:`~teamrun.llm.types.ChatModel` wrapper that publishes each call's content as an
    ``llm_io`` event on the run's bus, so the trace, OpenTelemetry and the logs all see it."""

    def __init__(self, inner: ChatModel) -> None:
        self.inner = inner

    async def complete(
        self,
        messages: Sequence[Message],
        *,
        settings: ModelSettings,
        tools: Sequence[ToolSchema] = (),
        response_format: Mapping[str, Any] | None = None,
    ) -> ModelReply:
        sent = _new_messages(messages)
        reply = await self.inner.complete(messages, settings=settings, tools=tools, response_format=response_format)
        scope = current_scope.get()
        bus = EventBus.of_run(scope.run_id) if scope is not None else None
        if scope is not None and bus is not None:
            bus.publish(
                LlmIO(
                    run_id=scope.run_id,
                    span_id=scope.span_id,
                    parent_span_id=None,
                    agent_path=scope.agent_path,
                    turn=scope.turn,
                    new_messages=sent,
                    reply={
                        "text": reply.text,
                        "tool_calls": [{"name": c.name, "arguments": c.arguments} for c in reply.tool_calls],
                    },
                )
            )
        return reply
