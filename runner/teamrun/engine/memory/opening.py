"""A run's long-term memory opened from the team file and the run's resource (:func:`open_memory`).

The one place that decides whether a run has long-term memory: a team file with ``memory:`` and a run given a
resource (checked by :func:`teamrun.store.memory.check_resource_id`). The embedding model's endpoint and key follow
the agents' rules: its own ``api_base``, else the run's (``--api-base``) for a model that is not ``offline``; the key
from the variable ``api_key_env`` names (unset or empty: a clear error before anything runs), else the provider's
usual variable. One :class:`~teamrun.store.memory.MemoryStore` per store in a process (it caches each resource's
vectors).
"""

from __future__ import annotations

import asyncio
import os
import threading
import weakref
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from teamrun.config.models import LongTermMemory
from teamrun.engine.durability.memory_entries import resource_entry
from teamrun.engine.memory.cassette import MemoryCallRecorder, MemoryCallReplay
from teamrun.engine.memory.session import MemorySession
from teamrun.errors import UsageError
from teamrun.llm.embedding import embedder_for
from teamrun.llm.offline import is_offline_model
from teamrun.secrets import Redactor
from teamrun.store.memory import MemoryStore, check_resource_id
from teamrun.store.memory_messages import MessageIndex

if TYPE_CHECKING:
    from teamrun.engine.durability.journal import RunJournal
    from teamrun.store import Store

__all__ = ["NO_RESOURCE_WARNING", "memory_for_run", "memory_store_of", "message_index_of", "open_memory"]

NO_RESOURCE_WARNING = (
    "the team file declares memory: but this run has no resource, so it has no long-term memory "
    "(give one: --resource ID, or Team.run(..., resource=...))"
)

_STORES: weakref.WeakKeyDictionary[Store, MemoryStore] = weakref.WeakKeyDictionary()
_MESSAGES: weakref.WeakKeyDictionary[Store, MessageIndex] = weakref.WeakKeyDictionary()
_LOCK = threading.Lock()


def memory_store_of(store: Store) -> MemoryStore:
    """The store's memories (one per store in a process)."""
    with _LOCK:
        memories = _STORES.get(store)
        if memories is None:
            memories = _STORES[store] = MemoryStore(store)
        return memories


def message_index_of(store: Store) -> MessageIndex:
    """The store's thread messages indexed for recall (one per store in a process: it caches their vectors)."""
    with _LOCK:
        index = _MESSAGES.get(store)
        if index is None:
            index = _MESSAGES[store] = MessageIndex(store)
        return index


def open_memory(
    settings: LongTermMemory,
    store: Store,
    resource: str,
    *,
    secrets: Iterable[str],
    api_base: str | None,
    chat_model: object = None,
) -> MemorySession:
    """The run's memory of ``resource`` (blocking: opens the store). Raises a :class:`~teamrun.errors.UserError`
    for a bad resource id or an unset key variable. ``chat_model``: the run's; a recording
    (:class:`~teamrun.llm.cassette.RecordingModel`) records the embedding calls in its cassette too, and a replay
    (:class:`~teamrun.llm.cassette.ReplayModel`) answers them from it (no call, no key); the memory tools' outcomes
    likewise (:mod:`teamrun.engine.memory.cassette`)."""
    from teamrun.llm.cassette import RecordingModel, ReplayModel

    session = _session(settings, store, resource, secrets=secrets, api_base=api_base, chat_model=chat_model)
    if isinstance(chat_model, ReplayModel):  # the memory tools answer from the recording: no search, no save
        session.replay = MemoryCallReplay(chat_model.path)
    elif isinstance(chat_model, RecordingModel):
        session.recorder = MemoryCallRecorder(chat_model.path, chat_model.lock)
    return session


def _session(
    settings: LongTermMemory,
    store: Store,
    resource: str,
    *,
    secrets: Iterable[str],
    api_base: str | None,
    chat_model: object,
) -> MemorySession:
    from teamrun.engine.memory.cassette import RecordingEmbedder, ReplayEmbedder
    from teamrun.llm.cassette import RecordingModel, ReplayModel

    check_resource_id(resource)
    embedding = settings.embedding
    offline = is_offline_model(embedding.model.strip())
    if isinstance(chat_model, ReplayModel) and not offline:
        replayed = ReplayEmbedder(embedding.model, chat_model.path, embedding.dimensions)
        return MemorySession(
            resource, settings, memory_store_of(store), replayed, Redactor(secrets), message_index_of(store)
        )
    key = None
    if embedding.api_key_env and not offline:
        key = os.environ.get(embedding.api_key_env, "")
        if not key:
            raise UsageError(
                f"memory.embedding: environment variable {embedding.api_key_env} (named by api_key_env) is not "
                "set or empty; export it with the embedding endpoint's key"
            )
    embedder = embedder_for(
        embedding.model,
        api_base=None if offline else (embedding.api_base or api_base),
        api_key=key,
        dimensions=embedding.dimensions,
        timeout_s=embedding.request_timeout_s,
        num_retries=embedding.num_retries,
    )
    if isinstance(chat_model, RecordingModel) and not offline:
        embedder = RecordingEmbedder(embedder, chat_model.path, chat_model.lock, embedding.dimensions)
    return MemorySession(
        resource, settings, memory_store_of(store), embedder, Redactor(secrets), message_index_of(store)
    )


async def memory_for_run(
    settings: LongTermMemory | None,
    store: Callable[[], Store],
    resource: str | None,
    journal: RunJournal | None,
    *,
    secrets: Iterable[str],
    api_base: str | None,
    working_memory: bool = False,
    chat_model: object = None,
) -> tuple[MemorySession | None, list[str]]:
    """The run's memory and what the run warns about it. A resumed run takes the resource its first attempt
    was given (journaled as it started) unless given one; a new journaled run journals its resource.
    ``working_memory``: the workspace persists per resource (a run with a resource has memory for it even
    without ``memory:``, with no recall and no tools)."""
    if resource is None and journal is not None:
        resource = journal.replay.memory_resource()
    if settings is None and working_memory:
        settings = LongTermMemory()
    if settings is None:
        unused = f"resource {resource!r} given, but the team file declares no memory:, so it is not used"
        return None, [unused] if resource is not None else []
    if resource is None:
        return None, [NO_RESOURCE_WARNING]
    memory = await asyncio.to_thread(
        lambda: open_memory(settings, store(), resource, secrets=secrets, api_base=api_base, chat_model=chat_model)
    )
    if journal is not None and journal.replay.memory_resource() != resource:
        journal.write(resource_entry(resource))
    return memory, []
