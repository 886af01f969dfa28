"""Long-term memory in a run: a resource's facts recalled before a recalling agent's turns, and the
``memory_search`` / ``memory_save`` tools (see docs/memory.md).

- ``opening``: :func:`open_memory` — whether and how a run has memory (team file + resource), the embedder
- ``session``: :class:`MemorySession` — a run's resource, store, embedder and secrets (no run state)
- ``calls``: the one path of an embedding (masked, journaled, charged), recall, search and save
- ``recall``: the prompt part recalled before a turn; ``blocks``: the facts as fenced quoted data
- ``tools``: the memory tools an agent is offered
"""

from teamrun.engine.memory.opening import NO_RESOURCE_WARNING, memory_for_run, open_memory
from teamrun.engine.memory.session import MemorySession

__all__ = ["NO_RESOURCE_WARNING", "MemorySession", "memory_for_run", "open_memory"]
