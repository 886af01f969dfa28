"""Helpers for the thread tests: a model wrapper that records what each agent was sent."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from teamrun.llm.types import ChatModel, Message, ModelReply, ModelSettings, ToolSchema, current_scope


@dataclass
class SentMessages:
    """Wraps the team's model; ``calls`` holds ``(agent, messages)`` of every model call, in order."""

    inner: ChatModel | None = None
    calls: list[tuple[str, list[Message]]] = field(default_factory=list)

    def wrap(self, model: ChatModel) -> ChatModel:
        self.inner = model
        return self  # type: ignore[return-value]

    async def complete(
        self,
        messages: Sequence[Message],
        *,
        settings: ModelSettings,
        tools: Sequence[ToolSchema] = (),
        response_format: Mapping[str, Any] | None = None,
    ) -> ModelReply:
        scope = current_scope.get()
        assert scope is not None and self.inner is not None
        self.calls.append((scope.agent_path[-1], [dict(m) for m in messages]))
        return await self.inner.complete(messages, settings=settings, tools=tools, response_format=response_format)

    def first_call_of(self, agent: str) -> list[Message]:
        return next(messages for name, messages in self.calls if name == agent)

    def texts_sent_to(self, agent: str) -> list[str]:
        """Every user/assistant text in the first call of ``agent`` (system prompt left out)."""
        return [str(m.get("content")) for m in self.first_call_of(agent) if m.get("role") in ("user", "assistant")]
