"""The store's index of thread messages for recall (SQLite and PostgreSQL): scoped to the resource in the query, the
current thread left out, a thread's deletion and a resource's forget removing its rows (and saying how many), an
older store upgraded to hold it."""

from __future__ import annotations

from pathlib import Path

import pytest
import sqlalchemy as sa

from teamrun.llm.embedding import offline_vector
from teamrun.store import migrations as migrations_module
from teamrun.store import open_store
from teamrun.store.db import Store
from teamrun.store.memory import MemoryRefused, MemoryStore
from teamrun.store.memory_messages import IndexedMessage, MessageIndex

NOW = 1_700_000_000.0
LISBON = "My parcel to Lisbon arrived damaged, order 7731"
REFUND = "A refund for the damaged Lisbon parcel is on its way"
QUESTION = "what happened with my Lisbon parcel"


def _turn(index: MessageIndex, resource: str, thread: str, run: str, user: str, answer: str) -> None:
    messages = [
        IndexedMessage("user", user, offline_vector(user)),
        IndexedMessage("assistant", answer, offline_vector(answer)),
    ]
    index.add(resource, thread, run, messages, at=NOW)


def _found(
    index: MessageIndex, resource: str, query: str, *, exclude: str | None = None, k: int = 5
) -> list[tuple[str, str, str]]:
    found = index.search(resource, query, offline_vector(query), k=k, min_score=0.05, exclude_thread=exclude)
    return [(f.message.thread_id, f.message.role, f.message.text) for f in found]


def _desk(store: Store, *threads: str) -> None:
    for thread in threads:
        store.threads.create(thread, "desk")


def test_messages_are_found_for_their_resource_only_and_never_in_the_thread_left_out(store_url: str) -> None:
    with open_store(store_url) as store:
        index = MessageIndex(store)
        _turn(index, "cust-A", "t1", "r1", LISBON, REFUND)
        _turn(index, "cust-A", "t2", "r2", QUESTION, "It arrived damaged")
        _turn(index, "cust-B", "t9", "r9", f"{LISBON} (B)", "B's answer about Lisbon")
        found = _found(index, "cust-A", QUESTION, exclude="t2")
        assert ("t1", "user", LISBON) in found and ("t1", "assistant", REFUND) in found
        assert {thread for thread, _role, _text in found} == {"t1"}
        assert {thread for thread, _role, _text in _found(index, "cust-A", QUESTION)} == {"t1", "t2"}
        assert {thread for thread, _role, _text in _found(index, "cust-B", QUESTION)} == {"t9"}
        assert _found(index, "cust-C", QUESTION) == []
        assert len(_found(index, "cust-A", QUESTION, k=1)) == 1
        _turn(index, "cust-A", "t1", "r1", LISBON, REFUND)  # the same turn indexed again (a resume): kept once
        assert len(_found(index, "cust-A", QUESTION, exclude="t2")) == 2
        for mode in ("vector", "keyword"):
            hits = index.search(
                "cust-A", QUESTION, offline_vector(QUESTION), k=5, min_score=0.05, mode=mode, exclude_thread="t2"
            )  # type: ignore[arg-type]
            assert {f.message.thread_id for f in hits} == {"t1"}, mode


def test_deleting_a_thread_removes_its_indexed_messages(store_url: str) -> None:
    with open_store(store_url) as store:
        _desk(store, "t1", "t2")
        index = MessageIndex(store)
        _turn(index, "cust-A", "t1", "r1", LISBON, REFUND)
        _turn(index, "cust-A", "t2", "r2", "The Lisbon parcel again", "Still on its way")
        assert {t for t, _r, _x in _found(index, "cust-A", QUESTION)} == {"t1", "t2"}  # cached now
        assert store.threads.delete("t1")
        assert {t for t, _r, _x in _found(index, "cust-A", QUESTION)} == {"t2"}
        assert {t for t, _r, _x in _found(MessageIndex(store), "cust-A", QUESTION)} == {"t2"}


def test_forget_removes_a_resource_s_indexed_messages_and_counts_them(store_url: str) -> None:
    with open_store(store_url) as store:
        index = MessageIndex(store)
        _turn(index, "cust-A", "t1", "r1", LISBON, REFUND)
        _turn(index, "cust-A", "t2", "r2", QUESTION, "It arrived damaged")
        _turn(index, "cust-B", "t9", "r9", LISBON, REFUND)
        assert _found(index, "cust-A", QUESTION) != []  # cached now
        gone = MemoryStore(store).forget("cust-A")
        assert gone.indexed_messages == 4 and gone.as_dict()["indexed_messages"] == 4
        assert _found(index, "cust-A", QUESTION) == [] and _found(MessageIndex(store), "cust-A", QUESTION) == []
        assert len(_found(index, "cust-B", QUESTION)) == 2
        assert MemoryStore(store).forget("cust-A").indexed_messages == 0


def test_a_vector_of_another_size_is_refused(tmp_path: Path) -> None:
    with open_store(tmp_path / "teamrun.db") as store:
        index = MessageIndex(store)
        _turn(index, "cust-A", "t1", "r1", LISBON, REFUND)
        with pytest.raises(MemoryRefused, match="has 15 dimensions but the memories of 'cust-A' have 256"):
            index.add("cust-A", "t2", "r2", [IndexedMessage("user", "hello", [0.5] * 15)], at=NOW)


def test_a_version_5_store_is_upgraded_to_index_messages(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    with open_store(path) as store, store.engine.begin() as conn:  # made a version 5 store by hand
        conn.execute(sa.text("DROP TABLE memory_messages_fts"))
        conn.execute(sa.text("DROP TABLE memory_messages"))
        conn.execute(sa.text("DELETE FROM schema_version WHERE version > 5"))
    with open_store(path) as store, store.engine.connect() as conn:
        assert migrations_module.current_version(conn) == migrations_module.latest_version()
        index = MessageIndex(store)
        _turn(index, "cust-A", "t1", "r1", LISBON, REFUND)
        assert _found(index, "cust-A", "Lisbon", exclude="t2") != []
