"""Recall before a turn: the prompt part that quotes what a recalling agent remembers of the resource (and, with
``messages:``, what was said in the resource's other threads).

The query is the agent's task (a worker's) or the user's latest message (the supervisor's, or an agent a
conversation was handed to); the facts found are put after the agent's stable prompt prefix (its instructions
and workers section, which stay byte-identical for the provider's prompt cache), as fenced quoted data
(:mod:`teamrun.engine.memory.blocks`). A recall that cannot be made (the limits used up, the embedding endpoint
failing) leaves the block out with a warning: the agent works on without it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from teamrun.config.models import MemoryRecall
from teamrun.engine.memory.blocks import recalled_block
from teamrun.engine.memory.calls import recall
from teamrun.engine.memory.session import MemoryUnavailable
from teamrun.llm.embedding import EmbeddingFailed
from teamrun.llm.types import Message
from teamrun.store.memory import MemoryRefused

if TYPE_CHECKING:
    from teamrun.engine.runtime import AgentFrame, RunContext

__all__ = ["recall_query", "recalled_part", "recalls"]


def recalls(ctx: RunContext, name: str) -> MemoryRecall | None:
    """How agent ``name`` recalls before each turn in this run (``None``: it does not)."""
    settings = ctx.config.memory
    if ctx.memory is None or settings is None or not settings.recall or name not in settings.recall:
        return None
    return settings.recall[name] or MemoryRecall()


def recall_query(messages: Sequence[Message]) -> str:
    """The latest user message's text: the task, or what the user said last."""
    for message in reversed(messages):
        content = message.get("content")
        if message.get("role") == "user" and isinstance(content, str) and content.strip():
            return content
    return ""


async def recalled_part(ctx: RunContext, frame: AgentFrame, query: str, turn: int) -> str:
    """The block of facts ``frame``'s agent recalls before model call ``turn`` ("" when it does not recall)."""
    how = recalls(ctx, frame.name)
    if how is None or ctx.memory is None:
        return ""
    nothing = recalled_block((), messages=() if how.messages is not None else None)
    if not query.strip():
        return nothing
    try:
        found = await recall(ctx.memory, ctx, frame, query, turn, how)
    except (MemoryUnavailable, EmbeddingFailed, MemoryRefused) as exc:
        ctx.warn(frame, f"memory: {frame.name} recalled nothing before turn {turn}: {exc}")
        return nothing
    return recalled_block(
        found.facts,
        left_out=found.left_out,
        messages=found.messages if how.messages is not None else None,
        messages_left_out=found.messages_left_out,
    )
