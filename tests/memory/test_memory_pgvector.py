"""Long-term memory on a PostgreSQL server with pgvector (PyPI's ``pgserver``, tests/pgserver.py): the embeddings are
also kept in a ``vector`` column and a search ranks them in SQL, scoped to the resource in the query itself, with the
same results as the in-process scoring; forget leaves nothing; a server or database without the extension keeps
(or falls back to) in-process scoring, never an error."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy.engine import make_url

from teamrun.llm.embedding import offline_vector
from teamrun.store import open_store
from teamrun.store.memory import MemoryStore, Provenance
from tests.fakeserver import FakeOpenAI, text, tool_calls
from tests.memory.fake_embeddings import FakeEmbeddingHTTPServer
from tests.memory.test_memory_runs import INVOICES, QUESTION, _context, _run, _team
from tests.pgserver import new_database

FACTS = {
    "customer-a": [
        "Alice prefers invoices by email in PDF format",
        "Alice's account number is 7781",
        "Alice lives in Lyon and speaks French",
        "Alice pays by bank transfer at the end of the month",
        "Alice's favourite colour is green",
        "Alice ordered three printers in March",
    ],
    "customer-b": [
        "Bob likes phone calls on Monday mornings",
        "Bob's invoices go to the finance department",
        "Bob's company has twelve offices in Spain",
    ],
}
QUERIES = [
    "how does Alice want her invoices?",
    "account number",
    "where does she live",
    "printers ordered",
    "green",
    "payment by transfer",
]


@pytest.fixture
def pgvector_url(pgvector_server: str) -> str:
    """A fresh database on the pgvector server (the extension available, not yet created in it)."""
    return new_database(pgvector_server)


def _fill(memory: MemoryStore) -> None:
    for resource, facts in FACTS.items():
        for i, fact in enumerate(facts):
            memory.save(resource, fact, offline_vector(fact), Provenance("r1", "t1", "support", 1.7e9 + i))


def _ranked(memory: MemoryStore, resource: str, query: str, mode: str) -> list[tuple[str, float]]:
    found = memory.search(resource, query, offline_vector(query), k=5, mode=mode)  # type: ignore[arg-type]
    return [(r.memory.fact, r.score) for r in found]


def _as_superuser(url: str, *statements: str) -> None:
    engine = sa.create_engine(url, isolation_level="AUTOCOMMIT")
    try:
        with engine.connect() as conn:
            for statement in statements:
                conn.exec_driver_sql(statement)
    finally:
        engine.dispose()


class _Statements:
    """The SQL statements an engine runs meanwhile."""

    def __init__(self, engine: sa.Engine) -> None:
        self.engine = engine
        self.seen: list[str] = []

    def _record(self, _conn: Any, _cursor: Any, statement: str, *_args: Any) -> None:
        self.seen.append(statement)

    def __enter__(self) -> _Statements:
        sa.event.listen(self.engine, "before_cursor_execute", self._record)
        return self

    def __exit__(self, *_exc: object) -> None:
        sa.event.remove(self.engine, "before_cursor_execute", self._record)


def test_recall_through_pgvector_is_ranked_in_sql_and_scoped_to_the_resource_even_for_its_exact_words(
    pgvector_url: str,
) -> None:
    with open_store(pgvector_url) as store:
        memory = MemoryStore(store)
        assert memory.vector_backend == "pgvector"
        _fill(memory)
        with store.engine.connect() as conn:
            kept = conn.execute(sa.text("SELECT count(*) FROM memories WHERE embedding IS NOT NULL")).scalar_one()
        assert kept == sum(len(facts) for facts in FACTS.values())
        assert _ranked(memory, "customer-a", "how does Alice want her invoices?", "vector")[0][0].startswith(
            "Alice prefers"
        )
        with _Statements(store.engine) as statements:
            for query in (*FACTS["customer-a"][:2], "account number 7781", "*", '" OR 1=1 --'):
                for mode in ("hybrid", "vector", "keyword"):
                    found = memory.search("customer-b", query, offline_vector(query), mode=mode)  # type: ignore[arg-type]
                    assert all(r.memory.resource == "customer-b" for r in found), (query, mode)
                    assert not any("Alice" in r.memory.fact for r in found), (query, mode)
        ranking = [s for s in statements.seen if "<=>" in s]
        assert ranking, "no search ranked the vectors in SQL"
        assert all("resource = " in s.split("ORDER BY")[0] for s in ranking)  # scoped in the query itself
        assert memory.search("nobody", "Alice", offline_vector("Alice")) == []


def test_pgvector_ranks_the_same_memories_as_the_in_process_scoring(pgvector_url: str, postgres_server: str) -> None:
    with open_store(pgvector_url) as with_pgvector, open_store(new_database(postgres_server)) as without:
        sql, in_process = MemoryStore(with_pgvector), MemoryStore(without)
        assert (sql.vector_backend, in_process.vector_backend) == ("pgvector", "numpy")
        _fill(sql)
        _fill(in_process)
        for query in QUERIES:
            for mode in ("hybrid", "vector", "keyword"):
                ours, theirs = _ranked(sql, "customer-a", query, mode), _ranked(in_process, "customer-a", query, mode)
                assert [fact for fact, _ in ours] == [fact for fact, _ in theirs], (query, mode)
                assert [score for _, score in ours] == pytest.approx([score for _, score in theirs], abs=1e-5)


def test_forget_removes_the_resource_s_vectors_with_its_memories(pgvector_url: str) -> None:
    with open_store(pgvector_url) as store:
        memory = MemoryStore(store)
        _fill(memory)
        gone = memory.forget("customer-a")
        assert gone.memories == len(FACTS["customer-a"])
        with store.engine.connect() as conn:
            left = conn.execute(
                sa.text("SELECT resource, count(embedding) FROM memories GROUP BY resource ORDER BY resource")
            ).all()
        assert [tuple(row) for row in left] == [("customer-b", len(FACTS["customer-b"]))]
        assert memory.search("customer-a", "invoices", offline_vector("invoices")) == []
        assert _ranked(memory, "customer-b", "phone calls", "vector")[0][0].startswith("Bob likes phone calls")


def _plain_role(url: str) -> str:
    """The URL of the database as a role that owns it (and what it makes) but is no superuser."""
    parsed = make_url(url)
    plain = f"plain_{parsed.database}"  # roles are the server's: one per database
    _as_superuser(
        url,
        f"CREATE ROLE {plain} LOGIN",
        f'ALTER DATABASE "{parsed.database}" OWNER TO {plain}',
        f"ALTER SCHEMA public OWNER TO {plain}",
    )
    return parsed.set(username=plain).render_as_string(hide_password=False)


def test_a_store_written_with_pgvector_falls_back_to_in_process_scoring_without_the_extension(
    pgvector_url: str,
) -> None:
    as_plain = _plain_role(pgvector_url)
    _as_superuser(pgvector_url, "CREATE EXTENSION vector")
    with open_store(as_plain) as store:
        memory = MemoryStore(store)
        assert memory.vector_backend == "pgvector"
        _fill(memory)
        before = {(q, m): _ranked(memory, "customer-a", q, m) for q in QUERIES for m in ("hybrid", "vector")}
    _as_superuser(pgvector_url, "DROP EXTENSION vector CASCADE")  # gone from the database; plain may not create it
    with open_store(as_plain) as store:
        memory = MemoryStore(store)
        assert memory.vector_backend == "numpy"
        after = {(q, m): _ranked(memory, "customer-a", q, m) for q in QUERIES for m in ("hybrid", "vector")}
        assert {key: [fact for fact, _ in found] for key, found in after.items()} == {
            key: [fact for fact, _ in found] for key, found in before.items()
        }
        late = "Alice wants a call before any delivery"
        memory.save("customer-a", late, offline_vector(late), Provenance("r2", "t2", "support", 1.8e9))
    _as_superuser(pgvector_url, "CREATE EXTENSION vector")  # back again: the fact saved meanwhile is ranked in SQL
    with open_store(as_plain) as store:
        memory = MemoryStore(store)
        assert memory.vector_backend == "pgvector"
        assert _ranked(memory, "customer-a", late, "vector")[0][0] == late
        with store.engine.connect() as conn:  # a resource's memories get their embedding at its first search
            missing = sa.text("SELECT resource, count(*) FROM memories WHERE embedding IS NULL GROUP BY resource")
            assert [tuple(row) for row in conn.execute(missing)] == [("customer-b", len(FACTS["customer-b"]))]


def test_a_role_that_may_not_create_the_extension_keeps_in_process_scoring_until_a_superuser_does(
    pgvector_url: str,
) -> None:
    as_plain = _plain_role(pgvector_url)
    with open_store(as_plain) as store:
        memory = MemoryStore(store)
        assert memory.vector_backend == "numpy"  # pgvector is not a trusted extension: no error, in process
        _fill(memory)
        assert _ranked(memory, "customer-a", "account number", "hybrid")[0][0] == "Alice's account number is 7781"
    _as_superuser(pgvector_url, "CREATE EXTENSION vector")  # what docs/memory.md tells the administrator to run
    with open_store(as_plain) as store:
        memory = MemoryStore(store)
        assert memory.vector_backend == "pgvector"  # no superuser needed once it is in the database
        assert _ranked(memory, "customer-a", "account number", "hybrid")[0][0] == "Alice's account number is 7781"


def test_a_server_without_pgvector_scores_in_process(postgres_server: str) -> None:
    with open_store(new_database(postgres_server)) as store:
        memory = MemoryStore(store)
        assert memory.vector_backend == "numpy"
        _fill(memory)
        assert _ranked(memory, "customer-b", "phone calls", "hybrid")[0][0].startswith("Bob likes phone calls")


def test_execute_saves_and_recalls_through_pgvector(
    tmp_path: Path, pgvector_url: str, fake_openai: FakeOpenAI, fake_embeddings: FakeEmbeddingHTTPServer
) -> None:
    server = fake_openai
    team = _team(tmp_path, server, fake_embeddings)
    store: Any = pgvector_url  # `--store` takes a URL as well as a path
    server.script("support", [tool_calls(("memory_save", {"fact": INVOICES})), text("Noted.")])
    _run(team, store, "Please remember: invoices by email, as PDF.", "--resource", "cust-A", "--thread", "t1")
    server.script("support", [text("By email, as PDF.")])
    _run(team, store, QUESTION, "--resource", "cust-A", "--thread", "t2")
    assert INVOICES in _context(server.requests("support")[-1])
    server.script("support", [text("I do not know yet.")])
    _run(team, store, QUESTION, "--resource", "cust-B", "--thread", "t3")
    assert INVOICES not in _context(server.requests("support")[-1])
    server.assert_complete()
    with open_store(pgvector_url) as opened:
        assert MemoryStore(opened).vector_backend == "pgvector"
        with opened.engine.connect() as conn:
            rows = conn.execute(sa.text("SELECT resource, embedding IS NOT NULL FROM memories")).all()
        assert [tuple(row) for row in rows] == [("cust-A", True)]


def test_an_extension_dropped_while_a_process_uses_it_falls_back_in_that_process(pgvector_url: str) -> None:
    """docs/memory.md: without the extension, search and save score the kept bytes in process, with no error —
    also in a process that was ranking through pgvector when it was dropped (a long-lived `teamrun serve`)."""
    as_plain = _plain_role(pgvector_url)
    _as_superuser(pgvector_url, "CREATE EXTENSION vector")
    with open_store(as_plain) as store:
        memory = MemoryStore(store)
        assert memory.vector_backend == "pgvector"
        _fill(memory)
        before = {(q, m): _ranked(memory, "customer-a", q, m) for q in QUERIES for m in ("hybrid", "vector")}
        _as_superuser(pgvector_url, "DROP EXTENSION vector CASCADE")  # this role may not create it again
        after = {(q, m): _ranked(memory, "customer-a", q, m) for q in QUERIES for m in ("hybrid", "vector")}
        assert memory.vector_backend == "numpy"
        assert {key: [fact for fact, _ in found] for key, found in after.items()} == {
            key: [fact for fact, _ in found] for key, found in before.items()
        }
        late = "Alice wants a call before any delivery"
        memory.save("customer-a", late, offline_vector(late), Provenance("r2", "t2", "support", 1.8e9))
        assert _ranked(memory, "customer-a", late, "vector")[0][0] == late
