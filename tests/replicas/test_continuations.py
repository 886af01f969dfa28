"""Issue 46: a run continues on a replica the same way whichever path continues it there (an answer, a takeover).

Replicas (``--lease 2``) on one SQLite file, in this process, each with its own store object (a replica's fences
are its own). A replica that takes back a run it once lost (A paused, B took the run, B stopped, A takes it back)
runs it as a new stretch: its events are kept and numbered after B's, its record and streams are its own. A run
that suspends waiting for people with an answer it did not take (recorded on another replica while the run still
went on, after its question last looked) is continued where it stopped, whether it started there or was taken
over there.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import httpx
import pytest

import teamrun
from teamrun.engine.durability.pending import SuspendingDesk
from teamrun.llm.types import Message, ModelReply, ModelSettings, ToolCall, ToolSchema
from teamrun.serve.app import ServeSettings
from teamrun.store import Store, open_store
from tests.replicas.cluster import Follower, events_of
from tests.serve.conftest import GatedModel, RunningServer, solo_team, until_status
from tests.waiting import wait_until

LEASE_S = 2


def _replica(path: Path, model: Any, store: Store) -> RunningServer:
    team = teamrun.load_team(path, chat_model=model, store=store)
    return RunningServer([team], ServeSettings(store=store, lease_s=LEASE_S))


@pytest.fixture
def stores(tmp_path: Path) -> Iterator[list[Store]]:
    """Three stores on one SQLite file: one per replica."""
    opened = [open_store(tmp_path / "runs.db") for _ in range(3)]
    try:
        yield opened
    finally:
        for store in opened:
            store.close()


def _cut_off(*args: object, **kwargs: object) -> dict[str, object]:
    from teamrun.errors import StoreError

    raise StoreError("the store does not answer (a partition)")


def _moved_away(server: RunningServer, run_id: str) -> bool:
    """The replica noticed its run moved, and stopped executing it."""
    serve = server.app.state.serve
    handle = serve.registry.get(run_id)
    return run_id not in serve.replica.held and handle is not None and handle.finished


def test_a_run_taken_back_by_a_replica_that_lost_it_keeps_its_events_after_the_other_replicas(
    tmp_path: Path, stores: list[Store]
) -> None:
    model = GatedModel()
    path = solo_team(tmp_path)
    a, b, reader = (_replica(path, model, store) for store in stores)
    a.start()
    try:
        with httpx.Client(base_url=a.url, timeout=60) as first:
            run_id = first.post("/v1/runs", json={"team": "solo", "input": "wait"}).json()["id"]
            wait_until(lambda: model.waiting == 1, "the model call in flight on A")
            leases = a.app.state.serve.replica.leases
            leases.renew = _cut_off  # A is paused: its lease expires and B takes the run
            b.start()
            wait_until(lambda: model.waiting == 2, "the run taken over by B")
            del leases.renew  # A comes back, notices the run moved and stops executing it
            wait_until(lambda: _moved_away(a, run_id), "A stopped executing the run")
            b.stop()  # B stops: it hands the run over, and A takes it back
            wait_until(lambda: run_id in a.app.state.serve.replica.held, "A took the run back")
            wait_until(lambda: model.waiting == 1, "the model call in flight on A again")

            shown = first.get(f"/v1/runs/{run_id}").json()
            assert shown["status"] == "running" and "source" not in shown, shown  # A runs it: its own record
            model.gate.set()
            until_status(first, run_id, "done")
            on_a = events_of(first.get(f"/v1/runs/{run_id}/events").text)
        reader.start()  # a replica that never ran the run reads what the store kept of it
        with httpx.Client(base_url=reader.url, timeout=60) as third:
            kept = events_of(third.get(f"/v1/runs/{run_id}/events").text)
    finally:
        model.gate.set()
        for server in (a, b, reader):
            if server.thread.ident is not None:  # started
                server.stop()
    for seen in (on_a, kept):
        assert seen[-1][1] == "result" and seen[-1][2]["status"] == "done", seen[-3:]
        numbers = [index for index, _, _ in seen if index is not None]
        assert numbers == list(range(len(numbers))), numbers  # each event once, numbered alike everywhere
        kinds = [kind for _, kind, _ in seen]
        assert kinds.count("run_moved") == 2, kinds  # to B (A's lease expired), back to A (B handed it over)
        assert kinds.count("run_end") == 1, kinds  # A's stretch after B's is kept, up to the run's end
        moves = [data["data"] for _, kind, data in seen if kind == "run_moved"]
        assert [move["why"] for move in moves] == ["lease expired", "handover"], moves
    assert [(index, kind) for index, kind, _ in on_a] == [(index, kind) for index, kind, _ in kept]


def test_a_stream_on_a_replica_that_lost_its_run_goes_on_with_the_store_events(
    tmp_path: Path, stores: list[Store]
) -> None:
    """Issue 46 (replicas attack, defect 1): a client follows a run on A, A is paused past its lease and B takes
    the run. A's open stream never sends the events A makes up as it stops executing the run (its own
    cancellation): it goes on with the store's events, B's, so the client sees every event once, as the store
    numbers them, and the run's result."""
    model = GatedModel()
    path = solo_team(tmp_path)
    a, b = (_replica(path, model, store) for store in stores[:2])
    a.start()
    try:
        with httpx.Client(base_url=a.url, timeout=60) as first:
            run_id = first.post("/v1/runs", json={"team": "solo", "input": "wait"}).json()["id"]
            wait_until(lambda: model.waiting == 1, "the model call in flight on A")

            follower = Follower(a.url, run_id)
            wait_until(lambda: "agent_start" in follower.text, "the client follows the run on A")
            handle = a.app.state.serve.registry.get(run_id)
            wait_until(
                lambda: len(stores[0].run_events.load(run_id) or []) == handle.event_count,
                "A's events so far kept (on its heartbeat)",
            )
            leases = a.app.state.serve.replica.leases
            leases.renew = _cut_off  # A is paused: its lease expires and B takes the run
            b.start()
            wait_until(lambda: model.waiting == 2, "the run taken over by B")
            del leases.renew  # A comes back, notices the run moved and stops executing it
            wait_until(lambda: _moved_away(a, run_id), "A stopped executing the run")
            model.gate.set()
            with httpx.Client(base_url=b.url, timeout=60) as second:
                until_status(second, run_id, "done")
                follower.join(60)
                kept = events_of(second.get(f"/v1/runs/{run_id}/events").text)
    finally:
        model.gate.set()
        for server in (a, b):
            if server.thread.ident is not None:  # started
                server.stop()
    followed = events_of(follower.text)
    assert not follower.is_alive(), followed[-3:]  # the stream ended
    assert followed[-1][1] == "result" and followed[-1][2]["status"] == "done", followed[-3:]
    assert [(index, kind) for index, kind, _ in followed] == [(index, kind) for index, kind, _ in kept]
    assert [data for _, _, data in followed[:-1]] == [data for _, _, data in kept[:-1]]


