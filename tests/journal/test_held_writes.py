"""Issue 46 (attack a46c, item 2): a journal write that does not reach the store holds a leased run (a replica's)
until the store takes it or refuses it; a run without a lease goes on unjournaled and says so, as before.

The store is SQLite here; its writer connection fails as a PostgreSQL out of reach makes it fail (SQLAlchemy's
``OperationalError``) for as long as the test says.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from teamrun.engine.durability.journal import RunJournal
from teamrun.store import open_store
from teamrun.store.journal import StoreJournal
from teamrun.store.leases import Fence, LeaseRepository, StaleLease
from teamrun.store.records import EntryKey, JournaledRun, JournalEntry
from tests.clock import Clock


class Outage:
    """Makes ``backend``'s writes fail as a store out of reach does, until :meth:`end` (or ``error`` instead)."""

    def __init__(self, backend: StoreJournal, monkeypatch: pytest.MonkeyPatch) -> None:
        self.down = True
        self.tries = 0
        self.error: Exception = sa.exc.OperationalError("COMMIT", {}, Exception("connection refused"))
        original = backend._writer_connection

        @contextlib.contextmanager
        def writer() -> Iterator[sa.Connection]:
            self.tries += 1
            if self.down:
                raise self.error
            with original() as conn:
                yield conn

        monkeypatch.setattr(backend, "_writer_connection", writer)

    def end(self) -> None:
        self.down = False


def _entry(index: int) -> JournalEntry:
    return JournalEntry(EntryKey("lead", index, "model", 0), "h", {"text": f"reply {index}"})


def _leased(store_url: str, run_id: str) -> tuple[Any, StoreJournal, LeaseRepository, Clock, RunJournal]:
    store = open_store(store_url)
    clock = Clock()
    leases = LeaseRepository(store.engine, clock=clock)
    backend = StoreJournal(store)
    record = JournaledRun(run_id=run_id, team="t", team_file="t.yaml", input="go")
    backend.save_run(record)
    leases.acquire(run_id, "a", ttl_s=10)
    store.fences.set(run_id, Fence("a", 1))
    return store, backend, leases, clock, RunJournal(backend, record)


async def _until(condition: Any, what: str = "the write tried again") -> None:
    for _ in range(6000):  # a hang guard, not a time bound (a minute)
        if condition():
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"never happened: {what}")


