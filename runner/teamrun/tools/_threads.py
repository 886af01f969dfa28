"""Run blocking calls off the event loop in daemon threads.

``asyncio.to_thread`` uses the loop's default executor, and ``asyncio.run``
waits for that executor's threads when it finishes (with no limit on Python
3.11). A sync tool stuck past its timeout, or a prompt still waiting for a
keypress after Ctrl-C, would then keep the whole process from exiting. A
daemon thread per call has the same semantics for the caller (context
variables are copied, the result or exception is delivered to the awaiting
task) but is abandoned, not joined, when the caller gives up.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import threading
from collections.abc import Callable
from typing import TypeVar

__all__ = ["run_in_daemon_thread"]

T = TypeVar("T")


async def run_in_daemon_thread(func: Callable[[], T], *, name: str) -> T:
    """Call ``func()`` in a new daemon thread and await its result.

    Cancelling the awaiting task stops waiting at once; the thread runs on in
    the background until ``func`` returns, and its result is dropped.
    """
    loop = asyncio.get_running_loop()
    future: asyncio.Future[T] = loop.create_future()
    context = contextvars.copy_context()

    def target() -> None:
        try:
            result = context.run(func)
        except BaseException as exc:  # delivered to the awaiting task, not lost
            _settle(loop, future, functools.partial(future.set_exception, exc))
        else:
            _settle(loop, future, functools.partial(future.set_result, result))

    threading.Thread(target=target, name=name, daemon=True).start()
    return await future


def _settle(loop: asyncio.AbstractEventLoop, future: asyncio.Future[T], action: Callable[[], None]) -> None:
    """Run ``action`` on the loop unless nobody waits for ``future`` any more."""

    def settle() -> None:
        if not future.done():
            action()

    try:
        loop.call_soon_threadsafe(settle)
    except RuntimeError:  # the loop has closed: the caller is long gone
        pass
