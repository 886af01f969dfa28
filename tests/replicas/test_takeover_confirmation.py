"""Attack a46d, defect 2: a run taken over while a tool that is not idempotent was running (its start journaled,
its result not) is not continued without a person's say, as docs/serve.md's failure table says: it shows
``interrupted`` everywhere (before: ``failed``, written by the taking replica), no replica takes it again, and
``teamrun resume RUN_ID --yes`` can still continue it.

Two replicas in this process on one SQLite file (tests/replicas/test_continuations.py's set-up); A is cut off from
the store (its renewals fail) while the tool runs, so B takes the run over once A's lease expires.
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import httpx
import sqlalchemy as sa

from teamrun.store import Store
from teamrun.store.schema import run_leases
from teamrun.testing.scripted import ScriptedModel, tool_call
from tests.replicas.test_continuations import _cut_off, _replica, stores
from tests.waiting import wait_until

__all__ = ["stores"]

TOOLS = """\
import threading

STARTED = threading.Event()
RELEASE = threading.Event()


def charge(amount: int) -> str:
    "Charge the customer."
    STARTED.set()
    RELEASE.wait(120)
    return f"charged {amount}"
"""


def _team(tmp_path: Path, module: str) -> Path:
    (tmp_path / f"{module}.py").write_text(TOOLS, encoding="utf-8")
    path = tmp_path / "pay.yaml"
    path.write_text(
        "version: 1\nname: pay\nsupervisor: lead\ndefaults: {model: offline}\n"
        f"tools:\n  charge: {{python: '{module}:charge', idempotent: false}}\n"
        "agents:\n  lead: {description: Charges., tools: [charge]}\n",
        encoding="utf-8",
    )
    return path


def test_a_run_taken_over_mid_way_through_a_tool_that_is_not_idempotent_shows_interrupted_not_failed(
    tmp_path: Path, stores: list[Store], monkeypatch: Any
) -> None:
    import importlib

    module = f"pay_tools_{uuid.uuid4().hex[:8]}"
    path = _team(tmp_path, module)
    monkeypatch.syspath_prepend(str(tmp_path))
    tools = importlib.import_module(module)
    model = ScriptedModel({"lead": [tool_call("charge", amount=5), "final: charged"]})
    a, b = (_replica(path, model, store) for store in stores[:2])
    a.start()
    try:
        with httpx.Client(base_url=a.url, timeout=60) as client:
            run_id = client.post("/v1/runs", json={"team": "pay", "input": "charge 5"}).json()["id"]
        wait_until(tools.STARTED.is_set, "the charge running on A")
        leases = a.app.state.serve.replica.leases
        leases.renew = _cut_off  # A is cut off from the store: its lease expires and B takes the run
        b.start()
        with httpx.Client(base_url=b.url, timeout=60) as client:
            shown = wait_until(
                lambda: (
                    (client.get(f"/v1/runs/{run_id}").json().get("status") in ("interrupted", "failed"))
                    and client.get(f"/v1/runs/{run_id}").json()
                ),
                "B taking the run over and stopping before the charge",
                where=lambda: (client.get(f"/v1/runs/{run_id}").json()["status"], stores[1].leases.get(run_id)),
                guard_s=40,
            )
        with stores[1].engine.connect() as conn:
            released = conn.execute(sa.select(run_leases.c.released).where(run_leases.c.run_id == run_id)).scalar()
        record = stores[1].runs.get(run_id)
    finally:
        tools.RELEASE.set()
        a.stop()
        if b.thread.ident is not None:
            b.stop()
    assert shown["status"] == "interrupted", shown
    assert "--yes" in str(shown.get("error") or ""), shown
    assert record is not None and record.status == "running"  # (shown interrupted: nobody runs it)
    assert released == "confirm"  # no replica takes it again on its own
    assert len(model.calls_of("lead")) == 1  # the charge's result was never journaled: no call carried it
