"""Attack a46b item 6: a cancel sent to one replica for a run another replica runs is left in the store for that
replica, which applies it on its heartbeat. A run that ended otherwise before that (its last step done) is
answered ``409 run_not_running`` saying how it ended, not ``202`` "running" for a cancel that never took effect.

Two replicas (``--lease``) on one SQLite file, in process: the owner's heartbeat is kept from applying the cancel
(as a cancel landing just after the run's last step is), the run's model call is let go once the cancel is left
in the store, the run ends ``done``.
"""

from __future__ import annotations

import threading
from pathlib import Path

import httpx
import pytest

import teamrun
import teamrun.serve.routes.runs as runs_routes
from teamrun.serve.app import ServeSettings
from teamrun.store import open_store
from tests.serve.conftest import GatedModel, RunningServer, solo_team, until_status
from tests.waiting import wait_until

pytestmark = pytest.mark.inprocess


def test_a_cancel_forwarded_to_a_run_that_ends_done_first_is_answered_409(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(runs_routes, "FORWARDED_POLLS", 10_000)  # the answer waits for the run's end, however slow
    store = open_store(tmp_path / "runs.db")
    model = GatedModel()
    settings = ServeSettings(store=store, lease_s=2)
    servers = [
        RunningServer([teamrun.load_team(solo_team(tmp_path), chat_model=model, store=store)], settings)
        for _ in range(2)
    ]
    for server in servers:
        server.start()
    try:
        owner = servers[0].app.state.serve
        with (
            httpx.Client(base_url=servers[0].url, timeout=120) as first,
            httpx.Client(base_url=servers[1].url, timeout=120) as second,
        ):
            run_id = first.post("/v1/runs", json={"team": "solo", "input": "wait"}).json()["id"]
            wait_until(lambda: model.waiting == 1, "the model call in flight")
            monkeypatch.setattr(owner.registry, "cancel", lambda *_, **__: None)  # the cancel comes too late there
            answered: list[httpx.Response] = []
            asking = threading.Thread(target=lambda: answered.append(second.post(f"/v1/runs/{run_id}/cancel")))
            asking.start()
            wait_until(lambda: store.leases.cancel_reason(run_id), "the cancel left in the store for the owner")
            model.gate.set()  # the run's last step is done
            asking.join(120)
            record = until_status(first, run_id, "done")
            assert answered[0].status_code == 409, answered[0].text
            assert answered[0].json()["error"]["code"] == "run_not_running"
            assert "ended (done) before the cancel reached" in answered[0].json()["error"]["message"]
            assert record["cancel_reason"] is None
            assert second.get(f"/v1/runs/{run_id}").json()["cancel_reason"] is None
    finally:
        model.gate.set()
        for server in servers:
            server.stop()
        store.close()