def test_a_leased_runs_write_holds_while_the_store_is_out_of_reach_and_goes_through_once_it_answers(
    store_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    store, backend, _, _, journal = _leased(store_url, "r1")

    async def scenario() -> None:
        await journal.open()
        outage = Outage(backend, monkeypatch)
        write = asyncio.create_task(journal.write_now(_entry(1)))
        await _until(lambda: outage.tries >= 2)  # tried, and tried again
        assert not write.done()  # the run holds here: it does not act on a reply it could not journal
        outage.end()
        await asyncio.wait_for(write, timeout=60)
        await journal.close(status="done", usage={}, cost=0.0, final_text="ok", error=None)

    asyncio.run(scenario())
    assert journal.failure is None and journal.fenced is None
    assert [e.key.index for e in backend.load("r1")] == [1]
    assert backend.get_run("r1").status == "done"  # type: ignore[union-attr]
    store.close()


def test_a_held_write_is_refused_once_the_store_answers_if_another_replica_took_the_run(
    store_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    store, backend, leases, clock, journal = _leased(store_url, "r2")

    async def scenario() -> None:
        await journal.open()
        outage = Outage(backend, monkeypatch)
        write = asyncio.create_task(journal.write_now(_entry(1)))
        await _until(lambda: outage.tries >= 2)
        clock.now += 11  # a's heartbeat did not reach the store either: its lease expired, b takes the run
        (expired,) = leases.takeable()
        assert leases.take(expired, "b", ttl_s=10) == 2
        outage.end()
        with pytest.raises(StaleLease, match="replica a no longer owns it"):
            await asyncio.wait_for(write, timeout=60)
        with pytest.raises(StaleLease):  # and every later write: the run stops here
            await journal.write_now(_entry(2))
        await journal.close(status="failed", usage={}, cost=0.0, final_text="", error="moved")

    asyncio.run(scenario())
    assert backend.load("r2") == []
    assert backend.get_run("r2").status == "running"  # type: ignore[union-attr]  # b's to end
    store.close()


def test_a_held_write_is_given_up_when_the_run_closes_and_a_run_without_a_lease_goes_on_unjournaled(
    store_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    store, backend, _, _, journal = _leased(store_url, "r3")

    async def held_then_closed() -> None:
        await journal.open()
        outage = Outage(backend, monkeypatch)
        write = asyncio.create_task(journal.write_now(_entry(1)))
        await _until(lambda: outage.tries >= 2)
        write.cancel()  # the run is cancelled while it holds: closing ends the holding
        await asyncio.wait_for(
            journal.close(status="cancelled", usage={}, cost=0.0, final_text="", error=None), timeout=60
        )

    asyncio.run(held_then_closed())
    assert journal.failure is not None and "connection refused" in journal.failure
    monkeypatch.undo()

    record = JournaledRun(run_id="r4", team="t", team_file="t.yaml", input="go")  # one server's: no lease
    backend.save_run(record)
    plain = RunJournal(backend, record)

    async def unleased() -> None:
        await plain.open()
        outage = Outage(backend, monkeypatch)
        await asyncio.wait_for(plain.write_now(_entry(1)), timeout=60)  # not held: the run goes on
        assert outage.tries == 1
        await plain.close(status="done", usage={}, cost=0.0, final_text="ok", error=None)

    asyncio.run(unleased())
    assert plain.failure is not None and "OperationalError" in plain.failure
    store.close()


def test_a_leased_write_the_store_refuses_for_good_is_not_held(store_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """An error that would come again (a constraint, a payload the database refuses) is not worth holding for."""
    store, backend, _, _, journal = _leased(store_url, "r5")

    async def scenario() -> None:
        await journal.open()
        outage = Outage(backend, monkeypatch)
        outage.error = sa.exc.IntegrityError("INSERT", {}, Exception("duplicate key"))
        await asyncio.wait_for(journal.write_now(_entry(1)), timeout=60)
        assert outage.tries == 1
        await journal.close(status="done", usage={}, cost=0.0, final_text="ok", error=None)

    asyncio.run(scenario())
    assert journal.failure is not None and "IntegrityError" in journal.failure
    store.close()


LOOKUP_TEAM = """\
version: 1
name: look
supervisor: lead
agents:
  lead: {{description: Looks things up., tools: [lookup]}}
tools:
  lookup: {{python: "{module}:lookup"}}
"""

HELD_TOOLS = """\
WHILE_IT_RUNS = []

def lookup(query: str) -> str:
    "Look up a fact."
    for hook in WHILE_IT_RUNS:
        hook()
    return f"fact about {query}"
"""


def test_a_replica_that_lost_its_run_during_a_tool_pays_no_model_call_carrying_its_result(
    store_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Attack a46d, defect 1: the replica was paused (or cut off) while a tool ran, and another replica took the
    run meanwhile. The tool's result is queued, not waited for; before, the next model call, which carries it, was
    paid at once and only its reply's write was refused: the taker paid it too. Now a leased run's model call
    waits for what it carries to be committed, and the refusal stops the run before the call."""
    import importlib
    import uuid

    import teamrun
    from teamrun.testing.scripted import ScriptedModel, tool_call

    module = f"held_tools_{uuid.uuid4().hex[:8]}"  # its own module each time: the tool loader keeps modules
    (tmp_path / f"{module}.py").write_text(HELD_TOOLS, encoding="utf-8")
    (tmp_path / "look.yaml").write_text(LOOKUP_TEAM.format(module=module), encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    store, backend, leases, clock, journal = _leased(store_url, "r6")
    journal.record.team_file = str(tmp_path / "look.yaml")

    def taken_by_another() -> None:
        clock.now += 11
        (expired,) = leases.takeable()
        assert leases.take(expired, "b", ttl_s=10) == 2

    importlib.import_module(module).WHILE_IT_RUNS.append(taken_by_another)
    model = ScriptedModel({"lead": [tool_call("lookup", query="rust"), "final: rust"]})
    team = teamrun.load_team(tmp_path / "look.yaml", chat_model=model)
    with contextlib.suppress(StaleLease):
        asyncio.run(team.run("go", journal=journal, run_id="r6"))
    assert len(model.calls_of("lead")) == 1  # the call carrying the tool's result was never made here
    assert [e.key.kind for e in backend.load("r6")] == ["model"]  # the taker runs the tool again (idempotent)
    store.close()
