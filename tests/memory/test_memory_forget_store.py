"""Issue 44.1 and 44.3 in the store, on SQLite and PostgreSQL: ``forget`` redacts the fact-carrying journal
entries of the resource's runs (and no other run's) in its transaction; ``change_working`` applies a change to the
record as it is now."""

from __future__ import annotations

import json

from teamrun.engine.durability.memory_entries import (
    EmbeddingRecord,
    RecalledFact,
    RecallRecord,
    embedding_entry,
    recall_entry,
    resource_entry,
)
from teamrun.store import open_store
from teamrun.store.journal import StoreJournal
from teamrun.store.memory import MemoryStore
from teamrun.store.memory_journal import is_forgotten
from teamrun.store.records import EntryKey, JournaledRun, JournalEntry

FACT = "The customer's parrot is called Zanzibar"


def _run(journal: StoreJournal, run_id: str, resource: str) -> None:
    journal.save_run(JournaledRun(run_id=run_id, team="desk", team_file="/x/desk.yaml", input="hello"))
    save_call = {"id": "c1", "name": "memory_save", "arguments": '{"fact": "' + FACT + '"}'}
    other_call = {"id": "c2", "name": "lookup", "arguments": '{"q": "invoices"}'}
    reply = {"text": None, "tool_calls": [save_call, other_call], "usage": {}, "cost_usd": 0.0, "model": "m"}
    journal.append(
        run_id,
        [
            resource_entry(resource),
            recall_entry("support", 1, "fp", RecallRecord(FACT, (RecalledFact("m1", FACT, 0.9),))),
            embedding_entry("support", 1, 0, "efp", EmbeddingRecord([[0.1, 0.2]], "offline", 3, 0.0)),
            JournalEntry(EntryKey("support", 1, "model"), "rh", reply),
            JournalEntry(EntryKey("support", 1, "tool", 0), "th", {"ok": True, "content": "Saved."}),
            JournalEntry(EntryKey("support", 1, "tool", 1), "th2", {"ok": True, "content": "invoices by email"}),
        ],
    )


def test_forget_redacts_the_resource_s_runs_journals_only(store_url: str) -> None:
    with open_store(store_url) as store:
        journal = StoreJournal(store)
        _run(journal, "run_a", "cust-A")
        _run(journal, "run_b", "cust-B")
        gone = MemoryStore(store).forget("cust-A")
        assert (gone.runs, gone.journal_entries) == (1, 4)
        kept = {e.key: e for e in journal.load("run_a")}
        assert is_forgotten(kept[EntryKey("support", 1, "memory_recall")].payload)
        assert is_forgotten(kept[EntryKey("support", 1, "embedding")].payload)
        assert is_forgotten(kept[EntryKey("support", 1, "tool", 0)].payload)
        assert kept[EntryKey("support", 1, "tool", 1)].payload["content"] == "invoices by email"  # not a memory tool
        calls = kept[EntryKey("support", 1, "model")].payload["tool_calls"]
        assert [c["arguments"] for c in calls] == ['{"forgotten": true}', '{"q": "invoices"}']
        assert FACT not in str([e.payload for e in journal.load("run_a")])
        assert FACT in str([e.payload for e in journal.load("run_b")])  # another resource's run is untouched
        assert MemoryStore(store).forget("cust-A").journal_entries == 0  # nothing left to redact


def test_change_working_applies_a_change_to_the_record_as_it_is_now(store_url: str) -> None:
    with open_store(store_url) as store:
        memory = MemoryStore(store)
        memory.change_working("cust-A", "desk", "notes", lambda found, value: ["a"] if not found else value)
        memory.change_working("cust-A", "desk", "notes", lambda found, value: [*value, "b"])
        assert memory.load_working("cust-A", "desk") == {"notes": (2, ["a", "b"])}


