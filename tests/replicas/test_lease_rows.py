"""Issue 46: ``run_leases`` holds the leases of live runs only. A served run that ends (done, failed, cancelled)
leaves no lease row (its outcome's write deletes it, in the fencing statement), its cancel's reason stays in its
record; the takeover pass sweeps the rows of runs that ended otherwise (a waiting run cancelled in the store), and
the heartbeat's queries read live leases only, through an index of their own (never a scan of ``runs``)."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import httpx
import sqlalchemy as sa

import teamrun
from teamrun.errors import ModelError
from teamrun.llm.types import Message, ModelReply, ModelSettings, ToolSchema
from teamrun.serve.app import ServeSettings
from teamrun.serve.replicas import Replica
from teamrun.serve.runs import RunRegistry
from teamrun.store import open_store
from teamrun.store.journal import StoreJournal
from teamrun.store.leases import Fence
from teamrun.store.pending import PendingRepository
from teamrun.store.records import JournaledRun
from tests.clock import Clock
from tests.serve.conftest import GatedModel, RunningServer, solo_team, until_status
from tests.waiting import wait_until


class BrokenModel:
    """Every call fails as a provider's 500 would."""

    async def complete(
        self,
        messages: Sequence[Message],
        *,
        settings: ModelSettings,
        tools: Sequence[ToolSchema] = (),
        response_format: Mapping[str, Any] | None = None,
    ) -> ModelReply:
        raise ModelError("the provider broke (HTTP 500)")


def test_a_served_run_that_ends_leaves_no_lease_row_and_its_cancel_reason_in_its_record(
    store_url: str, tmp_path: Path
) -> None:
    store = open_store(store_url)
    model = GatedModel()
    teams = [
        teamrun.load_team(solo_team(tmp_path), chat_model=model, store=store),
        teamrun.load_team(solo_team(tmp_path, name="broken"), chat_model=BrokenModel(), store=store),
    ]
    server = RunningServer(teams, ServeSettings(store=store, lease_s=2)).start()
    try:
        with httpx.Client(base_url=server.url, timeout=60) as client:
            cancelled = client.post("/v1/runs", json={"team": "solo", "input": "wait"}).json()["id"]
            wait_until(lambda: model.waiting == 1, "the model call in flight")
            assert store.leases.get(cancelled) is not None  # held while it runs
            assert client.post(f"/v1/runs/{cancelled}/cancel").status_code == 202
            until_status(client, cancelled, "cancelled")
            failed = client.post("/v1/runs", json={"team": "broken", "input": "go"}).json()["id"]
            until_status(client, failed, "failed")
            model.gate.set()
            done = client.post("/v1/runs", json={"team": "solo", "input": "go"}).json()["id"]
            until_status(client, done, "done")
        for run_id in (cancelled, failed, done):
            assert store.leases.get(run_id) is None, run_id
        with store.engine.connect() as conn:
            assert conn.execute(sa.select(sa.func.count()).select_from(sa.table("run_leases"))).scalar() == 0
        record = StoreJournal(store).get_run(cancelled)
        assert record is not None and (record.status, record.cancel_reason) == ("cancelled", "cancelled by request")
        assert StoreJournal(store).get_run(done).cancel_reason is None  # type: ignore[union-attr]
    finally:
        model.gate.set()
        server.stop()
        store.close()


def test_the_takeover_pass_sweeps_the_lease_rows_of_ended_runs_once_a_minute(store_url: str) -> None:
    store = open_store(store_url)
    clock = Clock()
    store.leases.clock = clock
    replica = Replica(RunRegistry(store=store), {}, store, lease_s=60, owner="a")
    backend = StoreJournal(store)
    try:
        for run_id in ("cancelled-waiting", "waiting"):  # each suspended on replica a: its lease released, kept
            store.runs.start(run_id, "t", "go")
            store.fences.set(run_id, Fence("a", store.leases.acquire(run_id, "a", 60)))
            backend.save_run(JournaledRun(run_id=run_id, team="t", team_file="t.yaml", input="go", status="waiting"))
            lease = store.leases.get(run_id)
            assert lease is not None and lease.released == "waiting"
        assert PendingRepository(store).cancel_waiting("cancelled-waiting", reason="cancelled by request") == []
        store.runs.start("running", "t", "go")
        store.leases.acquire("running", "b", 60)
        store.leases.acquire("no-run", "b", 60)  # its run's record went (or never came)
        store.leases.release("no-run", "b", 1, "over")

        asyncio.run(replica.take_over())
        assert store.leases.get("cancelled-waiting") is None and store.leases.get("no-run") is None
        assert store.leases.get("waiting") is not None  # its generation rises when an answer continues it
        assert store.leases.get("running") is not None

        store.runs.finish("running", status="done", final_output="x", usage={}, cost=0.0)  # by another process
        clock.now += 30
        asyncio.run(replica.take_over())
        assert store.leases.get("running") is not None  # not a minute since the last sweep
        clock.now += 31
        asyncio.run(replica.take_over())
        assert store.leases.get("running") is None
        assert store.leases.get("waiting") is not None
    finally:
        backend.release()
        replica.leases.engine.dispose()
        store.close()


def test_the_heartbeat_reads_live_leases_through_their_own_index_never_scanning_runs(tmp_path: Path) -> None:
    """SQLite's plan of the takeover's query (run every beat) and the renewal: the live leases' index, each run's
    record by its key; never a scan of ``runs`` or of every lease ever held."""
    store = open_store(tmp_path / "runs.db")
    seen: list[tuple[str, Any]] = []

    def statement(_conn: Any, _cursor: Any, text: str, parameters: Any, *_: Any) -> None:
        seen.append((text, parameters))

    try:
        for n in range(200):  # the running runs of ten replicas, half of them waiting (their leases released)
            store.runs.start(f"r{n}", "t", "go")
            store.leases.acquire(f"r{n}", f"replica-{n % 10}", 60)
            if n % 2:
                store.leases.release(f"r{n}", f"replica-{n % 10}", 1, "waiting")
        sa.event.listen(store.engine, "before_cursor_execute", statement)
        store.leases.takeable()
        store.leases.renew("replica-2", 60)
        sa.event.remove(store.engine, "before_cursor_execute", statement)
        with store.engine.connect() as conn:
            conn.exec_driver_sql("ANALYZE")
            plans = []
            for text, parameters in seen:
                if not text.lstrip().upper().startswith(("SELECT", "UPDATE")):
                    continue
                rows = conn.exec_driver_sql(f"EXPLAIN QUERY PLAN {text}", parameters).all()
                plans.append(" / ".join(str(row[-1]) for row in rows))
        assert len(plans) == 2, plans  # takeable; the renewal (an update that reads back what it holds)
        for plan in plans:
            assert "SCAN runs" not in plan and "SCAN run_leases" not in plan, plan
            assert "ix_run_leases_live" in plan or "ix_run_leases_held" in plan, plan
    finally:
        store.close()
