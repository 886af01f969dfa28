"""Issue 44: `teamrun memory forget --resource A` forgets everything of A, its runs' journals included.

A run of A saved a fact (its journal keeps the model's ``memory_save`` arguments and the embedding); another run
of A recalled it and was SIGKILLed before its answer (its journal keeps the recall). After the forget, the store's
bytes hold the fact nowhere, and resuming the killed run recalls nothing: its prompt says nothing matches.
"""

from __future__ import annotations

import json
import signal
import threading
from pathlib import Path
from typing import Any

import sqlalchemy as sa

from teamrun.store.memory_journal import is_forgotten
from tests.cli_processes import resume, stop_when, teamrun, teamrun_argv
from tests.fakeserver import FakeOpenAI, text, tool_calls
from tests.memory.fake_embeddings import FakeEmbeddingHTTPServer
from tests.memory.test_memory_runs import _context, _run, _team

FACT = "The customer's parrot is called Zanzibar-Quokka"
MARK = b"Zanzibar"
QUESTION = "What is my parrot called?"


def _journal(store: Path) -> list[tuple[str, dict[str, Any]]]:
    engine = sa.create_engine(f"sqlite:///{store}")
    try:
        with engine.connect() as conn:
            rows = conn.execute(sa.text("SELECT kind, payload FROM journal ORDER BY run_id, seq")).all()
            return [(str(kind), json.loads(payload)) for kind, payload in rows]
    finally:
        engine.dispose()


def test_forget_redacts_the_runs_journals_and_a_resumed_run_recalls_nothing(
    tmp_path: Path, fake_openai: FakeOpenAI, fake_embeddings: FakeEmbeddingHTTPServer
) -> None:
    server, store = fake_openai, tmp_path / "teamrun.db"
    team = _team(tmp_path, server, fake_embeddings)
    server.script("support", [tool_calls(("memory_save", {"fact": FACT})), text("Noted.")])
    _run(team, store, "Please remember the name of my parrot.", "--resource", "cust-A")
    server.script("support", [text("Noted too.")])
    _run(team, store, "Please remember the name of my parrot.", "--resource", "cust-B")

    hanging = threading.Event()
    hanging.set()
    server.handler("support", lambda request: text("It is a secret.", delay=600.0 if hanging.is_set() else None))
    argv = teamrun_argv("execute", str(team), "-i", QUESTION, "--store", str(store), "--progress", "none")
    code = stop_when(
        [*argv, "--resource", "cust-A"],
        lambda: len(server.requests("support")) == 4,  # recalled, asked the model, not answered
        where=lambda: f"{len(server.requests('support'))} model call(s)",
    )
    assert code == -signal.SIGKILL
    assert FACT in _context(server.requests("support")[-1])
    assert sum(MARK in path.read_bytes() for path in tmp_path.glob("teamrun.db*")) >= 1

    done = teamrun("memory", "forget", "--resource", "cust-A", "--store", str(store), "--json")
    assert done.returncode == 0, done.stderr
    said = json.loads(done.stdout)
    assert said["memories"] == 1 and said["runs"] == 2 and said["journal_entries"] >= 4, said
    for path in tmp_path.glob("teamrun.db*"):  # the file and its WAL
        assert MARK not in path.read_bytes(), path.name
    kinds = [kind for kind, payload in _journal(store) if is_forgotten(payload)]
    assert {"memory_recall", "embedding", "tool"} <= set(kinds)
    assert any(kind == "embedding" and not is_forgotten(p) for kind, p in _journal(store))  # cust-B's run is kept

    listed = teamrun("runs", "list", "--store", str(store), "--json")
    killed = [run for run in json.loads(listed.stdout) if run["status"] == "interrupted"]
    assert len(killed) == 1
    hanging.clear()
    server.handler("support", lambda request: text("I do not know its name."))
    resumed = resume(killed[0]["run_id"], str(store))
    assert resumed.returncode == 0, resumed.stderr
    again = _context(server.requests("support")[-1])
    assert "Zanzibar" not in again and "Nothing saved about this user matches yet" in again
    for path in tmp_path.glob("teamrun.db*"):
        assert MARK not in path.read_bytes(), path.name