def test_forget_redacts_the_workspace_tools_calls_and_results_of_the_resource_s_runs(store_url: str) -> None:
    """Attack a44b D1: a run's working memory (``persist: resource``) is in its workspace tools' arguments and
    results (a ``workspace_read`` of a loaded entry answers its value): forget redacts them, other tools' are kept."""
    value = "WMCITY-Zanzibar"
    read = {"id": "c1", "name": "workspace_read", "arguments": '{"entry": "profile"}'}
    write = {"id": "c2", "name": "workspace_write_notes", "arguments": '{"items": ["' + value + ' likes tea"]}'}
    other = {"id": "c3", "name": "lookup", "arguments": '{"q": "invoices"}'}
    reply = {"text": None, "tool_calls": [read, write, other], "usage": {}, "cost_usd": 0.0, "model": "m"}
    answer = json.dumps({"entry": "profile", "value": {"city": value}, "written_by": ["working memory"]})
    with open_store(store_url) as store:
        journal = StoreJournal(store)
        journal.save_run(JournaledRun(run_id="run_w", team="desk", team_file="/x/desk.yaml", input="hello"))
        journal.append(
            "run_w",
            [
                resource_entry("cust-W"),
                JournalEntry(EntryKey("desk", 1, "model"), "rh", reply),
                JournalEntry(EntryKey("desk", 1, "tool", 0), "th", {"ok": True, "content": answer}),
                JournalEntry(EntryKey("desk", 1, "tool", 2), "th2", {"ok": True, "content": "invoices by email"}),
            ],
        )
        gone = MemoryStore(store).forget("cust-W")
        assert (gone.runs, gone.journal_entries) == (1, 2)
        kept = {e.key: e for e in journal.load("run_w")}
        assert is_forgotten(kept[EntryKey("desk", 1, "tool", 0)].payload)
        assert kept[EntryKey("desk", 1, "tool", 2)].payload["content"] == "invoices by email"
        calls = kept[EntryKey("desk", 1, "model")].payload["tool_calls"]
        assert [c["arguments"] for c in calls] == ['{"forgotten": true}', '{"forgotten": true}', '{"q": "invoices"}']
        assert value not in str([e.payload for e in journal.load("run_w")])


def test_forget_redacts_the_kept_events_of_the_resource_s_runs(store_url: str) -> None:
    """Attack a44b D3: a served run's kept events (``run_events``, compressed: a byte grep misses them) hold the
    facts and values with ``--trace-content``; forget removes them from the resource's runs' events only."""
    from teamrun.store.run_events import RunEventRepository

    def events(run_id: str) -> list[dict[str, object]]:
        def line(kind: str, data: dict[str, object]) -> dict[str, object]:
            return {"kind": kind, "run_id": run_id, "agent_path": ["support"], "data": data}

        return [
            line("run_start", {"team": "desk", "input": "hello"}),
            line("memory_recall", {"resource": "x", "how": "search", "query": "parrot", "facts": [FACT]}),
            line("memory_save", {"resource": "x", "status": "saved", "id": "m1", "fact": FACT}),
            line("workspace_write", {"entry": "notes", "status": "applied", "value_after": [FACT]}),
            line("llm_io", {"new_messages": [{"role": "user", "content": FACT}], "reply": {"text": FACT}}),
            line("agent_end", {"final_text": "Noted."}),
        ]

    with open_store(store_url) as store:
        journal = StoreJournal(store)
        _run(journal, "run_a", "cust-A")
        _run(journal, "run_b", "cust-B")
        kept = RunEventRepository(store.engine)
        for run_id in ("run_a", "run_b"):
            kept.save(run_id, events(run_id))
        gone = MemoryStore(store).forget("cust-A")
        assert gone.events == 4 and gone.as_dict()["events"] == 4
        after = kept.load("run_a") or []
        assert FACT not in json.dumps(after) and "parrot" not in json.dumps(after)
        assert [e["kind"] for e in after] == [e["kind"] for e in events("run_a")]  # the timeline stays
        assert all(e["data"].get("forgotten") is True for e in after[1:5])
        assert after[5]["data"] == {"final_text": "Noted."}
        assert FACT in json.dumps(kept.load("run_b"))  # another resource's run is untouched
        assert MemoryStore(store).forget("cust-A").events == 0
