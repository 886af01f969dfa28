"""Attack a46d, defect 4: a replica that lost its run without knowing it yet (paused, or cut off from the store,
past its lease) sends its streams none of the events it made meanwhile: an owner's stream sends what a renewal of
the run's lease confirmed, and goes on with the store's events (the new owner's) from there.

Two replicas in this process on one SQLite file (tests/replicas/test_continuations.py's set-up). A client follows
the run on A while a tool runs; A's renewals stop reaching the store and B takes the run; then the tool ends on A,
which makes events (the tool's end, the next model call's start) before its next write is refused. Before, A's
stream sent them under ids the store gives to B's events (``run_moved``...).
"""

from __future__ import annotations

import importlib
import uuid
from pathlib import Path
from typing import Any

import httpx

from teamrun.store import Store
from teamrun.testing.scripted import ScriptedModel, tool_call
from tests.replicas.cluster import Follower, events_of
from tests.replicas.test_continuations import _cut_off, _replica, stores
from tests.serve.conftest import until_status
from tests.waiting import wait_until

__all__ = ["stores"]

TOOLS = """\
import threading

STARTED = threading.Event()
RELEASE = threading.Event()


def hold(topic: str) -> str:
    "Look a topic up, slowly."
    STARTED.set()
    RELEASE.wait(120)
    return f"fact about {topic}"
"""


def test_a_stream_on_a_replica_that_lost_its_run_unknowingly_sends_none_of_its_later_events(
    tmp_path: Path, stores: list[Store], monkeypatch: Any
) -> None:
    module = f"hold_tools_{uuid.uuid4().hex[:8]}"
    (tmp_path / f"{module}.py").write_text(TOOLS, encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    tools = importlib.import_module(module)
    path = tmp_path / "look.yaml"
    path.write_text(
        "version: 1\nname: look\nsupervisor: lead\ndefaults: {model: offline}\n"
        f"tools:\n  hold: {{python: '{module}:hold'}}\n"
        "agents:\n  lead: {description: Looks things up., tools: [hold]}\n",
        encoding="utf-8",
    )
    model = ScriptedModel({"lead": [tool_call("hold", topic="rust"), "final: rust"]})
    a, b = (_replica(path, model, store) for store in stores[:2])
    a.start()
    try:
        with httpx.Client(base_url=a.url, timeout=60) as client:
            run_id = client.post("/v1/runs", json={"team": "look", "input": "rust"}).json()["id"]

        follower = Follower(a.url, run_id)
        wait_until(tools.STARTED.is_set, "the tool running on A")
        handle = a.app.state.serve.registry.get(run_id)
        wait_until(
            lambda: len(stores[0].run_events.load(run_id) or []) == handle.event_count,
            "A's events so far kept (its client follows it)",
        )
        a.app.state.serve.replica.leases.renew = _cut_off  # A's renewals stop reaching the store
        b.start()
        wait_until(lambda: run_id in b.app.state.serve.replica.held, "B taking the run over")
        tools.RELEASE.set()  # the tool ends on A (and on B, which runs it again): A makes events, then is refused
        with httpx.Client(base_url=b.url, timeout=60) as client:
            until_status(client, run_id, "done")
            follower.join(60)
            kept = events_of(client.get(f"/v1/runs/{run_id}/events").text)
    finally:
        tools.RELEASE.set()
        for server in (a, b):
            if server.thread.ident is not None:
                server.stop()
    followed = events_of(follower.text)
    assert not follower.is_alive(), followed[-3:]
    assert followed[-1][1] == "result" and followed[-1][2]["status"] == "done", followed[-3:]
    assert [(index, kind) for index, kind, _ in followed] == [(index, kind) for index, kind, _ in kept]
    assert [kind for _, kind, _ in followed].count("run_moved") == 1
