"""Server-sent events: one message as bytes, and a run's events as a stream (``GET /v1/runs/{id}/events``)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from teamrun.errors import StoreError
from teamrun.logs import get_logger
from teamrun.secrets import Redactor
from teamrun.serve.runs import RunHandle

__all__ = ["STORE_SETTLE_S", "after_event", "continued_stream", "event_stream", "kept_stream", "sse", "store_stream"]

_log = get_logger(__name__)

STORE_SETTLE_S = 30.0
"""How long a stream from the store waits for a run's last events after its record said it stopped: the replica
that ran it writes the record first, then the events, which under load can take several seconds."""

Fetch = Callable[[], Awaitable[tuple[list[dict[str, Any]] | None, dict[str, Any]] | None]]
"""Reads a run's kept events (masked) and its record from the store."""
Leaving = Callable[[], bool]
"""Whether this server is stopping as one replica of several (SIGTERM): a stream of a run that goes on ends at
the end of a message, without a result, for its client to reconnect (``Last-Event-ID``) to another replica."""


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
    leaving: Leaving | None = None,
    elsewhere: Fetch | None = None,
    poll_s: float = 1.0,
) -> AsyncIterator[bytes]:
    """A run continued here after a restart: the events kept of it, then this process's (numbered after them)."""
    for index in range(start_at, len(earlier)):
        yield sse(earlier[index], event=str(earlier[index]["kind"]), id=index)
    rest = event_stream(
        handle,
        max(0, start_at - len(earlier)),
        keepalive_s,
        first_id=len(earlier),
        result=result,
        leaving=leaving,
        elsewhere=elsewhere,
        poll_s=poll_s,
    )
    async for chunk in rest:
        yield chunk


async def event_stream(
    handle: RunHandle,
    start_at: int,
    keepalive_s: float,
    *,
    first_id: int = 0,
    result: dict[str, Any] | None = None,
    leaving: Leaving | None = None,
    elsewhere: Fetch | None = None,
    poll_s: float = 1.0,
) -> AsyncIterator[bytes]:
    """The run's events as SSE (``event:`` the kind, ``id:`` its number), then ``event: result``: the handle's
    record, or ``result`` (the store's, for a run another process continued since it stopped here). A run still
    running as this replica stops (``leaving``, woken by the handle) ends the stream without a result: the
    client reconnects. A run that moved to another replica meanwhile sends none of the events this process made
    after it lost the run (:attr:`RunHandle.lost_at`: its cancellation here): the stream goes on with the
    store's (``elsewhere``, polled every ``poll_s``) from there, as a stream on a replica that does not run it
    (without ``elsewhere`` it ends without a result: the client reconnects)."""
    index = start_at
    handle.followers += 1
    try:
        while True:
            upto = handle.sendable
            while index < upto:
                line = handle.event(index)
                yield sse(line, event=str(line["kind"]), id=first_id + index)
                index += 1
            if (handle.finished or handle.lost_at is not None) and index >= handle.sendable:
                break
            if leaving is not None and leaving():
                return
            if not await handle.changed(keepalive_s):
                yield b": keepalive\n\n"
    finally:
        handle.followers -= 1
    if handle.lost_at is not None or handle.moved:  # it goes on on another replica: its events are the store's
        if elsewhere is None:  # the client reconnects (Last-Event-ID) and reads on there
            return
        async for chunk in store_stream(elsewhere, first_id + index, poll_s, keepalive_s, leaving=leaving):
            yield chunk
        return
    yield sse(result if result is not None else handle.record(), event="result")


async def store_stream(
    fetch: Fetch,
    start_at: int,
    poll_s: float,
    keepalive_s: float,
    *,
    settle_s: float = STORE_SETTLE_S,
    leaving: Leaving | None = None,
) -> AsyncIterator[bytes]:
    """A run that runs on another replica, live from the store: its events as its replica saves them (numbered as
    every replica numbers them: their place among the run's kept events), then ``event: result``, its record once
    it is no longer running (and its last events, up to its ``run_end``, are kept; at most ``settle_s`` later: its
    replica writes the record first, then the events, which under load can take several seconds).
    As this replica stops (``leaving``) the stream ends without a result, after whole messages."""
    index, quiet, settled = start_at, 0.0, 0.0
    while True:
        if leaving is not None and leaving():
            return
        try:
            found = await fetch()
        except StoreError as exc:  # the store stopped answering mid-stream: the client reconnects (Last-Event-ID)
            _log.warning("serve_events_store_unavailable", error=str(exc))
            return
        if found is None:
            return
        events, record = found
        events = events or []
        sent = index
        while index < len(events):
            yield sse(events[index], event=str(events[index]["kind"]), id=index)
            index += 1
        if record.get("status") != "running":
            ended = bool(events) and events[-1].get("kind") == "run_end"
            if ended or settled >= settle_s:
                yield sse(record, event="result")
                return
            settled += poll_s
        quiet = 0.0 if index > sent else quiet + poll_s
        if quiet >= keepalive_s:
            quiet = 0.0
            yield b": keepalive\n\n"
        await asyncio.sleep(poll_s)  # a poll of the store: its replica saves the run's events on its heartbeat
