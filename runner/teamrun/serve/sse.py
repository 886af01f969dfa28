"""Server-sent events: one message as bytes, and a run's events as a stream (``GET /v1/runs/{id}/events``)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

from teamrun.secrets import Redactor
from teamrun.serve.runs import RunHandle

__all__ = ["after_event", "continued_stream", "event_stream", "kept_stream", "sse"]


def sse(data: Any, redactor: Redactor | None = None, *, event: str | None = None, id: int | None = None) -> bytes:
    """One SSE message of ``data`` as JSON (secrets masked when a ``redactor`` is given)."""
    head = (f"id: {id}\n" if id is not None else "") + (f"event: {event}\n" if event else "")
    text = json.dumps(data, ensure_ascii=False) if redactor is None else redactor.dumps(data, ensure_ascii=False)
    return (head + "data: " + text + "\n\n").encode()


def after_event(last_event_id: str | None) -> int:
    """The first event to send to a reader whose ``Last-Event-ID`` is ``last_event_id`` (0: from the start).

    Anything but an event number in ASCII digits is ignored (``"²"`` is a digit to
    :meth:`str.isdigit`, not to :func:`int`).
    """
    text = (last_event_id or "").strip()
    if not text or len(text) > 18 or not all("0" <= c <= "9" for c in text):
        return 0
    return int(text) + 1


async def kept_stream(events: list[dict[str, Any]], record: dict[str, Any], start_at: int) -> AsyncIterator[bytes]:
    """A stored run's kept events as :func:`event_stream` sends a finished run's (masked already)."""
    for index in range(start_at, len(events)):
        yield sse(events[index], event=str(events[index]["kind"]), id=index)
    yield sse(record, event="result")


async def continued_stream(
    earlier: list[dict[str, Any]],
    handle: RunHandle,
    start_at: int,
    keepalive_s: float,
    *,
    result: dict[str, Any] | None = None,
) -> AsyncIterator[bytes]:
    """A run continued here after a restart: the events kept of it, then this process's (numbered after them)."""
    for index in range(start_at, len(earlier)):
        yield sse(earlier[index], event=str(earlier[index]["kind"]), id=index)
    rest = event_stream(handle, max(0, start_at - len(earlier)), keepalive_s, first_id=len(earlier), result=result)
    async for chunk in rest:
        yield chunk


async def event_stream(
    handle: RunHandle, start_at: int, keepalive_s: float, *, first_id: int = 0, result: dict[str, Any] | None = None
) -> AsyncIterator[bytes]:
    """The run's events as SSE (``event:`` the kind, ``id:`` its number), then ``event: result``: the handle's
    record, or ``result`` (the store's, for a run another process continued since it stopped here)."""
    index = start_at
    while True:
        while index < handle.event_count:
            line = handle.event(index)
            yield sse(line, event=str(line["kind"]), id=first_id + index)
            index += 1
        if handle.finished:
            break
        if not await handle.changed(keepalive_s):
            yield b": keepalive\n\n"
    yield sse(result if result is not None else handle.record(), event="result")