# -- an answer the run did not take before it suspended ------------------------------------------------------

TEAM = """version: 1
name: seats
supervisor: lead
defaults: {model: offline}
tools:
  ask_owner: {person: {}}
  hold: {python: 'seats_hold:hold'}
agents:
  lead: {description: Books seats., tools: [ask_owner, hold]}
"""
HOLD = '''import asyncio
import pathlib


async def hold(what: str) -> str:
    """Wait until the test lets the run go on."""
    while not pathlib.Path(__file__).with_name("released").exists():
        await asyncio.sleep(0.01)
    return f"held {what}"
'''


def _seats_team(tmp_path: Path) -> Path:
    (tmp_path / "seats_hold.py").write_text(HOLD, encoding="utf-8")
    path = tmp_path / "seats.yaml"
    path.write_text(TEAM, encoding="utf-8")
    return path


class Seats:
    """No script: a run's first reply asks a person and holds (both at once), its next one says what came back.
    With ``hang_first``, the very first call hangs until its run stops (the replica running it is paused)."""

    def __init__(self, *, hang_first: bool = False) -> None:
        self.calls = 0
        self.hang_first = hang_first
        self._lock = threading.Lock()

    async def complete(
        self,
        messages: Sequence[Message],
        *,
        settings: ModelSettings,
        tools: Sequence[ToolSchema] = (),
        response_format: Mapping[str, Any] | None = None,
    ) -> ModelReply:
        with self._lock:
            self.calls += 1
            first = self.calls == 1
        if first and self.hang_first:
            await asyncio.Event().wait()  # until cancelled
        said = [str(message.get("content")) for message in messages if message["role"] == "tool"]
        if said:
            return ModelReply("booked: " + " / ".join(said))
        asked = ToolCall("c1", "ask_owner", '{"question": "how many seats?"}')
        return ModelReply(None, (asked, ToolCall("c2", "hold", '{"what": "the plane"}')))


