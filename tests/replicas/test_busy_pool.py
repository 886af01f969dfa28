"""Issue 46, defect 1: a replica whose store connections are all busy with request traffic keeps its leases.

Each replica's request traffic (run journals, reads) shares one SQLAlchemy pool. The lease heartbeat takes its
connection from a pool of its own, so a pool held dry does not stop the renewals: the run stays on its replica
(no takeover, nothing paid twice) and ends there. A run that cannot take its lease (the store refuses) is
answered ``503``, never ``201`` for a run nobody can find.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import sqlalchemy as sa

import teamrun
from teamrun.errors import StoreError
from teamrun.serve.app import ServeSettings
from teamrun.store import Store, open_store
from teamrun.store.leases import LeaseRepository
from tests.pgserver import new_database
from tests.serve.conftest import GatedModel, RunningServer, solo_team, until_status
from tests.waiting import wait_until

LEASE_S = 2.0


@pytest.fixture
def two_replicas(tmp_path: Path, postgres_server: str) -> Iterator[tuple[list[Store], list[RunningServer], GatedModel]]:
    """Two replicas on one PostgreSQL database, each with its own store (its own pool), one gated model."""
    url = new_database(postgres_server)
    stores = [open_store(url), open_store(url)]
    model = GatedModel()
    path = solo_team(tmp_path)
    servers = [
        RunningServer(
            [teamrun.load_team(path, chat_model=model, store=store)], ServeSettings(store=store, lease_s=LEASE_S)
        ).start()
        for store in stores
    ]
    try:
        yield stores, servers, model
    finally:
        model.gate.set()
        for server in servers:
            server.stop()
        for store in stores:
            store.close()


def _hold_every_connection(store: Store) -> list[sa.Connection]:
    """Check out what the store's pool has left (its size and overflow): request traffic holding them all."""
    pool = store.engine.pool
    room = pool.size() + pool._max_overflow - pool.checkedout()  # type: ignore[attr-defined]
    return [store.engine.connect() for _ in range(room)]


def test_a_replica_whose_pool_is_held_busy_keeps_its_lease_and_its_run(
    two_replicas: tuple[list[Store], list[RunningServer], GatedModel],
) -> None:
    (store, seen_by_b), (owner, other), model = two_replicas
    with httpx.Client(base_url=owner.url, timeout=60) as client, httpx.Client(base_url=other.url, timeout=60) as b:
        run_id = client.post("/v1/runs", json={"team": "solo", "input": "wait"}).json()["id"]
        wait_until(lambda: model.waiting == 1, "the model call in flight")
        lease = seen_by_b.leases.get(run_id)
        assert lease is not None
        held = _hold_every_connection(store)
        try:
            outlived = time.time() + 3 * LEASE_S  # renewed after the pool was dry for longer than the lease

            def renewed_or_taken() -> bool:
                now = seen_by_b.leases.get(run_id)
                return now is not None and (now.owner != lease.owner or now.expires_at > outlived)

            wait_until(renewed_or_taken, "the owner's lease renewed while its pool is dry (or taken)")
            now = seen_by_b.leases.get(run_id)
            assert now is not None and (now.owner, now.generation) == (lease.owner, lease.generation)
        finally:
            for conn in held:
                conn.close()
        model.gate.set()
        assert until_status(client, run_id, "done")["status"] == "done"
        events = b.get(f"/v1/runs/{run_id}/events").text
        assert "run_moved" not in events  # it never moved


def test_a_run_that_cannot_take_its_lease_is_refused_not_answered_201(
    two_replicas: tuple[list[Store], list[RunningServer], GatedModel], monkeypatch: pytest.MonkeyPatch
) -> None:
    _, (owner, other), model = two_replicas

    def unreachable(*args: object, **kwargs: object) -> int:
        raise StoreError("cannot take the lease in the store: connection timed out")

    monkeypatch.setattr(LeaseRepository, "acquire_in", unreachable)  # a new run's opening write takes its lease
    with httpx.Client(base_url=owner.url, timeout=60) as client, httpx.Client(base_url=other.url, timeout=60) as b:
        answer = client.post("/v1/runs", json={"team": "solo", "input": "lost?"})
        assert answer.status_code == 503, answer.text
        assert answer.json()["error"]["code"] == "store_unavailable"
        assert "lease" in answer.json()["error"]["message"]
        assert b.get("/v1/runs").json()["data"] == []  # nothing said started that nobody finds
    assert model.waiting == 0
