"""Waiting in a test until something has happened: the one poll of the suite, sync and async.

A test waits on the condition it means (a request at the fake, a journal entry, a run's status), never on a
sleep. The guard only stops a hang; it is no timing assertion, so it is generous. When it runs out, or when
what must keep running while we wait has ended, the failure says what was awaited and where things stood.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any, Protocol, TypeVar

__all__ = ["GUARD_S", "answers", "wait_until", "wait_until_async"]

GUARD_S = 240.0
"""How long a wait may take before it counts as a hang (a busy CI machine is slow: no timing assertion)."""
_T = TypeVar("_T")


class _Process(Protocol):
    """A child process, as the standard library's process objects are (their class is not named here:
    tests/tiers.py would count every caller of this module as starting a process)."""

    @property
    def returncode(self) -> int | Any: ...

    def poll(self) -> int | None: ...


def wait_until(
    condition: Callable[[], _T],
    what: str,
    *,
    guard_s: float = GUARD_S,
    pause_s: float = 0.05,
    where: Callable[[], object] | None = None,
    alive: _Process | None = None,
) -> _T:
    """Poll ``condition`` until it returns something true, and return that.

    ``what`` names what is awaited ("the run waits for its 3 items"); ``where()``, if given, says where things
    stood, for the failure message. With ``alive``, the wait fails as soon as that process has ended: what it
    would have done will not happen.
    """
    deadline = time.monotonic() + guard_s
    while True:
        result = condition()
        if result:
            return result
        if alive is not None and alive.poll() is not None:
            raise AssertionError(_message(f"the process ended (exit {alive.returncode}) before: {what}", where))
        if time.monotonic() > deadline:
            raise AssertionError(_message(f"not within the {guard_s:g} s hang guard: {what}", where))
        time.sleep(pause_s)


async def wait_until_async(
    condition: Callable[[], _T],
    what: str,
    *,
    guard_s: float = GUARD_S,
    pause_s: float = 0.01,
    where: Callable[[], object] | None = None,
    alive: asyncio.Future[Any] | None = None,
) -> _T:
    """:func:`wait_until` on the event loop (other tasks run while it waits); ``alive`` is a task that must not
    end first (its outcome, or its exception, is in the failure)."""
    deadline = time.monotonic() + guard_s
    while True:
        result = condition()
        if result:
            return result
        if alive is not None and alive.done():
            raise AssertionError(_message(f"the task ended ({_outcome(alive)}) before: {what}", where))
        if time.monotonic() > deadline:
            raise AssertionError(_message(f"not within the {guard_s:g} s hang guard: {what}", where))
        await asyncio.sleep(pause_s)


def _message(head: str, where: Callable[[], object] | None) -> str:
    return head if where is None else f"{head}; where things stood: {where()}"


def _outcome(task: asyncio.Future[Any]) -> str:
    if task.cancelled():
        return "cancelled"
    error = task.exception()
    return f"raised {error!r}" if error is not None else f"returned {task.result()!r}"


def answers(url: str, *, status: int | None = None) -> bool:
    """Whether an HTTP GET of ``url`` gets an answer now (with ``status``: that status), for waiting on a server
    that starts: ``wait_until(lambda: answers(f"{url}/readyz", status=200), "the server started", alive=process)``.
    """
    import httpx

    try:
        got = httpx.get(url, timeout=5).status_code
    except httpx.HTTPError:
        return False
    return status is None or got == status
