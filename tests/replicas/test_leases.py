"""Run leases in the store (issue 46): taken, renewed, expired, taken over once, and a stale owner's writes fenced."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from teamrun.store import open_store
from teamrun.store.journal import StoreJournal
from teamrun.store.leases import HANDOVER, Fence, LeaseRepository, StaleLease
from teamrun.store.records import EntryKey, JournaledRun, JournalEntry
from tests.clock import Clock


def _entry(index: int) -> JournalEntry:
    return JournalEntry(EntryKey("lead", index, "model", 0), "h", {"text": f"reply {index}"})


def test_an_expired_lease_is_taken_once_and_the_old_owner_is_fenced(store_url: str) -> None:
    store = open_store(store_url)
    clock = Clock()
    leases = LeaseRepository(store.engine, clock=clock)
    backend = StoreJournal(store)
    backend.save_run(JournaledRun(run_id="r1", team="t", team_file="t.yaml", input="go"))
    assert leases.acquire("r1", "a", ttl_s=10) == 1
    store.fences.set("r1", Fence("a", 1))
    backend.append("r1", [_entry(1)])  # its own lease: written

    clock.now += 5
    assert set(leases.renew("a", ttl_s=10)) == {"r1"}
    assert leases.takeable() == []  # renewed: nobody may take it
    clock.now += 11  # a stopped renewing (killed, paused)
    (expired,) = leases.takeable()
    assert (expired.owner, expired.generation) == ("a", 1)
    assert leases.take(expired, "b", ttl_s=10) == 2
    assert leases.take(expired, "c", ttl_s=10) is None  # taken once: the second replica finds it changed
    assert leases.renew("a", ttl_s=10) == {}  # a's heartbeat finds it holds nothing

    refused: list[StaleLease] = []
    store.fences.on_refused.append(refused.append)
    with pytest.raises(StaleLease, match=r"replica a no longer owns it .*generation 1.*replica b holds it"):
        backend.append("r1", [_entry(2)])
    with pytest.raises(StaleLease):  # its record too
        backend.save_run(JournaledRun(run_id="r1", team="t", team_file="t.yaml", input="go", status="failed"))
    assert len(refused) == 1  # said once
    assert [e.key.index for e in backend.load("r1")] == [1]
    assert backend.get_run("r1").status == "running"  # type: ignore[union-attr]

    other = StoreJournal(store)  # b writes under its own generation
    store.fences.set("r1", Fence("b", 2))
    other.append("r1", [_entry(2)])
    assert [e.key.index for e in other.load("r1")] == [1, 2]
    store.close()


def test_a_handed_over_lease_is_taken_at_once_and_a_cancel_waits_on_the_lease(store_url: str) -> None:
    store = open_store(store_url)
    clock = Clock()
    leases = LeaseRepository(store.engine, clock=clock)
    StoreJournal(store).save_run(JournaledRun(run_id="r2", team="t", team_file="t.yaml", input="go"))
    generation = leases.acquire("r2", "a", ttl_s=60)
    assert leases.request_cancel("r2", "stop it")
    assert leases.renew("a", ttl_s=60)["r2"].cancel_reason == "stop it"
    assert leases.release("r2", "a", generation, HANDOVER)
    (free,) = leases.takeable()  # long before its expiry
    assert leases.take(free, "b", ttl_s=60) == generation + 1
    assert not leases.request_cancel("missing", "x")
    assert leases.release("r2", "b", generation + 1, "over")
    assert leases.takeable() == []  # released for good
    store.close()


def test_a_cancel_left_on_a_lease_is_notified_to_listeners_on_postgresql(postgres_server: str) -> None:
    import threading

    from tests.pgserver import new_database
    from tests.waiting import wait_until

    store = open_store(new_database(postgres_server))
    StoreJournal(store).save_run(JournaledRun(run_id="r3", team="t", team_file="t.yaml", input="go"))
    store.leases.acquire("r3", "a", ttl_s=60)
    heard: list[tuple[str, str]] = []
    stop = threading.Event()
    listener = threading.Thread(target=store.leases.listen, args=(lambda *said: heard.append(said), stop))
    listener.start()
    try:
        wait_until(lambda: store.leases.request_cancel("r3", "stop it") and heard, "the cancel heard", pause_s=0.2)
    finally:
        stop.set()
        listener.join(timeout=30)
    assert set(heard) == {("r3", "stop it")}
    store.close()


def test_a_run_taken_while_the_heartbeat_renews_is_not_mistaken_for_a_lost_one(tmp_path: Path) -> None:
    import asyncio

    from teamrun.serve.replicas import Replica
    from teamrun.serve.runs import RunRegistry

    store = open_store(tmp_path / "runs.db")
    registry = RunRegistry(store=store)
    replica = Replica(registry, {}, store, lease_s=60, owner="a")
    cancelled: list[str] = []
    registry.cancel = lambda run_id, reason="": cancelled.append(run_id)  # type: ignore[assignment,method-assign,return-value]
    renew = replica.leases.renew

    def renew_while_a_run_starts(owner: str, ttl_s: float) -> dict[str, Any]:
        held = renew(owner, ttl_s)
        replica.held["new"] = store.leases.acquire("new", "a", ttl_s)  # its own() ended after the renewal read
        return held

    replica.leases.renew = renew_while_a_run_starts  # type: ignore[method-assign]
    replica.held["old"] = store.leases.acquire("old", "a", 60)  # (a replica that holds nothing renews nothing)
    asyncio.run(replica.tick())
    assert cancelled == [] and replica.held == {"old": 1, "new": 1}
    store.close()


def test_a_run_between_two_replicas_shows_running_not_interrupted(tmp_path: Path) -> None:
    """Its process gone (killed, or it handed the run over and exited), a run whose lease another replica will
    take is ``running`` on every replica, not ``interrupted``; one whose lease was let go for good stays as it is."""
    import asyncio

    from teamrun.serve.replicas import as_replicas_show

    store = open_store(tmp_path / "runs.db")
    StoreJournal(store).save_run(JournaledRun(run_id="r4", team="t", team_file="t.yaml", input="go"))
    gone = {"id": "r4", "status": "interrupted"}

    def shown() -> str:
        return str(asyncio.run(as_replicas_show(store, gone))["status"])

    assert shown() == "interrupted"  # no lease: an earlier, lone server's run
    generation = store.leases.acquire("r4", "a", ttl_s=60)
    assert shown() == "running"  # held (or expired: another replica takes it)
    assert store.leases.release("r4", "a", generation, HANDOVER)
    assert shown() == "running"  # handed over: another replica takes it at once
    generation = store.leases.acquire("r4", "b", ttl_s=60)
    assert store.leases.release("r4", "b", generation, "over")
    assert shown() == "interrupted"
    assert asyncio.run(as_replicas_show(store, {"id": "r4", "status": "done"}))["status"] == "done"
    store.close()


def test_a_lease_row_a_paused_owner_keeps_locked_is_skipped_and_its_lock_ends_with_the_lease(
    postgres_server: str,
) -> None:
    """A replica paused mid-write holds its lease row locked (the fencing check): the replica taking over skips the
    row instead of waiting (the next beat tries again), and the server ends the paused transaction after the
    lease (``idle_in_transaction_session_timeout``), so the run moves."""
    import concurrent.futures

    import sqlalchemy as sa

    from teamrun.store.schema import run_leases
    from tests.pgserver import new_database

    store = open_store(new_database(postgres_server))
    clock = Clock()
    leases = LeaseRepository(store.engine, clock=clock)
    StoreJournal(store).save_run(JournaledRun(run_id="r5", team="t", team_file="t.yaml", input="go"))
    leases.acquire("r5", "a", ttl_s=10)
    clock.now += 11
    (expired,) = leases.takeable()
    paused = store.engine.connect()  # a's fenced write, stopped mid-transaction
    writing = paused.begin()
    paused.execute(sa.select(run_leases).where(run_leases.c.run_id == "r5").with_for_update())
    pool = concurrent.futures.ThreadPoolExecutor(1)
    try:
        taken = pool.submit(leases.take, expired, "b", 10).result(timeout=120)  # (a hang guard)
    finally:
        writing.rollback()
        paused.close()
        pool.shutdown()
    assert taken is None  # skipped, not waited for
    assert leases.take(expired, "b", ttl_s=10) == 2  # free again: taken

    LeaseRepository.end_idle_transactions(store.engine, 3)
    with store.engine.connect() as conn:
        assert conn.execute(sa.text("SHOW idle_in_transaction_session_timeout")).scalar() == "3s"
    store.close()


def test_a_write_that_fails_for_a_run_whose_lease_went_says_the_lease_went(
    store_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A replica paused mid-write: the database ended its transaction meanwhile and another replica took the run.
    Its write fails, and says why that matters (StaleLease: the run stops here), not as a lost connection after
    which the run would go on unjournaled and pay its calls again."""
    import contextlib
    from collections.abc import Iterator

    import sqlalchemy as sa

    store = open_store(store_url)
    clock = Clock()
    leases = LeaseRepository(store.engine, clock=clock)
    backend = StoreJournal(store)
    backend.save_run(JournaledRun(run_id="r6", team="t", team_file="t.yaml", input="go"))
    leases.acquire("r6", "a", ttl_s=10)
    store.fences.set("r6", Fence("a", 1))
    clock.now += 11
    (expired,) = leases.takeable()
    assert leases.take(expired, "b", ttl_s=10) == 2

    @contextlib.contextmanager
    def ended_by_the_server() -> Iterator[sa.Connection]:
        raise sa.exc.OperationalError("COMMIT", {}, Exception("terminating connection: idle-in-transaction timeout"))
        yield  # (a generator)

    monkeypatch.setattr(backend, "_writer_connection", ended_by_the_server)
    with pytest.raises(StaleLease, match="replica a no longer owns it"):
        backend.append("r6", [_entry(1)])
    store.fences.drop("r6")
    with pytest.raises(sa.exc.OperationalError):  # a run not fenced: the failure as it is
        backend.append("r6", [_entry(1)])
    store.close()
