"""The store-backed journal on SQLite and PostgreSQL: entries round-trip in order, runs are listed and resumed."""

from __future__ import annotations

import time

from teamrun.engine.durability.resume import open_resume
from teamrun.store import open_store
from teamrun.store.journal import StoreJournal
from teamrun.store.records import EntryKey, JournaledRun, JournalEntry


def test_entries_and_runs_round_trip(store_url: str) -> None:
    with open_store(store_url) as store:
        backend = StoreJournal(store)
        run = JournaledRun(
            run_id="r1",
            team="fan",
            team_file="/x/team.yaml",
            input="go",
            vars={"a": "1"},
            model="offline",
            pid=2**22 + 99,
        )
        backend.save_run(run)
        first = [
            JournalEntry(EntryKey("lead", 1, "model"), "h1", {"text": None, "tool_calls": []}),
            JournalEntry(EntryKey("lead/w@1.3", 2, "tool", 1), "h2", {"ok": True, "content": "é"}),
        ]
        backend.append("r1", first)
        later = StoreJournal(store)  # another process: numbering goes on after what is there
        later.append("r1", [JournalEntry(EntryKey("lead", 2, "model"), "h3", {"text": "done"})], heartbeat=123.0)
        assert backend.load("r1") == [*first, JournalEntry(EntryKey("lead", 2, "model"), "h3", {"text": "done"})]
        assert backend.counts("r1") == {"model": 2, "tool": 1}

        loaded = backend.get_run("r1")
        assert loaded is not None and loaded.status == "running" and loaded.heartbeat_at == 123.0
        assert (loaded.team_file, loaded.vars, loaded.model) == ("/x/team.yaml", {"a": "1"}, "offline")
        assert loaded.shown_status() == "interrupted"  # its pid is gone
        assert abs(loaded.started_at - time.time()) < 3600

        store.runs.start("t-run", "chat", "hello")  # a run the journal did not write is listed too
        assert {r.run_id for r in backend.list_runs()} == {"r1", "t-run"}
        assert [r.run_id for r in backend.list_runs(team="fan")] == ["r1"]

        journal = open_resume(backend, "r1")
        assert journal.record.attempts == 2 and journal.replay.model("lead", 2, "h3") is not None


def test_a_run_on_another_host_is_interrupted_when_its_heartbeat_stops() -> None:
    run = JournaledRun(run_id="r", team="t", team_file="", input="", host="elsewhere", heartbeat_at=time.time())
    assert run.shown_status() == "running"
    assert run.shown_status(now=time.time() + 3600) == "interrupted"
