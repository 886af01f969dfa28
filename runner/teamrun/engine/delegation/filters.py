"""Message filters: what a worker sees of its delegating agent's conversation.

Without a ``message_filter`` a worker sees only its task. With one, the
parent's conversation (never its system prompt) is filtered by the rules in
this order — ``exclude_roles``, ``drop_matching``, ``last``, ``max_tokens`` —
then by an optional Python filter, and handed to the worker as one block of
text (so no tool call is ever orphaned in the worker's history).
"""

from __future__ import annotations

import asyncio
import inspect
import re
from collections.abc import Sequence
from typing import Any

from teamrun.config.imports import resolve_import_path
from teamrun.config.models import MessageFilter
from teamrun.conventions import context_heading
from teamrun.engine.runtime import AgentFrame, RunContext
from teamrun.errors import RunError
from teamrun.llm.types import Message


class FilterFailed(RunError):
    """The Python message filter failed and the filter says ``on_error: fail``."""


def _text(message: Message) -> str:
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
    return ""


def _approx_tokens(message: Message) -> int:
    return max(1, len(_text(message)) // 4)


def apply_rules(messages: Sequence[Message], rules: MessageFilter) -> list[Message]:
    """The declarative part of a filter (pure, no user code)."""
    kept = [m for m in messages if m.get("role") != "system"]
    if rules.exclude_roles:
        kept = [m for m in kept if m.get("role") not in rules.exclude_roles]
    if rules.drop_matching:
        patterns = [re.compile(p) for p in rules.drop_matching]
        kept = [m for m in kept if not any(p.search(_text(m)) for p in patterns)]
    if rules.last is not None:
        kept = kept[-rules.last :]
    if rules.max_tokens is not None:
        budget, newest = rules.max_tokens, []
        for message in reversed(kept):
            budget -= _approx_tokens(message)
            if budget < 0:
                break
            newest.append(message)
        kept = list(reversed(newest))
    return kept


async def filter_messages(
    ctx: RunContext, frame: AgentFrame, rules: MessageFilter, messages: Sequence[Message]
) -> list[Message]:
    """Rules, then the Python filter; a failing Python filter falls back per ``on_error``."""
    kept = apply_rules(messages, rules)
    if rules.python is None:
        return kept
    try:
        function: Any = resolve_import_path(rules.python, base_dir=ctx.base_dir)
        value = function(list(kept)) if not inspect.iscoroutinefunction(function) else await function(list(kept))
        if inspect.isawaitable(value):
            value = await value
        if not isinstance(value, list):
            raise TypeError(f"returned {type(value).__name__}, not a list of messages")
        return value
    except asyncio.CancelledError:
        raise
    except Exception as exc:
        message = f"message filter {rules.python} failed: {type(exc).__name__}: {exc}"
        if rules.on_error == "fail":
            raise FilterFailed(message) from exc
        ctx.warn(frame, message + "; used the rule-filtered messages")
        return kept


def as_context_block(parent: str, messages: Sequence[Message]) -> str:
    """The parent's (filtered) conversation as text for the worker's prompt."""
    lines = [context_heading(parent)]
    for message in messages:
        text = _text(message)
        if message.get("tool_calls"):
            calls = ", ".join(c["function"]["name"] for c in message["tool_calls"])
            text = f"{text} [called: {calls}]".strip()
        if text:
            lines.append(f"[{message.get('role')}] {text}")
    return "\n".join(lines)
