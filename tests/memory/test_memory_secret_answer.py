"""Issue 44: a `secret: true` person's answer (docs/people.md) is masked before long-term memory saves or embeds
it. The run asks a person, suspends (exit 4), is answered with `teamrun answer` in another process, and the model
then saves a fact that quotes the answer (`memory_save`): the fake embedding endpoint never receives the secret,
and nothing the memory keeps in the store (its rows, their keyword index, its journal entries) holds it. The
person's answer itself stays where docs/people.md says the store keeps it: the pending item and the run's journal
of that tool call and the model calls that read it (a resume needs them).
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
from pathlib import Path

from teamrun.store import open_store
from teamrun.store.memory import MemoryStore
from tests.cli_processes import listed_run, teamrun
from tests.fakeserver import FakeOpenAI, text, tool_calls
from tests.memory.fake_embeddings import FakeEmbeddingHTTPServer

SECRET = "quokka9931zephyr"
"""One word, lower case, of no provider-key shape: only the `secret: true` answer can mask it, and a keyword index
would keep it whole as one of its terms."""
TEAM = """\
version: 1
name: desk
supervisor: support
defaults: {{api_base: '{url}', api_key_env: TEAMRUN_TEST_KEY, num_retries: 0, request_timeout_s: 900}}
agents:
  support:
    model: openai/support
    instructions: Help the customer.
    tools: [ask_token, ask_plan]
tools:
  ask_token:
    description: Ask the customer for their desk token.
    person: {{secret: true}}
  ask_plan:
    description: Ask the customer which plan they are on.
    person: {{}}
memory:
  embedding: {{model: openai/fake-embed, api_base: '{embed_url}', api_key_env: TEAMRUN_TEST_KEY, dimensions: 16}}
  recall:
    support: {{min_score: 0.05}}
  save: [support]
"""
TASK = "Remember my token; I like PDF invoices."
FACT = f"The customer's desk token is {SECRET} and they like PDF invoices"
MASKED = "The customer's desk token is *** and they like PDF invoices"


def _where_kept(store: Path, secret: str) -> set[tuple[str, str]]:
    """Every (table, journal kind or '-') of the SQLite store with a row that holds ``secret`` in any column."""
    found: set[tuple[str, str]] = set()
    conn = sqlite3.connect(store)
    try:
        tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        for table in tables:
            cursor = conn.execute(f'SELECT * FROM "{table}"')  # every column, text or blob
            columns = [d[0] for d in cursor.description]
            for row in cursor:
                cells = [c if isinstance(c, bytes) else str(c).encode() for c in row if c is not None]
                if any(secret.encode() in c for c in cells):
                    kind = str(row[columns.index("kind")]) if table == "journal" and "kind" in columns else "-"
                    found.add((table, kind))
    finally:
        conn.close()
    return found


def _asked(tmp_path: Path, server: FakeOpenAI, embeddings: FakeEmbeddingHTTPServer) -> tuple[Path, str]:
    """The store and the id of a run of cust-A that asked its first question and suspended (exit 4)."""
    team, store = tmp_path / "desk.yaml", tmp_path / "teamrun.db"
    team.write_text(TEAM.format(url=server.url, embed_url=embeddings.url))
    asked = teamrun(
        "execute", str(team), "-i", TASK, "--resource", "cust-A", "--store", str(store), "--progress", "none"
    )
    assert asked.returncode == 4, asked.stderr  # no terminal: the question waits for a person
    assert "q1" in asked.stderr
    return store, str(listed_run(str(store))["run_id"])


def _answer(store: Path, run_id: str, item: str, value: str) -> subprocess.CompletedProcess[str]:
    """`teamrun answer RUN ITEM VALUE`: records it and continues the run in a process of its own."""
    done = teamrun("answer", run_id, item, value, "--store", str(store), "--progress", "none", "--json")
    assert "Traceback" not in done.stderr
    return done


def _nothing_of_the_secret_in_memory(store: Path, embeddings: FakeEmbeddingHTTPServer) -> None:
    assert embeddings.calls == 2  # the recall's query, the fact saved
    assert all(SECRET.encode() not in body for body in embeddings.bodies)
    assert any(b"PDF invoices" in body for body in embeddings.bodies)  # the fact was embedded, masked
    with open_store(store) as opened:
        kept = MemoryStore(opened).list("cust-A")
    assert [m.fact for m in kept] == [MASKED]
    # Only the places docs/people.md names keep the answer: never a memory, its keyword index, or a journal
    # entry of the memory (embedding, memory_recall).
    kept_at = _where_kept(store, SECRET)
    assert {table for table, _ in kept_at} <= {"journal", "pending_items"}, kept_at
    assert {kind for table, kind in kept_at if table == "journal"} <= {"tool", "model"}, kept_at


def test_a_secret_persons_answer_is_masked_before_memory_saves_or_embeds_it(
    tmp_path: Path, fake_openai: FakeOpenAI, fake_embeddings: FakeEmbeddingHTTPServer
) -> None:
    fake_openai.script(
        "support",
        [
            tool_calls(("ask_token", {"question": "What is your desk token?"})),
            tool_calls(("memory_save", {"fact": FACT})),
            text("Noted."),
        ],
    )
    store, run_id = _asked(tmp_path, fake_openai, fake_embeddings)
    answered = _answer(store, run_id, "q1", SECRET)
    assert answered.returncode == 0, answered.stderr
    assert json.loads(answered.stdout)["final_text"] == "Noted."
    fake_openai.assert_complete()
    saving = fake_openai.requests("support")[-1].request["messages"]
    assert any(m["role"] == "tool" and SECRET in str(m["content"]) for m in saving)  # the model read the answer

    _nothing_of_the_secret_in_memory(store, fake_embeddings)
    listed = teamrun("memory", "list", "--resource", "cust-A", "--store", str(store))
    assert listed.returncode == 0 and "***" in listed.stdout and SECRET not in listed.stdout
    for query, found in ((SECRET, 0), ("PDF", 1)):  # the keyword index has the fact, not the secret
        searched = teamrun(
            "memory", "search", query, "--resource", "cust-A", "--mode", "keyword", "--store", str(store), "--json"
        )
        assert searched.returncode == 0, searched.stderr
        assert len(json.loads(searched.stdout)) == found, searched.stdout


def test_a_secret_answer_replayed_from_the_journal_is_masked_too(
    tmp_path: Path, fake_openai: FakeOpenAI, fake_embeddings: FakeEmbeddingHTTPServer
) -> None:
    """The process that saves the fact was not given the secret answer: it replayed it from the run's journal (the
    run asked a second question after it, and the second answer continued it)."""
    fake_openai.script(
        "support",
        [
            tool_calls(("ask_token", {"question": "What is your desk token?"})),
            tool_calls(("ask_plan", {"question": "Which plan are you on?"})),
            tool_calls(("memory_save", {"fact": FACT})),
            text("Noted."),
        ],
    )
    store, run_id = _asked(tmp_path, fake_openai, fake_embeddings)
    again = _answer(store, run_id, "q1", SECRET)
    assert again.returncode == 4, again.stderr  # it asks the plan next
    assert "q2" in again.stderr and SECRET not in again.stderr
    answered = _answer(store, run_id, "q2", "business")
    assert answered.returncode == 0, answered.stderr
    assert json.loads(answered.stdout)["final_text"] == "Noted."
    fake_openai.assert_complete()

    _nothing_of_the_secret_in_memory(store, fake_embeddings)
