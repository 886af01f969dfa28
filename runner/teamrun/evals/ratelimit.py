"""Requests and tokens per minute shared by the workers of a Ray batch (several processes).

In one process (``teamrun batch`` with the local engine, ``serve``, ``chat``) every run shares the process's
limits per model (:mod:`teamrun.llm.ratelimit`); a Ray batch's workers live in several processes, so
:class:`RateLimitedModel` wraps each worker's chat model around one :class:`~teamrun.llm.ratelimit.RateLimiter`
held by an actor: before each call it waits until the last 60 seconds hold fewer than ``rpm`` requests and
``tpm`` tokens. It is the same limiter, on the actor's side.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from teamrun.llm.ratelimit import RateLimiter
from teamrun.llm.types import ChatModel, Message, ModelReply, ModelSettings, ToolSchema

__all__ = ["Limiter", "RateLimitedModel", "RateLimiter"]


class Limiter(Protocol):
    """Waits before a request and counts the tokens it used: a :class:`RateLimiter`, or one on a Ray actor."""

    async def acquire(self) -> Any: ...

    def spent(self, tokens: int) -> None: ...


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
