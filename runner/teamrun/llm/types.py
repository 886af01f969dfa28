"""Data that crosses the boundary between the engine and a model.

Messages are plain OpenAI-format dicts (``{"role": ..., "content": ...}``)
because that is what LiteLLM speaks; everything coming back from a model is
normalised into the small frozen types below.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from teamrun.defaults import DEFAULT_NUM_RETRIES

Message = dict[str, Any]
"""One chat message in OpenAI format."""

ToolSchema = dict[str, Any]


def function_tool(name: str, description: str, properties: dict[str, Any], required: list[str]) -> ToolSchema:
    """A function the engine offers a model (delegation, workspace, board tools): a closed object of
    ``properties``, ``required`` ones named."""
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": {
                "type": "object",
                "properties": properties,
                "required": required,
                "additionalProperties": False,
            },
        },
    }


"""One tool in OpenAI function-calling format: ``{"type": "function", "function": {...}}``."""


@dataclass(frozen=True)
class ToolCall:
    """A tool call the model asked for. ``arguments`` is the raw JSON text the model wrote."""

    id: str
    name: str
    arguments: str


@dataclass(frozen=True)
class Usage:
    """Token counts of one or more model calls; adds up with ``+``."""

    input_tokens: int = 0
    """Every input token sent, the cached ones included."""
    output_tokens: int = 0
    requests: int = 0
    cached_tokens: int = 0
    """Of :attr:`input_tokens`, those the provider read from its prompt cache (charged at the cached price)."""
    cache_write_tokens: int = 0
    """Of :attr:`input_tokens`, those the provider wrote to its prompt cache (Anthropic, Bedrock: a surcharge)."""

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.input_tokens + other.input_tokens,
            self.output_tokens + other.output_tokens,
            self.requests + other.requests,
            self.cached_tokens + other.cached_tokens,
            self.cache_write_tokens + other.cache_write_tokens,
        )

    def as_dict(self) -> dict[str, int]:
        """The counts; ``cached_tokens`` and ``cache_write_tokens`` only when a provider reported some."""
        counts = {
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "total_tokens": self.total_tokens,
            "requests": self.requests,
        }
        if self.cached_tokens:
            counts["cached_tokens"] = self.cached_tokens
        if self.cache_write_tokens:
            counts["cache_write_tokens"] = self.cache_write_tokens
        return counts


@dataclass(frozen=True)
class RateLimit:
    """Requests and tokens per minute one model at one endpoint may be sent by the whole process
    (:mod:`teamrun.llm.ratelimit`); ``None``: no limit of that kind."""

    requests_per_minute: int | None = None
    tokens_per_minute: int | None = None


CacheMode = Literal["auto", "off"]
"""``auto``: the stable prompt prefix carries cache breakpoints for providers that need them; ``off``: none."""


@dataclass(frozen=True)
class ModelSettings:
    """How to call one agent's model. Built from the team file's model fields."""

    model: str
    api_base: str | None = None
    api_key_env: str | None = None
    """Name of the environment variable holding the API key (never the key itself)."""
    temperature: float | None = None
    max_tokens: int | None = None
    """``None``: :data:`teamrun.defaults.DEFAULT_MAX_TOKENS` (or the model's smaller output limit)."""
    timeout_s: float | None = None
    """Seconds per request; ``None``: :data:`teamrun.defaults.DEFAULT_REQUEST_TIMEOUT_S`."""
    num_retries: int = DEFAULT_NUM_RETRIES
    stream: bool = False
    extra: Mapping[str, Any] = field(default_factory=dict)
    """Provider-specific parameters passed through to ``litellm.acompletion``."""
    fallbacks: tuple[ModelSettings, ...] = ()
    """The models asked in order, each with the same request, when the one before failed for a reason of
    :attr:`fallback_on` (:mod:`teamrun.llm.fallbacks`); each has its own endpoint, key, retries and parameters."""
    fallback_on: frozenset[str] | None = None
    """The failures that pass the request on to the next model (:data:`teamrun.llm.fallbacks.FALLBACK_REASONS`);
    ``None``: every one of them."""
    cache: CacheMode = "auto"
    """Prompt caching (:mod:`teamrun.llm.caching`): ``auto`` marks the stable prefix for providers that need it."""
    rate_limit: RateLimit | None = None
    """This model's requests and tokens per minute at its endpoint, shared by the process (``None``: none of its
    own; the process's default, from ``--rpm``/``--tpm``, may still apply)."""


@dataclass(frozen=True)
class Unwell:
    """A model of a fallback list that did not answer a call for a reason of its health: it failed (a server
    error, a timeout...; not a context too long for it), or its open circuit breaker skipped it. Journaled with the
    reply that a later model of the list gave: a resumed run's breakers learn from it
    (:func:`teamrun.llm.fallbacks.hold_open_from_journal`)."""

    model: str
    api_base: str | None
    at: float
    """When the call learnt it (seconds since the epoch: a resume in another process reads it)."""
    open_s: float
    """Seconds of its breaker's cool-down left then: the whole cool-down after a failure, what was left of it
    when skipped."""


@dataclass(frozen=True)
class ModelReply:
    """One model response, normalised."""

    text: str | None
    tool_calls: tuple[ToolCall, ...] = ()
    usage: Usage = Usage()
    cost_usd: float = 0.0
    model: str = ""
    finish_reason: str | None = None
    usage_known: bool = True
    """False when the provider's usage figures were malformed: :attr:`usage` and :attr:`cost_usd` are then
    unknown (zeros that mean "not known"), never counted as 0 tokens."""
    answered_by: str = ""
    """The model of the settings' list that answered (the team file's model string); ``""``: the one asked."""
    fallback: str | None = None
    """Why a fallback answered, e.g. ``"openai/b after openai/a failed: server error (HTTP 500)"``; ``None``
    when the first model did."""
    waited_s: float = 0.0
    """Seconds the call waited for its model's rate limit (:mod:`teamrun.llm.ratelimit`): not the model's time."""
    unwell: tuple[Unwell, ...] = ()
    """The models of the list before :attr:`answered_by` that failed or were skipped for their health."""

    def as_message(self) -> Message:
        """The assistant message to append to the conversation history."""
        message: Message = {"role": "assistant", "content": self.text}
        if self.tool_calls:
            message["tool_calls"] = [
                {
                    "id": call.id,
                    "type": "function",
                    "function": {"name": call.name, "arguments": call.arguments},
                }
                for call in self.tool_calls
            ]
        return message


class ChatModel(Protocol):
    """Anything that can answer a conversation. The engine only talks to this."""

    async def complete(
        self,
        messages: Sequence[Message],
        *,
        settings: ModelSettings,
        tools: Sequence[ToolSchema] = (),
        response_format: Mapping[str, Any] | None = None,
    ) -> ModelReply: ...


def json_error_reason(exc: json.JSONDecodeError) -> str:
    """Where and why JSON failed to parse: ``"Expecting value at char 0"``.

    Some of :mod:`json`'s messages already end in "at" ("Unterminated string
    starting at"); the position follows them without a second one.
    """
    reason = exc.msg.removesuffix(" at")
    return f"{reason} at char {exc.pos}"


def parse_arguments(raw: str) -> dict[str, Any]:
    """Parse a tool call's JSON arguments; raise ``ValueError`` with a model-readable reason."""
    if not raw.strip():
        return {}
    try:
        value = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise ValueError(f"arguments are not valid JSON ({json_error_reason(exc)})") from None
    if not isinstance(value, dict):
        raise ValueError("arguments must be a JSON object")
    return value


@dataclass(frozen=True)
class CallScope:
    """Who is calling the model: set by the engine around each call, read by wrappers
    (record/replay, retry reporting) that need to know the agent and turn."""

    agent_path: tuple[str, ...]
    turn: int
    """1-based model call number within this agent invocation."""
    span_id: str = ""
    run_id: str = ""
    waits: list[float] = field(default_factory=list, compare=False, repr=False)
    """The seconds each of the call's rate-limit waits lasted (:mod:`~teamrun.llm.ratelimit` adds them as they
    end, also a wait cut short): what a call that ends without a reply waited."""

    @property
    def waited_s(self) -> float:
        return sum(self.waits)


current_scope: ContextVar[CallScope | None] = ContextVar("teamrun_call_scope", default=None)
"""The :class:`CallScope` of the model call in progress (``None`` outside the engine)."""
