"""One run's long-term memory (:class:`MemorySession`): its resource, the store's memories and indexed thread
messages, the embedding model, and the run's secrets it masks (:meth:`MemorySession.mask`).

It holds no run state: what it does inside a run (embed, recall, search, save) is
:mod:`teamrun.engine.memory.calls`, which takes the run and the agent, so :class:`~teamrun.engine.runtime.RunContext`
can hold a session without an import circle.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from teamrun.config.models import LongTermMemory
from teamrun.errors import RunError
from teamrun.llm.embedding import Embedder
from teamrun.secrets import Redactor
from teamrun.store.memory import MemoryLimits, MemoryStore
from teamrun.store.memory_messages import MessageIndex

if TYPE_CHECKING:
    from teamrun.engine.memory.cassette import MemoryCallRecorder, MemoryCallReplay
    from teamrun.events import Event

__all__ = ["MemorySession", "MemoryUnavailable"]


class MemoryUnavailable(RunError):
    """Memory could not be used for this call: the run's limits are used up (nothing was embedded)."""


@dataclass
class MemorySession:
    """The long-term memory of one run, for one resource."""

    resource: str
    settings: LongTermMemory
    store: MemoryStore
    embedder: Embedder
    redactor: Redactor
    messages: MessageIndex
    """The store's thread messages indexed for the recall of earlier threads (``memory.recall.<agent>.messages``)."""
    known_vectors: dict[str, list[float]] = field(default_factory=dict)
    """Vectors this process has for a fingerprint (a recall's query asked again next turn is not paid again)."""
    recorder: MemoryCallRecorder | None = None
    """A recording (``--record``): where the memory tools' outcomes are written (:mod:`.cassette`)."""
    replay: MemoryCallReplay | None = None
    """A replay (``--replay``): the memory tools answer from the recording and read or write no memory."""
    working_loaded: dict[str, Any] = field(default_factory=dict)
    """The working-memory values the run's workspace entries were loaded with (masked): what the run's own changes
    are measured from when they are saved (:mod:`teamrun.engine.memory.working`)."""

    # -- a subscriber of the run's events: it learns the run's later secrets ---------------------------------------
    def __call__(self, event: Event) -> None:
        """Events are not read; the session subscribes only to be told secrets (:meth:`keep_secrets`)."""

    def keep_secrets(self, values: frozenset[str]) -> None:
        self.redactor.add(values, declared=True)

    def mask(self, text: str) -> str:
        return self.redactor.text(text)

    @property
    def limits(self) -> MemoryLimits:
        return MemoryLimits(self.settings.max_fact_chars, self.settings.max_memories_per_resource)
