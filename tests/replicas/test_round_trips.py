"""The store round trips a run's lease adds (issue 46's CPU target): a new run takes its lease in its opening record
write (none of its own: what one server pays), a continued run takes its lease and keeps its record in one
transaction of two statements, and a fenced write checks its lease in the statement that reads what the write needs
first (the journal's last seq, the record's meta), not in a round trip of its own."""

from __future__ import annotations

import types
from collections.abc import Iterator
from contextlib import contextmanager

import sqlalchemy as sa

from teamrun.serve.replicas import Replica
from teamrun.serve.runs import RunRegistry
from teamrun.store import Store, open_store
from teamrun.store.journal import StoreJournal
from teamrun.store.leases import Fence, StaleLease
from teamrun.store.records import EntryKey, JournaledRun, JournalEntry


@contextmanager
def counted(store: Store) -> Iterator[dict[str, int]]:
    """The statements and transactions (commits) ``store``'s engine runs meanwhile."""
    seen = {"statements": 0, "commits": 0}

    def statement(*_: object) -> None:
        seen["statements"] += 1

    def commit(*_: object) -> None:
        seen["commits"] += 1

    sa.event.listen(store.engine, "before_cursor_execute", statement)
    sa.event.listen(store.engine, "commit", commit)
    try:
        yield seen
    finally:
        sa.event.remove(store.engine, "before_cursor_execute", statement)
        sa.event.remove(store.engine, "commit", commit)


def test_a_new_run_takes_its_lease_and_record_in_one_transaction(store_url: str) -> None:
    store = open_store(store_url)
    replica = Replica(RunRegistry(store=store), {}, store, lease_s=60, owner="a")
    handle = types.SimpleNamespace(team="t", input="go", thread=None)
    try:
        with counted(store) as seen:
            assert replica._acquire("r1", handle) == 1  # type: ignore[arg-type]
        assert seen == {"statements": 2, "commits": 1}
        record = store.runs.get("r1")
        assert record is not None and (record.status, record.input) == ("running", "go")

        store.runs.finish("r1", status="waiting", final_output=None, usage={}, cost=0.0)
        store.leases.release("r1", "a", 1, "waiting")
        assert replica._acquire("r1", handle) == 2  # type: ignore[arg-type]  # continued: the next generation
        lease = store.leases.get("r1")
        assert lease is not None and (lease.owner, lease.released) == ("a", None)
        assert store.runs.get("r1").status == "waiting"  # type: ignore[union-attr]  # its record kept as it was
    finally:
        replica.leases.engine.dispose()
        store.close()


def test_a_fenced_write_checks_its_lease_without_a_round_trip_of_its_own(store_url: str) -> None:
    store = open_store(store_url)
    backend = StoreJournal(store)
    entry = JournalEntry(EntryKey("lead", 1, "model", 0), "h", {"text": "reply"})
    run = JournaledRun(run_id="r2", team="t", team_file="t.yaml", input="go")
    try:
        store.runs.start("r2", "t", "go")
        store.leases.acquire("r2", "a", 60)
        store.fences.set("r2", Fence("a", 1))
        with counted(store) as seen:
            backend.save_run(run)  # checked and read its meta: one statement; updated: another
            backend.append("r2", [entry])  # checked and read the last seq: one; inserted: another
        assert seen == {"statements": 4, "commits": 2}
        assert [e.key.index for e in backend.load("r2")] == [1]

        store.fences.set("r2", Fence("a", 0))  # a stale generation: both refused, nothing written
        try:
            backend.append("r2", [entry])
        except StaleLease:
            pass
        else:
            raise AssertionError("a stale owner's journal write was taken")
        assert [e.key.index for e in backend.load("r2")] == [1]
    finally:
        backend.release()
        store.close()


