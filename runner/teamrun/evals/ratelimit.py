"""Requests and tokens per minute, shared by every run of a batch.

:class:`RateLimitedModel` wraps the chat model all runs share, so the limits
hold across workers: before each call it waits until the last 60 seconds hold
fewer than ``rpm`` requests and ``tpm`` tokens.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Protocol

from teamrun.llm.types import ChatModel, Message, ModelReply, ModelSettings, ToolSchema

__all__ = ["Limiter", "RateLimitedModel", "RateLimiter"]

WINDOW_S = 60.0


class Limiter(Protocol):
    """Waits before a request and counts the tokens it used: a :class:`RateLimiter`, or one on a Ray actor."""

    async def acquire(self) -> None: ...

    def spent(self, tokens: int) -> None: ...


class RateLimiter:
    """A sliding one-minute window of requests and tokens. ``clock``/``sleep`` are swappable for tests."""

    def __init__(
        self,
        *,
        rpm: int | None = None,
        tpm: int | None = None,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[Any]] = asyncio.sleep,
    ) -> None:
        self.rpm = rpm
        self.tpm = tpm
        self.clock = clock
        self.sleep = sleep
        self._requests: deque[float] = deque()
        self._tokens: deque[tuple[float, int]] = deque()
        self._lock = asyncio.Lock()
        self.waited_s = 0.0
        """Time spent waiting for the window, in all."""

    def _prune(self, now: float) -> None:
        while self._requests and self._requests[0] <= now - WINDOW_S:
            self._requests.popleft()
        while self._tokens and self._tokens[0][0] <= now - WINDOW_S:
            self._tokens.popleft()

    def _wait_for(self, now: float) -> float:
        """Seconds until a request may start (0: now)."""
        waits = [0.0]
        if self.rpm is not None and len(self._requests) >= self.rpm:
            waits.append(self._requests[len(self._requests) - self.rpm] + WINDOW_S - now)
        if self.tpm is not None:
            used = sum(n for _, n in self._tokens)
            for stamp, n in self._tokens:  # the window frees tokens as old calls leave it
                if used < self.tpm:
                    break
                used -= n
                waits.append(stamp + WINDOW_S - now)
        return max(waits)

    async def acquire(self) -> None:
        async with self._lock:  # one waiter at a time keeps requests in arrival order
            while True:
                now = self.clock()
                self._prune(now)
                delay = self._wait_for(now)
                if delay <= 0:
                    self._requests.append(now)
                    return
                self.waited_s += delay
                await self.sleep(delay)

    def spent(self, tokens: int) -> None:
        if tokens > 0:
            self._tokens.append((self.clock(), tokens))


class RateLimitedModel:
    """A :class:`ChatModel` that waits for the shared :class:`RateLimiter` before each call."""

    def __init__(self, inner: ChatModel, limiter: Limiter) -> None:
        self.inner = inner
        self.limiter = limiter

    async def complete(
        self,
        messages: Sequence[Message],
        *,
        settings: ModelSettings,
        tools: Sequence[ToolSchema] = (),
        response_format: Mapping[str, Any] | None = None,
    ) -> ModelReply:
        await self.limiter.acquire()
        reply = await self.inner.complete(messages, settings=settings, tools=tools, response_format=response_format)
        self.limiter.spent(reply.usage.total_tokens)
        return reply
