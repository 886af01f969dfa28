"""Issue 46 (the CPU per served call): a replica saves a running run's events in the store on every heartbeat only
while somebody follows the run; a run nobody follows has them saved every ``KEEP_UNFOLLOWED_S`` (what a crash loses
of its timeline), and at its end as before.

Followed: an SSE stream of the run is open on the replica that runs it (its client reconnects elsewhere after a
crash and reads on from the store), or another replica streams it from the store (that replica marks the run's
lease watched, ``watched_until``, which the owner's renewal reads back with no statement of its own).
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import httpx
import pytest
import sqlalchemy as sa

from teamrun.secrets import Redactor
from teamrun.serve import replicas as replicas_module
from teamrun.serve.replicas import Replica
from teamrun.serve.runs import RunHandle, RunRegistry
from teamrun.store import Store, open_store
from teamrun.store.schema import run_leases
from tests.clock import Clock
from tests.replicas.cluster import Follower, events_of
from tests.replicas.test_continuations import _replica, stores
from tests.serve.conftest import GatedModel, solo_team, until_status
from tests.waiting import wait_until

__all__ = ["stores"]


class Keeper:
    """Counts the saves the heartbeat asks for."""

    def __init__(self) -> None:
        self.saved: list[int] = []

    def run_over(self, handle: RunHandle) -> None:
        self.saved.append(handle.event_count)


def test_the_heartbeat_saves_a_runs_events_every_beat_only_while_it_is_followed(tmp_path: Path) -> None:
    store = open_store(f"sqlite:///{tmp_path / 'store.db'}")
    keeper = Keeper()
    registry = RunRegistry(store=store)
    replica = Replica(registry, {}, store, lease_s=60, keeper=keeper, owner="a")  # type: ignore[arg-type]
    clock = replica.leases.clock = Clock()
    handle = RunHandle(id="r1", team="t", input="go", redactor=Redactor(include_env=False))
    registry._runs[handle.id] = handle
    store.runs.start("r1", "t", "go")
    replica.held["r1"] = store.leases.acquire("r1", "a", 60)

    def beat(after_s: float, *, event: bool = True) -> list[int]:
        if event:
            handle._lines.append({"kind": "tool_start", "run_id": "r1", "ts": 0.0, "data": {}})
        clock.now += after_s
        asyncio.run(replica.renew())
        return keeper.saved

    try:
        assert beat(0) == []  # first seen: a run that ends before the next beat is kept once, as it ends
        assert beat(1) == []  # nobody follows it: not on every beat
        assert beat(4.5) == [3]  # but every KEEP_UNFOLLOWED_S (5 s since the heartbeat first saw it)
        assert beat(1) == [3]
        store.leases.watch("r1", clock.now + 3.5)  # another replica streams it from the store
        assert beat(1) == [3, 5]
        assert beat(1, event=False) == [3, 5]  # nothing new: nothing to save
        assert beat(1) == [3, 5, 6]
        assert beat(2) == [3, 5, 6]  # the mark ran out (that replica stopped streaming), 2 s since the last save
        handle.followers = 1  # a stream here
        assert beat(0.5) == [3, 5, 6, 8]
        handle.followers = 0
        assert beat(1) == [3, 5, 6, 8]
    finally:
        replica.leases.engine.dispose()
        store.close()


def test_a_replica_streaming_a_run_another_runs_marks_it_watched_and_reads_it_live(
    tmp_path: Path, stores: list[Store], monkeypatch: pytest.MonkeyPatch
) -> None:
    """With a run nobody follows never saved mid-run, a client streaming it from B still reads its events while it
    runs on A: B marks its lease watched, and A saves them on its next beats."""
    monkeypatch.setattr(replicas_module, "KEEP_UNFOLLOWED_S", 1e9)
    model = GatedModel()
    path = solo_team(tmp_path)
    a, b = (_replica(path, model, store) for store in stores[:2])
    a.start()
    b.start()
    try:
        with httpx.Client(base_url=a.url, timeout=60) as client:
            run_id = client.post("/v1/runs", json={"team": "solo", "input": "wait"}).json()["id"]
        wait_until(lambda: model.waiting == 1, "the model call in flight on A")

        follower = Follower(b.url, run_id)
        wait_until(lambda: "agent_start" in follower.text, "B's client reading the run's events while A runs it")
        with stores[0].engine.connect() as conn:
            watched = conn.execute(sa.select(run_leases.c.watched_until).where(run_leases.c.run_id == run_id))
            assert watched.scalar() is not None
        model.gate.set()
        with httpx.Client(base_url=b.url, timeout=60) as client:
            until_status(client, run_id, "done")
        follower.join(60)
    finally:
        model.gate.set()
        a.stop()
        b.stop()
    followed = events_of(follower.text)
    assert not follower.is_alive()
    assert [index for index, _, _ in followed[:-1]] == list(range(len(followed) - 1))  # each event once
    assert followed[-2][1] == "run_end" and followed[-1][1] == "result" and followed[-1][2]["status"] == "done"
