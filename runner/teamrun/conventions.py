"""The names and markers the engine writes into what a model sees, in one place.

The engine names the functions a model is offered (``ask_<worker>``,
``transfer_to_<agent>``, the background-task tools) and writes headings and
fenced data blocks into the messages it sends; the offline simulator
(:mod:`teamrun.llm.offline`) reads the same names and markers back to act like
a model that understood them. Both import them from here, so they cannot drift.
A bottom-layer module: it imports nothing from teamrun.
"""

from __future__ import annotations

import re

__all__ = [
    "BACKGROUND_RESULTS_HEADING",
    "BACKGROUND_TOOLS",
    "BOARD_CLAIM",
    "BOARD_COMPLETE",
    "BOARD_POST",
    "BOARD_RELEASE",
    "BOARD_TOOLS",
    "CANCEL_TASK",
    "CHECK_TASKS",
    "CONTEXT_HEADING",
    "DATA_BLOCK",
    "DELEGATE_TASK",
    "DELEGATION_TOOL_PREFIX",
    "HANDOFF_TOOL_PREFIX",
    "MEMORY_SAVE",
    "MEMORY_SEARCH",
    "MEMORY_TOOLS",
    "RECALLED_MEMORIES",
    "RECALLED_MEMORIES_HEADING",
    "REFERENCED_RESULTS_HEADING",
    "WAIT_FOR",
    "WORKSPACE_CHANGES",
    "WORKSPACE_INDEX",
    "WORKSPACE_READ",
    "WORKSPACE_WRITE_PREFIX",
    "context_heading",
    "data_block",
    "delegation_tool_name",
    "handoff_tool_name",
    "is_board_tool",
    "is_delegation_tool",
    "is_handoff_tool",
    "is_workspace_tool",
    "recalled_memories_block",
    "workspace_index_block",
    "workspace_write_tool_name",
]

# -- function names ----------------------------------------------------------------------
DELEGATION_TOOL_PREFIX = "ask_"
"""``ask_<worker>``: the per-agent delegation tool."""
HANDOFF_TOOL_PREFIX = "transfer_to_"
"""``transfer_to_<agent>``: the tool that hands the conversation over."""
DELEGATE_TASK = "delegate_task"
"""The one delegation tool of ``delegation.tool: delegate_task``."""
WAIT_FOR = "wait_for"
CHECK_TASKS = "check_tasks"
CANCEL_TASK = "cancel_task"
BACKGROUND_TOOLS = (WAIT_FOR, CHECK_TASKS, CANCEL_TASK)
"""The tools of an agent that delegates in the background (``delegation.background``)."""


def delegation_tool_name(worker: str) -> str:
    """The per-agent delegation tool for ``worker``."""
    return DELEGATION_TOOL_PREFIX + worker


def handoff_tool_name(agent: str) -> str:
    """The tool that hands the conversation to ``agent``."""
    return HANDOFF_TOOL_PREFIX + agent


def is_delegation_tool(name: str) -> bool:
    """Whether a model calling ``name`` delegates (``ask_<worker>`` or ``delegate_task``)."""
    return name.startswith(DELEGATION_TOOL_PREFIX) or name == DELEGATE_TASK


def is_handoff_tool(name: str) -> bool:
    return name.startswith(HANDOFF_TOOL_PREFIX)


WORKSPACE_READ = "workspace_read"
"""Reads one workspace entry: its value, version and writers."""
WORKSPACE_CHANGES = "workspace_changes"
"""Lists the workspace entries written since a version."""
WORKSPACE_WRITE_PREFIX = "workspace_write_"
"""``workspace_write_<entry>``: writes one workspace entry (its parameters carry the entry's schema)."""


def workspace_write_tool_name(entry: str) -> str:
    """The tool that writes the workspace entry ``entry``."""
    return WORKSPACE_WRITE_PREFIX + entry


def is_workspace_tool(name: str) -> bool:
    return name in (WORKSPACE_READ, WORKSPACE_CHANGES) or name.startswith(WORKSPACE_WRITE_PREFIX)


BOARD_POST = "board_post"
"""Posts a task on a board (its ``payload`` carries the board's schema)."""
BOARD_CLAIM = "board_claim"
"""Claims the next open task of a board: a lease, one claimant at a time."""
BOARD_COMPLETE = "board_complete"
"""Completes the task the caller holds, with its result."""
BOARD_RELEASE = "board_release"
"""Returns the task the caller holds to the board."""
BOARD_TOOLS = (BOARD_POST, BOARD_CLAIM, BOARD_COMPLETE, BOARD_RELEASE)


def is_board_tool(name: str) -> bool:
    return name in BOARD_TOOLS


MEMORY_SEARCH = "memory_search"
"""Searches the resource's long-term memories (``memory.search`` in the team file)."""
MEMORY_SAVE = "memory_save"
"""Saves one fact to the resource's long-term memory (``memory.save`` in the team file)."""
MEMORY_TOOLS = (MEMORY_SEARCH, MEMORY_SAVE)


# -- headings and fences in the messages -------------------------------------------------
BACKGROUND_RESULTS_HEADING = "## Background results"
"""Starts the message that announces finished background work to the delegating agent."""
REFERENCED_RESULTS_HEADING = "## Referenced results"
"""Starts the part of a task that holds the referenced earlier results, as fenced data blocks."""


RECALLED_MEMORIES_HEADING = "## Remembered facts"
"""Starts the part of a recalling agent's system prompt that quotes the resource's memories as fenced data blocks."""


def context_heading(parent: str) -> str:
    """The heading of the parent's conversation appended to a worker's task (``share_context``)."""
    return f"## Conversation of {parent} so far (for context)"


CONTEXT_HEADING = re.compile(r"^## Conversation of .+ so far \(for context\)$", re.MULTILINE)
"""Finds :func:`context_heading` of any parent."""


def data_block(token: str, ref: str, label: str, text: str) -> str:
    """One fenced data block: ``<<<DATA token ref=R as=L>>>`` … ``<<<END token>>>`` (``as=`` only with a
    label). ``token`` is random per block, so the text cannot close the fence."""
    header = f"<<<DATA {token} ref={ref}" + (f" as={label}" if label else "") + ">>>"
    return f"{header}\n{text}\n<<<END {token}>>>"


WORKSPACE_INDEX = re.compile(r"<<<WORKSPACE-INDEX>>>.*?<<<END WORKSPACE-INDEX>>>", re.DOTALL)
"""Finds :func:`workspace_index_block` (the journal's request hash masks it: the index changes as others write)."""


def workspace_index_block(text: str) -> str:
    """The workspace index in a delegating agent's system prompt, between fixed markers."""
    return f"<<<WORKSPACE-INDEX>>>\n{text}\n<<<END WORKSPACE-INDEX>>>"


RECALLED_MEMORIES = re.compile(r"<<<MEMORY>>>.*?<<<END MEMORY>>>", re.DOTALL)
"""Finds :func:`recalled_memories_block` (the journal's request hash and a recording's fingerprint mask it: what a
resource remembers changes between runs; a resumed run recalls from its journal)."""


def recalled_memories_block(text: str) -> str:
    """The facts a recalling agent is given (fenced data blocks), between fixed markers."""
    return f"<<<MEMORY>>>\n{text}\n<<<END MEMORY>>>"


DATA_BLOCK = re.compile(r"<<<DATA (\w+) ref=(\S+?)(?: as=[^\n]*?)?>>>\n(.*?)\n<<<END \1>>>", re.DOTALL)
"""Finds each :func:`data_block`; groups: token, ref, text."""
