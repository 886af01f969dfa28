"""Issue 46 (rolling restart): a replica that stops while it is taking a run over hands the run over again.

Replica G stops and hands its run over; replica T's takeover of it is in flight (its compare-and-set on the lease
still on its way to the store) when T stops too, as the next step of a rolling restart. The run must not be
cancelled by T's shutdown, nor wait out a lease T never renews: T hands it over, and the next replica takes it at
once and finishes it.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import httpx

import teamrun
from teamrun.serve.app import ServeSettings
from teamrun.store import open_store
from tests.serve.conftest import GatedModel, RunningServer, solo_team, until_run
from tests.waiting import wait_until


def test_a_run_a_stopping_replica_was_taking_over_is_handed_over_again_not_cancelled(tmp_path: Path) -> None:
    path = solo_team(tmp_path)
    model = GatedModel()
    stores = [open_store(tmp_path / "runs.db") for _ in range(3)]  # each replica its own (its fences are its own)
    giver, stopping, last = (
        RunningServer([teamrun.load_team(path, chat_model=model, store=store)], ServeSettings(store=store, lease_s=2))
        for store in stores
    )
    entered, go = threading.Event(), threading.Event()
    try:
        giver.start()
        stopping.start()
        replica = stopping.app.state.serve.replica
        take = replica.leases.take

        def slow_take(*args: Any, **kwargs: Any) -> int | None:
            entered.set()
            go.wait(timeout=120)  # the store answers late
            return take(*args, **kwargs)

        replica.leases.take = slow_take
        with httpx.Client(base_url=giver.url, timeout=60) as client:
            run_id = client.post("/v1/runs", json={"team": "solo", "input": "wait"}).json()["id"]
        wait_until(lambda: model.waiting == 1, "the model call in flight on the first replica")
        giver.stop()  # hands the run over
        wait_until(entered.is_set, "the second replica taking the run over")
        stopper = threading.Thread(target=stopping.stop)
        stopper.start()  # stops while its takeover is on its way
        wait_until(lambda: replica._handing_over, "the second replica handing its runs over")
        go.set()
        stopper.join(timeout=120)
        model.gate.set()
        last.start()
        with httpx.Client(base_url=last.url, timeout=60) as client:
            record = until_run(client, run_id, lambda shown: shown["status"] != "running", "the run's end")
            events = client.get(f"/v1/runs/{run_id}/events").text
        assert record["status"] == "done", record
        moves = [line for line in events.splitlines() if line.startswith("data: ") and '"run_moved"' in line]
        assert moves and '"why": "handover"' in moves[-1], moves  # taken at once by the last replica
    finally:
        go.set()
        model.gate.set()
        for server in (giver, stopping, last):
            server.stop()
        for store in stores:
            store.close()
