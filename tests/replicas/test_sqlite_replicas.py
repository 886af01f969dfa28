"""Issue 46.1 on one machine: two replicas (``--lease``) on one SQLite file, where no ``NOTIFY`` exists.

A run started on one replica is found at once on the other, a cancel sent to the other reaches it (through its
lease, applied by its heartbeat), and a run that cannot start (a thread of another team) is recorded failed,
not left ``running``.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

import teamrun
from teamrun.serve.app import ServeSettings
from teamrun.store import open_store
from tests.serve.conftest import GatedModel, RunningServer, solo_team, until_status
from tests.waiting import wait_until


@pytest.fixture
def replicas(tmp_path: Path) -> Iterator[tuple[str, str, GatedModel]]:
    """Two servers with leases on one SQLite store, one gated model; their URLs."""
    store = open_store(tmp_path / "runs.db")
    model = GatedModel()
    files = [solo_team(tmp_path), solo_team(tmp_path, name="other")]
    settings = ServeSettings(store=store, lease_s=2)
    servers = [
        RunningServer([teamrun.load_team(path, chat_model=model, store=store) for path in files], settings)
        for _ in range(2)
    ]
    for server in servers:
        server.start()
    try:
        yield servers[0].url, servers[1].url, model
    finally:
        model.gate.set()
        for server in servers:
            server.stop()
        store.close()


def test_a_run_started_on_one_replica_is_found_and_cancelled_on_the_other(
    replicas: tuple[str, str, GatedModel],
) -> None:
    one, other, model = replicas
    with httpx.Client(base_url=one, timeout=60) as first, httpx.Client(base_url=other, timeout=60) as second:
        run_id = first.post("/v1/runs", json={"team": "solo", "input": "wait"}).json()["id"]
        found = second.get(f"/v1/runs/{run_id}")  # at once: the run has its record as POST answers
        assert found.status_code == 200 and found.json()["status"] == "running", found.text
        wait_until(lambda: model.waiting == 1, "the model call in flight")
        cancelled = second.post(f"/v1/runs/{run_id}/cancel")
        assert cancelled.status_code == 202, cancelled.text
        assert cancelled.json()["cancel_reason"] == "cancelled by request"
        record = until_status(first, run_id, "cancelled")
        assert record["cancel_reason"] == "cancelled by request"
        shown = until_status(second, run_id, "cancelled")
        assert shown["source"] == "store"
        assert shown["cancel_reason"] == "cancelled by request"  # the owner's words, from the store


def test_a_run_cancelled_where_it_runs_says_why_on_every_replica(replicas: tuple[str, str, GatedModel]) -> None:
    one, other, model = replicas
    with httpx.Client(base_url=one, timeout=60) as first, httpx.Client(base_url=other, timeout=60) as second:
        run_id = first.post("/v1/runs", json={"team": "solo", "input": "wait"}).json()["id"]
        wait_until(lambda: model.waiting == 1, "the model call in flight")
        assert first.post(f"/v1/runs/{run_id}/cancel").status_code == 202
        assert until_status(first, run_id, "cancelled")["cancel_reason"] == "cancelled by request"
        wait_until(
            lambda: second.get(f"/v1/runs/{run_id}").json()["cancel_reason"], "the reason said by the other replica"
        )
        assert second.get(f"/v1/runs/{run_id}").json()["cancel_reason"] == "cancelled by request"


def test_a_replica_whose_run_was_taken_over_answers_for_it_from_the_store(tmp_path: Path) -> None:
    from teamrun.errors import StoreError

    stores = [open_store(tmp_path / "runs.db") for _ in range(2)]  # each its own: a replica's fences are its own
    model = GatedModel()
    path = solo_team(tmp_path)
    stale, taker = (
        RunningServer([teamrun.load_team(path, chat_model=model, store=store)], ServeSettings(store=store, lease_s=2))
        for store in stores
    )
    stale.start()
    try:
        with httpx.Client(base_url=stale.url, timeout=60) as first:
            run_id = first.post("/v1/runs", json={"team": "solo", "input": "wait"}).json()["id"]
            wait_until(lambda: model.waiting == 1, "the model call in flight")
            replica = stale.app.state.serve.replica

            def cut_off(*args: object, **kwargs: object) -> dict[str, object]:
                raise StoreError("the store does not answer (a partition)")

            replica.leases.renew = cut_off  # its heartbeat no longer reaches the store: its lease expires
            taker.start()
            wait_until(lambda: model.waiting == 2, "the run taken over by the other replica")
            assert run_id in replica.held  # it has not noticed yet
            shown = first.get(f"/v1/runs/{run_id}").json()
            assert shown["status"] == "running" and shown["source"] == "store", shown  # the store's, not its own
            asked = first.post(f"/v1/runs/{run_id}/cancel")
            assert asked.status_code == 202, asked.text  # it reaches the replica running it
            record = until_status(first, run_id, "cancelled")
            assert record["cancel_reason"] == "cancelled by request", record
    finally:
        model.gate.set()
        stale.stop()
        taker.stop()
        for store in stores:
            store.close()


def test_a_run_that_cannot_start_is_recorded_failed_for_every_replica(
    replicas: tuple[str, str, GatedModel],
) -> None:
    one, other, model = replicas
    model.gate.set()
    with httpx.Client(base_url=one, timeout=60) as first, httpx.Client(base_url=other, timeout=60) as second:
        turn = first.post("/v1/runs", json={"team": "solo", "input": "first turn", "thread": "t-1"}).json()["id"]
        until_status(first, turn, "done")
        refused = first.post("/v1/runs", json={"team": "other", "input": "x", "thread": "t-1"})  # solo's thread
        assert refused.status_code == 201, refused.text
        run_id = refused.json()["id"]
        assert "belongs to team 'solo'" in until_status(first, run_id, "failed")["error"]
        shown = until_status(second, run_id, "failed")  # not left running in the store
        assert "belongs to team 'solo'" in shown["error"]


def test_a2a_cancels_and_follows_a_task_another_replica_runs(tmp_path: Path) -> None:
    import asyncio

    from a2a.types import CancelTaskRequest, SubscribeToTaskRequest

    from tests.a2a.served_agents import TOKEN, agent, collect, message, state_name
    from tests.waiting import wait_until_async

    store = open_store(tmp_path / "runs.db")
    gated = GatedModel()
    settings = ServeSettings(store=store, lease_s=2, tokens=frozenset({TOKEN}))
    path = solo_team(tmp_path)
    here, there = (
        RunningServer([teamrun.load_team(path, chat_model=gated, store=store)], settings).start() for _ in range(2)
    )

    async def scenario() -> None:
        async with agent(here.url, "solo", streaming=False, polling=True) as client:
            [followed] = await collect(client, message("follow me"))
            [cancelled] = await collect(client, message("cancel me"))
        await wait_until_async(lambda: gated.waiting == 2, "both runs at their model call, on one replica")
        async with agent(there.url, "solo") as other:
            stream = other.subscribe(SubscribeToTaskRequest(id=followed.task.id))
            first = await anext(stream)
            assert state_name(first.task.status.state) == "WORKING"
            told = await other.cancel_task(CancelTaskRequest(id=cancelled.task.id))
            assert told.id == cancelled.task.id
            assert state_name(told.status.state) == "CANCELED", told.status  # the owner applied it, then answered
            assert "cancelled by request (A2A CancelTask)" in told.status.message.parts[0].text
            await wait_until_async(lambda: gated.waiting == 1, "the cancel applied where the task runs")
            gated.gate.set()
            events = [event async for event in stream]
        assert state_name(events[-1].status_update.status.state) == "COMPLETED", events[-1]

    try:
        asyncio.run(scenario())
    finally:
        gated.gate.set()
        here.stop()
        there.stop()
        store.close()