def test_a_runs_last_record_write_releases_its_lease_in_the_same_statement(store_url: str) -> None:
    """The outcome's write checks the lease and releases it (one statement, then the record's update); the owner
    does not release it again, and its heartbeat does not take the deleted lease for one another replica took.
    A stale owner's last write is refused and leaves the new holder's lease as it is."""
    import asyncio

    store = open_store(store_url)
    registry = RunRegistry(store=store)
    replica = Replica(registry, {}, store, lease_s=60, owner="a")
    cancelled: list[str] = []
    registry.cancel = lambda run_id, reason="": cancelled.append(run_id)  # type: ignore[assignment,method-assign,return-value]
    backend = StoreJournal(store)
    try:
        store.runs.start("r3", "t", "go")
        replica.held["r3"] = store.leases.acquire("r3", "a", 60)
        store.fences.set("r3", Fence("a", 1))
        with counted(store) as seen:
            backend.save_run(JournaledRun(run_id="r3", team="t", team_file="t.yaml", input="go", status="done"))
        assert seen == {"statements": 2, "commits": 1}
        assert store.leases.get("r3") is None  # the run is over: its lease row went with that statement
        assert store.runs.get("r3").status == "done"  # type: ignore[union-attr]

        asyncio.run(replica.renew())  # before the run's turn is over here: its lease is gone, not taken
        asyncio.run(replica.confirm_owner("r3"))
        assert cancelled == [] and replica.held == {"r3": 1}
        with counted(store) as seen:
            asyncio.run(replica._release("r3", 1, "over"))
        assert seen["statements"] == 0  # released already

        store.runs.start("r5", "t", "go")  # cancelled here: the same two statements, the reason in the record
        store.fences.set("r5", Fence("a", store.leases.acquire("r5", "a", 60)))
        store.fences.cancelled("r5", "stop it")
        with counted(store) as seen:
            backend.save_run(JournaledRun(run_id="r5", team="t", team_file="t.yaml", input="go", status="cancelled"))
        assert seen == {"statements": 2, "commits": 1}
        assert store.leases.get("r5") is None
        assert backend.get_run("r5").cancel_reason == "stop it"  # type: ignore[union-attr]

        store.runs.start("r4", "t", "go")
        store.leases.acquire("r4", "a", 60)
        store.leases.acquire("r4", "b", 60)  # taken: a is stale
        store.fences.set("r4", Fence("a", 1))
        try:
            backend.save_run(JournaledRun(run_id="r4", team="t", team_file="t.yaml", input="go", status="done"))
        except StaleLease as exc:
            assert exc.holder is not None and exc.holder.owner == "b"
        else:
            raise AssertionError("a stale owner's outcome was written")
        lease = store.leases.get("r4")
        assert lease is not None and (lease.owner, lease.generation, lease.released) == ("b", 2, None)
        assert store.runs.get("r4").status == "running"  # type: ignore[union-attr]
    finally:
        replica.leases.engine.dispose()
        store.close()


def test_a_replica_that_holds_no_lease_renews_nothing(store_url: str) -> None:
    """An idle replica's heartbeat costs the store no statement; one that holds a run renews it in one."""
    import asyncio

    store = open_store(store_url)
    replica = Replica(RunRegistry(store=store), {}, store, lease_s=60, owner="a")
    try:
        with counted(types.SimpleNamespace(engine=replica.leases.engine)) as seen:  # type: ignore[arg-type]
            asyncio.run(replica.renew())
        assert seen == {"statements": 0, "commits": 0}
        store.runs.start("r6", "t", "go")
        replica.held["r6"] = store.leases.acquire("r6", "a", 60)
        with counted(types.SimpleNamespace(engine=replica.leases.engine)) as seen:  # type: ignore[arg-type]
            asyncio.run(replica.renew())
        assert seen == {"statements": 1, "commits": 1}  # the renewal, reading back what it holds
        assert replica.held == {"r6": 1}
    finally:
        replica.leases.engine.dispose()
        store.close()


def test_a_new_served_run_takes_its_lease_in_its_opening_record_write(store_url: str) -> None:
    """``--lease`` costs a new run no transaction of its own: the opening record write's fencing statement is the
    lease's upsert (reading the record's meta), so the run's start costs what it costs one server (two statements,
    one commit); its record and lease are in the store before the request is answered (``owned``)."""
    import asyncio

    from teamrun.secrets import Redactor
    from teamrun.serve.runs import RunHandle

    store = open_store(store_url)
    registry = RunRegistry(store=store)
    replica = Replica(registry, {}, store, lease_s=60, owner="a")
    backend = StoreJournal(store)

    async def start(run_id: str, *, leased: bool) -> dict[str, int]:
        handle = RunHandle(id=run_id, team="t", input="go", redactor=Redactor(include_env=False), attempt=1)
        registry._runs[run_id] = handle
        with counted(store) as seen:
            if leased:
                await replica.own(run_id)
            await asyncio.to_thread(backend.save_run, JournaledRun(run_id=run_id, team="t", team_file="t", input="go"))
        if leased:
            await handle.owned.wait()  # told from the writing thread
        return seen

    try:
        alone = asyncio.run(start("r8", leased=False))
        leased = asyncio.run(start("r7", leased=True))
        assert leased == alone == {"statements": 2, "commits": 1}
        lease = store.leases.get("r7")
        assert lease is not None and (lease.owner, lease.generation, lease.released) == ("a", 1, None)
        assert store.fences.get("r7") == Fence("a", 1) and replica.held == {"r7": 1}
        assert store.runs.get("r7").status == "running"  # type: ignore[union-attr]
        assert store.leases.get("r8") is None
    finally:
        backend.release()
        replica.leases.engine.dispose()
        store.close()
