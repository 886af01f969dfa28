"""Attack a46b item 7: what a replica logs says what happened, in plain words.

A beat that came late while the store answered it (the process was paused, SIGSTOP, or starved of CPU) says so,
not that the store did not answer; a store failure keeping a run's events reads "cannot keep"; a run refused
before it started (no lease: no events) logs no failure to keep its events.
"""

from __future__ import annotations

import asyncio
import datetime as _dt
import time
from pathlib import Path

import pytest
from structlog.testing import capture_logs

from teamrun.secrets import Redactor
from teamrun.serve.history import EventKeeper
from teamrun.serve.replicas import Replica
from teamrun.serve.runs import RunHandle, RunRegistry
from teamrun.store import open_store
from teamrun.store.schema import runs

pytestmark = pytest.mark.inprocess


def test_a_late_beat_the_store_answered_blames_the_pause_not_the_store(tmp_path: Path) -> None:
    store = open_store(f"sqlite:///{tmp_path / 'store.db'}")
    try:
        replica = Replica(RunRegistry(store=store), {}, store, lease_s=2.0)
        replica.held["run_paused"] = 1
        replica.renewed_at = time.monotonic() - 9  # its last renewal, 9 s ago: the process was stopped since
        with capture_logs() as logs:
            asyncio.run(replica.renew())
        late = [log for log in logs if log["event"] == "serve_leases_not_renewed"]
        assert len(late) == 1
        assert "the heartbeat was late" in late[0]["why"] and "store did not answer" not in late[0]["why"]
    finally:
        store.close()


def test_keeping_events_says_cannot_keep_and_nothing_for_a_run_that_never_started(tmp_path: Path) -> None:
    store = open_store(f"sqlite:///{tmp_path / 'store.db'}")
    keeper = EventKeeper(store)
    never = RunHandle(id="run_refused", team="t", input="x", redactor=Redactor(include_env=False))
    never.error = "run run_refused could not take its lease in the store, so it did not start"
    ran = RunHandle(id="run_kept", team="t", input="x", redactor=Redactor(include_env=False))
    ran._lines.append({"kind": "run_start", "run_id": "run_kept", "ts": 0.0, "data": {}})

    async def keep() -> None:
        keeper.run_over(never)
        keeper.run_over(ran)
        await keeper.flush()

    with store.engine.begin() as conn:  # the run's record is there; then every write of events fails
        conn.execute(
            runs.insert().values(
                id="run_kept", team="t", status="running", input="x", started_at=_dt.datetime.now(_dt.UTC)
            )
        )
        conn.exec_driver_sql("DROP TABLE run_events")
    try:
        with capture_logs() as logs:
            asyncio.run(keep())
    finally:
        store.close()
    said = [(log["run"], log.get("error", "")) for log in logs if log["event"] == "serve_events_not_kept"]
    assert [run for run, _ in said] == ["run_kept"]
    assert said[0][1].startswith("cannot keep a run's events in the store")
