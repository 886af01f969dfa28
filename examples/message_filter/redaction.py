"""A Python message filter for ``team.yaml`` (``message_filter.python: redaction:redact_secrets``).

A filter gets the parent's messages that survived the declarative rules
(``exclude_roles``, ``drop_matching``, ``last``, ``max_tokens``) as a list of
OpenAI-style dicts (``{"role": ..., "content": ...}``), and returns the list
the worker should see. It may drop, reorder or rewrite messages; it must not
change the list it was given in place. ``async def`` works too.

The filter covers the *shared conversation*; the task itself is what the lead
model writes. ``redact_task`` is an ``on_start`` hook that cleans that too.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from teamrun.engine.delegation.hooks import HookContext

REDACTED = "[redacted]"

_SECRETS = [
    re.compile(r"\bsk-[A-Za-z0-9_-]{8,}"),  # OpenAI-style API keys
    re.compile(r"\bAKIA[0-9A-Z]{16}\b"),  # AWS access key ids
    re.compile(r"\bgh[pousr]_[A-Za-z0-9]{20,}\b"),  # GitHub tokens
    re.compile(r"(?i)\b(password|passwd|token)\s*[:=]\s*\S+"),
    re.compile(r"[\w.+-]+@[\w-]+\.[\w.-]+"),  # e-mail addresses
]


def redact(text: str) -> str:
    """``text`` with every secret-looking substring replaced by ``[redacted]``."""
    for pattern in _SECRETS:
        text = pattern.sub(REDACTED, text)
    return text


def redact_secrets(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Copies of the messages with secrets redacted; messages left empty are dropped."""
    kept: list[dict[str, Any]] = []
    for message in messages:
        content = message.get("content")
        if isinstance(content, str):
            content = redact(content)
            if not content.strip() and not message.get("tool_calls"):
                continue
        kept.append({**message, "content": content})
    return kept


def redact_task(ctx: HookContext) -> dict[str, Any] | None:
    """on_start hook: replace the task with a redacted copy when it holds a secret."""
    cleaned = redact(ctx.prompt)
    return None if cleaned == ctx.prompt else {"prompt": cleaned}