@pytest.fixture
def desk_looks_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """Pins the race: a question looks in the store for its answer as it asks, and not again before its run
    suspends (its next look would come after ``POLL_S``)."""
    original = SuspendingDesk.__init__

    def looks_once(self: SuspendingDesk, items: Any, *, poll_s: float = 0.0, mask: Any = None) -> None:
        original(self, items, poll_s=3600.0, mask=mask)

    monkeypatch.setattr(SuspendingDesk, "__init__", looks_once)


def _answer_while_it_holds(tmp_path: Path, client: httpx.Client, run_id: str) -> None:
    """Answer the run's question on ``client``'s replica while the run still goes on (it holds), then let it go."""
    item = wait_until(
        lambda: next((i for i in client.get("/v1/pending").json()["data"] if i["run_id"] == run_id), None),
        "the run's question",
    )
    answered = client.post(f"/v1/runs/{run_id}/pending/{item['id']}", json={"answer": "12 seats"})
    assert answered.status_code == 200, answered.text
    assert client.get(f"/v1/runs/{run_id}").json()["status"] == "running"  # not waiting: nobody claimed it
    (tmp_path / "released").write_text("", encoding="utf-8")  # it stops holding, and suspends at once


@pytest.mark.usefixtures("desk_looks_once")
def test_a_run_answered_on_another_replica_as_it_suspends_continues_where_it_runs(
    tmp_path: Path, stores: list[Store]
) -> None:
    model = Seats()
    path = _seats_team(tmp_path)
    here, there = (_replica(path, model, store).start() for store in stores[:2])
    try:
        with httpx.Client(base_url=here.url, timeout=60) as runs, httpx.Client(base_url=there.url, timeout=60) as other:
            run_id = runs.post("/v1/runs", json={"team": "seats", "input": "book"}).json()["id"]
            _answer_while_it_holds(tmp_path, other, run_id)
            done = until_status(other, run_id, "done")
        assert "12 seats" in done["final_text"], done
    finally:
        here.stop()
        there.stop()


@pytest.mark.usefixtures("desk_looks_once")
def test_a_taken_over_run_answered_on_another_replica_as_it_suspends_continues(
    tmp_path: Path, stores: list[Store]
) -> None:
    model = Seats(hang_first=True)
    path = _seats_team(tmp_path)
    a, b = (_replica(path, model, store) for store in stores[:2])
    a.start()
    try:
        with httpx.Client(base_url=a.url, timeout=60) as first:
            run_id = first.post("/v1/runs", json={"team": "seats", "input": "book"}).json()["id"]
            wait_until(lambda: model.calls == 1, "the model call in flight on A")
            leases = a.app.state.serve.replica.leases
            leases.renew = _cut_off  # A is paused: B takes the run over
            b.start()
            wait_until(lambda: model.calls == 2, "the run taken over by B")
            del leases.renew
            wait_until(lambda: _moved_away(a, run_id), "A stopped executing the run")
            _answer_while_it_holds(tmp_path, first, run_id)  # on A, which no longer runs it
            done = until_status(first, run_id, "done")
        assert "12 seats" in done["final_text"], done
    finally:
        a.stop()
        b.stop()
