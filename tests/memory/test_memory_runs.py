"""Done-when of issue 44 (long-term memory, the engine side), end to end through the CLI: the fake provider answers
the agents (tests/fakeserver.py) and a fake embedding endpoint counts the embedding calls
(tests/memory/fake_embeddings.py).

Thread 1 saves a fact for resource A; thread 2, another process, recalls it and the model's request shows it as
quoted data; resource B's run asks the same and recalls nothing of A's. A run SIGKILLed after its recall and
before its answer resumes without paying an embedding again and with the same facts recalled (even when a better
fact was saved meanwhile). A secret given to a run reaches neither the embedding endpoint nor the store's bytes.
"""

from __future__ import annotations

import json
import signal
import threading
from pathlib import Path
from typing import Any

import sqlalchemy as sa

from teamrun.conventions import DATA_BLOCK
from teamrun.llm.caching import RUNNER_CONTEXT_HEADER
from teamrun.llm.embedding import offline_vector
from teamrun.store import open_store
from teamrun.store.memory import MemoryStore, Provenance
from tests.cli_processes import child_env, listed_run, resume, stop_when, teamrun, teamrun_argv
from tests.fakeserver import FakeOpenAI, text, tool_calls
from tests.memory.fake_embeddings import FakeEmbeddingHTTPServer

SECRET = "hush-4711-very-secret"
TEAM = """\
version: 1
name: desk
supervisor: support
defaults: {{api_base: '{url}', api_key_env: TEAMRUN_TEST_KEY, num_retries: 0, request_timeout_s: 900}}
agents:
  support:
    model: openai/support
    instructions: Help the customer. Desk code {{{{ vars.code }}}}.
vars:
  code: "${{DESK_API_KEY:-none}}"
memory:
  embedding: {{model: openai/fake-embed, api_base: '{embed_url}', api_key_env: TEAMRUN_TEST_KEY, dimensions: 16}}
  recall:
    support: {{min_score: 0.05}}
  save: [support]
"""
INVOICES = "The customer wants invoices by email as PDF"
QUESTION = "How should you send my invoices?"


def _team(tmp_path: Path, server: FakeOpenAI, embeddings: FakeEmbeddingHTTPServer) -> Path:
    path = tmp_path / "desk.yaml"
    path.write_text(TEAM.format(url=server.url, embed_url=embeddings.url))
    return path


def _run(team: Path, store: Path, task: str, *extra: str, env: dict[str, str] | None = None) -> dict[str, Any]:
    done = teamrun(
        "execute", str(team), "-i", task, "--store", str(store), "--progress", "none", "--json", *extra, env=env
    )
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def _system(record: Any) -> str:
    return str(record.request["messages"][0]["content"])


def _context(record: Any) -> str:
    """What the runner gave the agent in the request's last message (the recalled memories among it)."""
    last = record.request["messages"][-1]
    assert last["role"] == "user" and last["content"].startswith(RUNNER_CONTEXT_HEADER)
    return str(last["content"])


def test_a_fact_saved_in_one_thread_is_recalled_in_another_process_and_never_for_another_resource(
    tmp_path: Path, fake_openai: FakeOpenAI, fake_embeddings: FakeEmbeddingHTTPServer
) -> None:
    server, store = fake_openai, tmp_path / "teamrun.db"
    team = _team(tmp_path, server, fake_embeddings)
    server.script("support", [tool_calls(("memory_save", {"fact": INVOICES})), text("Noted.")])
    _run(team, store, "Please remember: invoices by email, as PDF.", "--resource", "cust-A", "--thread", "t1")
    assert fake_embeddings.calls == 2  # the recall's query (once for both turns), the fact saved
    assert [INVOICES] in fake_embeddings.inputs

    server.script("support", [text("By email, as PDF.")])
    _run(team, store, QUESTION, "--resource", "cust-A", "--thread", "t2")
    asked = _context(server.requests("support")[-1])
    assert "## Remembered facts" in asked and INVOICES in asked
    fence = asked.split(INVOICES)[0].rsplit("<<<DATA ", 1)[-1]
    assert "ref=memory-1" in fence  # quoted as a fenced data block, after the conversation
    system = _system(server.requests("support")[-1])
    assert system.startswith("Help the customer.") and INVOICES not in system

    server.script("support", [text("I do not know yet.")])
    _run(team, store, QUESTION, "--resource", "cust-B", "--thread", "t3")
    other = _context(server.requests("support")[-1])
    assert INVOICES not in other and "PDF" not in other and "Nothing saved about this user matches yet" in other
    assert fake_embeddings.calls == 4  # one query embedded per later run
    server.assert_complete()


