"""Long-term memory: facts a team learned about a resource (a user, an organisation), recalled in later threads.

Sync like the rest of the store (SQLAlchemy Core); the engine calls it through ``asyncio.to_thread``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from teamrun.errors import UserError

if TYPE_CHECKING:
    from teamrun.store.db import Store


class MemoryRefused(UserError):
    """A memory operation refused for a reason the user can act on: a bad resource id, a fact past the cap,
    a resource past its cap, a vector whose size differs from the resource's other vectors."""


@dataclass(frozen=True)
class Provenance:
    """Where a memory came from."""

    run_id: str | None
    thread_id: str | None
    agent: str | None
    saved_at: float
    """Unix seconds."""


@dataclass(frozen=True)
class Memory:
    id: str
    """Stable: a hash of (resource, normalised fact), so the same fact saved twice is one memory."""
    resource: str
    fact: str
    provenance: Provenance
    expires_at: float | None


@dataclass(frozen=True)
class Recalled:
    memory: Memory
    score: float
    """The hybrid score in [0, 1] used for ranking and ``min_score``."""
    vector_score: float | None
    keyword_score: float | None


@dataclass(frozen=True)
class Saved:
    memory: Memory
    created: bool
    """False: this fact was already saved for this resource (the provenance kept is the first one's)."""


@dataclass(frozen=True)
class Forgotten:
    resource: str
    memories: int
    """Memories removed."""
    working_memory: int
    """Working-memory records removed (workspace entries with ``persist: resource``)."""


@dataclass(frozen=True)
class MemoryLimits:
    max_fact_chars: int = 2000
    max_memories_per_resource: int = 10000


def check_resource_id(resource: object) -> str:
    """The one check of a resource id (CLI, serve, engine): non-empty printable text of at most 200 characters."""
    raise NotImplementedError


class MemoryStore:
    """A store's long-term memories and working-memory records, each scoped to one resource in every query."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def save(
        self,
        resource: str,
        fact: str,
        vector: Sequence[float],
        provenance: Provenance,
        *,
        ttl_s: float | None = None,
        limits: MemoryLimits = MemoryLimits(),
    ) -> Saved:
        raise NotImplementedError

    def search(
        self,
        resource: str,
        query: str,
        vector: Sequence[float] | None,
        *,
        k: int = 5,
        min_score: float = 0.0,
        mode: Literal["hybrid", "vector", "keyword"] = "hybrid",
        now: float | None = None,
    ) -> list[Recalled]:
        raise NotImplementedError

    def list(self, resource: str, *, limit: int | None = None) -> list[Memory]:
        raise NotImplementedError

    def forget(self, resource: str) -> Forgotten:
        raise NotImplementedError

    def load_working(self, resource: str, team: str) -> dict[str, tuple[int, Any]]:
        raise NotImplementedError

    def save_working(self, resource: str, team: str, entry: str, version: int, value: Any) -> None:
        raise NotImplementedError


__all__ = [
    "Forgotten",
    "Memory",
    "MemoryLimits",
    "MemoryRefused",
    "MemoryStore",
    "Provenance",
    "Recalled",
    "Saved",
    "check_resource_id",
]
