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


def test_a_process_that_resumes_a_run_it_journaled_before_numbers_after_the_entries_of_another(
    store_url: str,
) -> None:
    """Issue 46 (replicas attack, defect 2): replica B journals a run, which then stops; replica A continues it
    and journals an entry; B takes the run a second time. B's next entry comes after A's: it is written, never
    refused as a duplicate entry number (the run would go on unjournaled, and a later owner pay it again)."""
    with open_store(store_url) as store:
        b, a = StoreJournal(store), StoreJournal(store)
        run = JournaledRun(run_id="r2", team="t", team_file="", input="go", status="waiting", pid=2**22 + 99)
        b.save_run(run)
        first = [JournalEntry(EntryKey("lead", index, "model"), f"h{index}", {"text": None}) for index in (1, 2, 3)]
        b.append("r2", first)
        answer = JournalEntry(EntryKey("lead", 4, "model"), "h4", {"text": "answered on A"})
        on_a = open_resume(a, "r2", confirmed=True)
        a.append("r2", [answer])
        on_a.record.status = "waiting"  # it asks again: anyone may continue it
        a.save_run(on_a.record)
        again = JournalEntry(EntryKey("lead", 5, "model"), "h5", {"text": "on B again"})
        journal = open_resume(b, "r2", confirmed=True)
        assert journal.replay.model("lead", 4, "h4") is not None  # B replays A's entry
        b.append("r2", [again])
        assert b.load("r2") == [*first, answer, again]
