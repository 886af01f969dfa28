"""Attack a46b item 1: the replica that runs a run streams its events once, numbered as every replica numbers them.

A replica keeps a running run's events on its heartbeat. A reader of ``GET /v1/runs/{id}/events`` on that replica
asks which events other processes kept before this one's (a run continued here after a restart shows them first):
while the first heartbeat write of the run was committed but not yet known as this handle's own part, the answer
was that part (the run's first events), and the stream sent them, then the whole run again numbered after them.
The store's write is held (a gate) just after its commit, as load held it.
"""

from __future__ import annotations

import asyncio
import datetime as _dt
import threading
from pathlib import Path
from typing import Any

import pytest

from teamrun.secrets import Redactor
from teamrun.serve.history import EventKeeper
from teamrun.serve.runs import RunHandle
from teamrun.store import open_store
from teamrun.store.schema import runs

pytestmark = pytest.mark.inprocess


def _line(run_id: str, n: int) -> dict[str, Any]:
    return {"kind": "run_start" if n == 0 else "agent_step", "run_id": run_id, "ts": float(n), "data": {"n": n}}


def test_the_owner_never_reads_its_own_part_being_written_as_an_earlier_processs(tmp_path: Path) -> None:
    asyncio.run(asyncio.wait_for(_owner_reads(tmp_path), timeout=120))


async def _owner_reads(tmp_path: Path) -> None:
    store = open_store(f"sqlite:///{tmp_path / 'store.db'}")
    try:
        with store.engine.begin() as conn:
            conn.execute(
                runs.insert().values(
                    id="run_owned", team="t", status="running", input="x", started_at=_dt.datetime.now(_dt.UTC)
                )
            )
        handle = RunHandle(id="run_owned", team="t", input="x", redactor=Redactor(include_env=False))
        handle._lines.extend(_line(handle.id, n) for n in range(7))
        committed, gate = threading.Event(), threading.Event()
        save = store.run_events.save

        def held_save(*args: Any, **kwargs: Any) -> Any:
            kept = save(*args, **kwargs)
            committed.set()
            gate.wait(30)
            return kept

        store.run_events.save = held_save  # type: ignore[method-assign]
        keeper = EventKeeper(store)
        keeper.run_over(handle)  # the heartbeat keeps the running run's events so far
        assert await asyncio.to_thread(committed.wait, 30)
        reading = asyncio.ensure_future(keeper.earlier(handle))  # a reader of /events on the owner, at that moment
        await asyncio.to_thread(gate.set)
        assert await reading is None  # nothing before this handle's own events: ids 0.. are its own, once
        await keeper.flush()
        handle._lines.append(_line(handle.id, 7))
        keeper.run_over(handle)  # the next beat rewrites its own part
        assert await keeper.earlier(handle) is None
        assert [e["data"]["n"] for e in store.run_events.load(handle.id) or []] == list(range(8))
    finally:
        gate.set()
        store.close()
