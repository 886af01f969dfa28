"""The chat model teamrun builds by default: ``offline`` to the simulator, the rest to LiteLLM.

Importing LiteLLM takes seconds, and a team that runs on the ``offline`` model
(every ready-made team, out of the box) never needs it. :class:`ModelRouter`
sends ``offline`` and ``offline/...`` models to :class:`~teamrun.llm.offline.OfflineChatModel`
and builds the :class:`~teamrun.llm.adapter.LiteLLMChatModel` — importing
LiteLLM — only for the first other model: at :meth:`ModelRouter.prepare` (before a run
starts, so the import is not paid inside a model call) or, failing that, on the first call. A model with
``fallbacks`` is asked through :func:`~teamrun.llm.fallbacks.complete_in_order` and the process's circuit
breakers (:func:`~teamrun.llm.breaker.process_breakers`, unless the router was given its own). Every request
takes a slot of its model's rate limit first (:mod:`teamrun.llm.ratelimit`, the process's unless given), the
``offline`` model's too (``--rpm`` on a batch of an offline team holds it as it would a provider).
"""

from __future__ import annotations

import asyncio
import sys
import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from teamrun.llm.breaker import BreakerRegistry, process_breakers
from teamrun.llm.fallbacks import complete_in_order
from teamrun.llm.offline import OfflineChatModel, is_offline_model
from teamrun.llm.ratelimit import RateLimits, estimated_tokens, process_rate_limits
from teamrun.llm.types import Message, ModelReply, ModelSettings, ToolSchema

if TYPE_CHECKING:
    from teamrun.llm.adapter import LiteLLMChatModel

__all__ = ["ModelRouter"]


class ModelRouter:
    """A :class:`~teamrun.llm.types.ChatModel` choosing the simulator or LiteLLM by model name.

    ``adapter_options`` are passed to :class:`~teamrun.llm.adapter.LiteLLMChatModel`
    when it is built (``on_retry``, backoff settings...). ``breakers``: the circuit breakers of the models with
    fallbacks (default: the process's, shared by every run).
    """

    def __init__(
        self, *, breakers: BreakerRegistry | None = None, rate_limits: RateLimits | None = None, **adapter_options: Any
    ) -> None:
        self.offline = OfflineChatModel()
        self._breakers = breakers
        self._rate_limits = rate_limits
        self._adapter_options = {"rate_limits": rate_limits, **adapter_options}
        self._adapter: LiteLLMChatModel | None = None
        self._lock = threading.Lock()

    @property
    def breakers(self) -> BreakerRegistry:
        """The circuit breakers its models with fallbacks go through (the process's unless it was given its own)."""
        return self._breakers or process_breakers()

    @property
    def uses_litellm(self) -> bool:
        """Whether the LiteLLM adapter has been built (and LiteLLM imported)."""
        return self._adapter is not None

    def litellm_model(self) -> LiteLLMChatModel:
        """The LiteLLM adapter, built (and LiteLLM imported) on first use."""
        if self._adapter is None:
            with self._lock:
                if self._adapter is None:
                    from teamrun.llm.adapter import LiteLLMChatModel

                    self._adapter = LiteLLMChatModel(**self._adapter_options)
        return self._adapter

    def imports_litellm(self, models: Iterable[str]) -> bool:
        """Whether :meth:`prepare` of ``models`` imports LiteLLM (seconds): one of them is not offline and
        LiteLLM is not imported in this process yet."""
        return not self.uses_litellm and "litellm" not in sys.modules and _needs_litellm(models)

    def prepare(self, models: Iterable[str]) -> None:
        """Build the LiteLLM adapter now if any of ``models`` needs it."""
        if _needs_litellm(models):
            self.litellm_model()

    async def warm_up(self, models: Iterable[str]) -> list[str]:
        """Prepare ``models`` and make LiteLLM's first-call set-up for each that is not offline now, with no
        request (:meth:`~teamrun.llm.adapter.LiteLLMChatModel.warm_up`); the models warmed."""
        models = list(models)
        if not _needs_litellm(models):
            return []
        await asyncio.to_thread(self.litellm_model)  # the import: seconds, off the event loop
        return await self.litellm_model().warm_up(models)

    async def complete(
        self,
        messages: Sequence[Message],
        *,
        settings: ModelSettings,
        tools: Sequence[ToolSchema] = (),
        response_format: Mapping[str, Any] | None = None,
    ) -> ModelReply:
        async def ask(one: ModelSettings) -> ModelReply:
            if not is_offline_model(one.model.strip()):  # the adapter takes a slot before each attempt
                return await self.litellm_model().complete(
                    messages, settings=one, tools=tools, response_format=response_format
                )
            limits = self._rate_limits or process_rate_limits()
            tokens = lambda: estimated_tokens(messages, tools)  # noqa: E731
            waited = await limits.acquire(one.model, one.api_base, one.rate_limit, tokens=tokens)
            reply = await self.offline.complete(messages, settings=one, tools=tools, response_format=response_format)
            limits.spent(one.model, one.api_base, reply.usage.output_tokens)
            return replace(reply, waited_s=waited) if waited else reply

        if not settings.fallbacks:
            return await ask(settings)
        return await complete_in_order(ask, settings, self.breakers)


def _needs_litellm(models: Iterable[str]) -> bool:
    return any(not is_offline_model(model.strip()) for model in models)
