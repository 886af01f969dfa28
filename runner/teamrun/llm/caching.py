"""Prompt caching: cache breakpoints on the stable prefix of a request, for the providers that need them.

OpenAI, DeepSeek, Gemini and most OpenAI-compatible servers cache a repeated prompt prefix on their own and
report the tokens read from it (``prompt_tokens_details.cached_tokens``). Anthropic — directly, on Bedrock or
on Vertex AI — caches only up to the blocks a request marks with ``cache_control`` (at most 4 marks;
Anthropic's prompt-caching docs). With ``cache: auto`` (the default) :func:`with_breakpoints` marks, for those
providers, through LiteLLM's ``cache_control`` (which LiteLLM turns into Bedrock's ``cachePoint``):

1. the last tool schema: the tools, which come first in the prefix;
2. the system prompt (instructions, the workers section);
3. the last message of the conversation: the conversation so far, which the next turn reads back;
4. the message that was last in the previous turn (the last user or tool message before the latest assistant
   message): the entry the previous turn wrote, so this turn reads it even when its new messages are more than
   Anthropic's 20-block lookback.

The marks do not change what is cached: the prefix must also stay byte-identical between turns, which the
engine keeps (no timestamps, tools in a fixed order; :mod:`teamrun.engine.turn.prompts`). What changes from
turn to turn — a delegating agent's task ledger and workspace index, the memories a recalling agent is given —
is therefore never in the system prompt: it is sent after the conversation, as one trailing ``user`` message
made by :func:`runner_context` (only in the request, never in the conversation the agent keeps). It is the
request's last message but not the conversation's: it takes no mark (a mark on it would end the cached prefix
on text that differs next turn). It is a ``user`` message, not a ``system`` one: LiteLLM folds every ``system``
message into Anthropic's top-level ``system``, which comes before the messages in the cached order.
``cache: off`` sends no marks. The request's messages and tools are copied, never changed.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from teamrun.llm.types import Message, ToolSchema

__all__ = [
    "BREAKPOINT",
    "RUNNER_CONTEXT_HEADER",
    "is_runner_context",
    "needs_breakpoints",
    "runner_context",
    "with_breakpoints",
]

BREAKPOINT: dict[str, str] = {"type": "ephemeral"}
"""The ``cache_control`` value of one breakpoint (Anthropic's five-minute cache)."""

RUNNER_CONTEXT_HEADER = "Context from teamrun (updated each turn; not a message from the user):"
"""The first line of the trailing context message (:func:`runner_context`)."""

_MARKED_PROVIDERS = frozenset({"anthropic", "bedrock", "bedrock_converse", "vertex_ai", "vertex_ai_beta"})
_ANTHROPIC_FAMILIES = ("claude", "anthropic", "nova")
"""On Bedrock and Vertex AI only these model families take breakpoints (Nova: Bedrock's own)."""


def needs_breakpoints(provider: str, model: str) -> bool:
    """Whether ``model`` at LiteLLM's ``provider`` caches only what a request marks (Anthropic's models)."""
    if provider == "anthropic":
        return True
    return provider in _MARKED_PROVIDERS and any(family in model.lower() for family in _ANTHROPIC_FAMILIES)


def runner_context(tail: str) -> Message:
    """The request's trailing message that carries ``tail`` (the parts of an agent's context that change between
    turns), marked as context the runner supplies, not something the user said."""
    return {"role": "user", "content": f"{RUNNER_CONTEXT_HEADER}\n\n{tail}"}


def is_runner_context(message: Message) -> bool:
    """Whether ``message`` is a :func:`runner_context` message."""
    content = message.get("content")
    return (
        message.get("role") == "user" and isinstance(content, str) and content.startswith(f"{RUNNER_CONTEXT_HEADER}\n")
    )


def with_breakpoints(
    messages: Sequence[Message], tools: Sequence[ToolSchema]
) -> tuple[list[Message], list[ToolSchema]]:
    """Copies of ``messages`` and ``tools`` with the module's breakpoints (see its docstring)."""
    marked_tools = [dict(tool) for tool in tools]
    if marked_tools:
        marked_tools[-1]["cache_control"] = dict(BREAKPOINT)
    marked = list(messages)
    for index in _marked_messages(marked):
        marked[index] = _with_mark(marked[index])
    return marked, marked_tools


def _marked_messages(messages: Sequence[Message]) -> list[int]:
    """Which messages take a breakpoint: the system prompt, the conversation's last message and the previous
    turn's last (a trailing :func:`runner_context` message is not part of the conversation)."""
    if messages and is_runner_context(messages[-1]):
        messages = messages[:-1]
    chosen: list[int] = []
    system = [i for i, m in enumerate(messages) if m.get("role") == "system" and _markable(m)]
    if system:
        chosen.append(system[-1])
    last = len(messages) - 1
    if last >= 0 and _markable(messages[last]):
        chosen.append(last)
    answered = [i for i, m in enumerate(messages) if m.get("role") == "assistant"]
    if answered:
        before = [i for i in range(answered[-1]) if messages[i].get("role") in ("user", "tool")]
        earlier = [i for i in before if _markable(messages[i])]
        if earlier:
            chosen.append(earlier[-1])
    return sorted(set(chosen))


def _markable(message: Message) -> bool:
    content = message.get("content")
    if isinstance(content, str):
        return bool(content)
    return isinstance(content, list) and bool(content) and isinstance(content[-1], dict)


def _with_mark(message: Message) -> Message:
    """``message`` with its (last) content block marked: text becomes one text block; a tool result is marked
    as a whole (LiteLLM puts the mark on its ``tool_result`` block)."""
    if message.get("role") == "tool":
        return {**message, "cache_control": dict(BREAKPOINT)}
    content: Any = message["content"]
    if isinstance(content, str):
        blocks = [{"type": "text", "text": content, "cache_control": dict(BREAKPOINT)}]
    else:
        blocks = [*content[:-1], {**content[-1], "cache_control": dict(BREAKPOINT)}]
    return {**message, "content": blocks}