def _journal_kinds(store: Path) -> dict[str, int]:
    engine = sa.create_engine(f"sqlite:///{store}")
    try:
        with engine.connect() as conn:
            rows = conn.execute(sa.text("SELECT kind, count(*) FROM journal GROUP BY kind")).all()
            return {str(kind): int(count) for kind, count in rows}
    except sa.exc.OperationalError:
        return {}  # not created yet
    finally:
        engine.dispose()


def test_a_run_killed_after_its_recall_resumes_without_paying_an_embedding_and_with_the_same_facts(
    tmp_path: Path, fake_openai: FakeOpenAI, fake_embeddings: FakeEmbeddingHTTPServer
) -> None:
    server, store = fake_openai, tmp_path / "teamrun.db"
    team = _team(tmp_path, server, fake_embeddings)
    _save(store, "cust-A", INVOICES)  # what an earlier thread saved
    hanging = threading.Event()
    hanging.set()
    server.handler("support", lambda request: text("By email, as PDF.", delay=600.0 if hanging.is_set() else None))
    argv = teamrun_argv("execute", str(team), "-i", QUESTION, "--store", str(store), "--progress", "none")
    code = stop_when(
        [*argv, "--resource", "cust-A"],
        lambda: len(server.requests("support")) == 1,  # recalled, asked the model, not answered
        where=lambda: f"{len(server.requests('support'))} model call(s), journal {_journal_kinds(store)}",
    )
    assert code == -signal.SIGKILL
    run = listed_run(str(store))
    assert run["status"] == "interrupted"
    kinds = _journal_kinds(store)
    assert kinds.get("embedding") == 1 and kinds.get("memory_recall") == 1 and "model" not in kinds
    paid = fake_embeddings.calls
    assert paid == 1
    first = _context(server.requests("support")[0])
    assert INVOICES in first
    newer = "The customer now wants invoices by post, on paper"
    _save(store, "cust-A", newer)  # a better match saved meanwhile: the resumed run still recalls what it did

    hanging.clear()
    resumed = resume(run["run_id"], str(store))
    assert resumed.returncode == 0, resumed.stderr
    assert json.loads(resumed.stdout)["final_text"] == "By email, as PDF."
    assert fake_embeddings.calls == paid  # 0 embedding calls re-paid
    again = _context(server.requests("support")[-1])
    assert INVOICES in again and newer not in again
    assert _blocks(again) == _blocks(first)


def test_a_secret_given_to_a_run_reaches_neither_the_embedding_endpoint_nor_the_store(
    tmp_path: Path, fake_openai: FakeOpenAI, fake_embeddings: FakeEmbeddingHTTPServer
) -> None:
    server, store = fake_openai, tmp_path / "teamrun.db"
    team = _team(tmp_path, server, fake_embeddings)
    fact = f"The customer's desk code is {SECRET} and they like PDF invoices"
    server.script("support", [tool_calls(("memory_save", {"fact": fact})), text("Noted.")])
    env = child_env(DESK_API_KEY=SECRET)
    _run(team, store, f"My code is {SECRET}; remember I like PDF invoices.", "--resource", "cust-A", env=env)
    assert SECRET in _system(server.requests("support")[0])  # the model was given it
    assert fake_embeddings.calls == 2
    assert all(SECRET.encode() not in body for body in fake_embeddings.bodies)
    assert any(b"PDF invoices" in body for body in fake_embeddings.bodies)
    with open_store(store) as opened:
        kept = MemoryStore(opened).list("cust-A")
    assert [m.fact for m in kept] == ["The customer's desk code is *** and they like PDF invoices"]
    for path in tmp_path.glob("teamrun.db*"):  # the file and its WAL
        assert SECRET.encode() not in path.read_bytes(), path.name


def test_a_bad_resource_id_is_a_clear_error_before_anything_runs(
    tmp_path: Path, fake_openai: FakeOpenAI, fake_embeddings: FakeEmbeddingHTTPServer
) -> None:
    team = _team(tmp_path, fake_openai, fake_embeddings)
    for bad, said in (("", "is empty"), ("x" * 201, "201 characters"), ("a\tb", "not printable")):
        done = teamrun("execute", str(team), "-i", QUESTION, "--resource", bad, "--store", str(tmp_path / "s.db"))
        assert done.returncode == 2, done.stderr
        assert said in done.stderr and "Traceback" not in done.stderr
    assert fake_openai.requests() == [] and fake_embeddings.calls == 0


def _save(store: Path, resource: str, fact: str) -> None:
    with open_store(store) as opened:
        MemoryStore(opened).save(resource, fact, offline_vector(fact, 16), Provenance("r0", "t0", "support", 1.0))


def _blocks(prompt: str) -> list[str]:
    """The recalled facts of a prompt, without their random fences."""
    return [match[2] for match in DATA_BLOCK.findall(prompt)]
