"""Long-term memory in the store: scoped recall, dedupe, TTL, caps, provenance, forget (bytes gone), working
memory, the per-resource vector cache across processes (SQLite, and PostgreSQL where marked)."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import sqlalchemy as sa

from teamrun.errors import UserError
from teamrun.llm.embedding import offline_vector
from teamrun.store import migrations as migrations_module
from teamrun.store import open_store
from teamrun.store.memory import (
    MemoryLimits,
    MemoryRefused,
    MemoryStore,
    Provenance,
    check_resource_id,
)

NOW = 1_700_000_000.0  # in the past: a short TTL from NOW has expired by the real clock


def _prov(agent: str = "support", run: str = "r1", thread: str = "t1", at: float = NOW) -> Provenance:
    return Provenance(run_id=run, thread_id=thread, agent=agent, saved_at=at)


def _save(memory: MemoryStore, resource: str, fact: str, **kwargs: object) -> object:
    return memory.save(resource, fact, offline_vector(fact), kwargs.pop("prov", _prov()), **kwargs)  # type: ignore[arg-type]


def _search(memory: MemoryStore, resource: str, query: str, **kwargs: object) -> list[str]:
    found = memory.search(resource, query, offline_vector(query), **kwargs)  # type: ignore[arg-type]
    return [r.memory.fact for r in found]


def test_recall_is_scoped_to_the_resource_even_for_the_other_resources_exact_words(store_url: str) -> None:
    with open_store(store_url) as store:
        memory = MemoryStore(store)
        _save(memory, "customer-a", "Alice prefers invoices by email in PDF format")
        _save(memory, "customer-a", "Alice's account number is 7781")
        _save(memory, "customer-b", "Bob likes phone calls on Monday mornings")
        assert _search(memory, "customer-a", "how does Alice want her invoices?")[0].startswith("Alice prefers")
        for query in ("Alice prefers invoices by email in PDF format", "account number 7781", "*", '" OR 1=1 --'):
            for mode in ("hybrid", "vector", "keyword"):
                found = memory.search("customer-b", query, offline_vector(query), mode=mode)  # type: ignore[arg-type]
                assert all(r.memory.resource == "customer-b" for r in found), (query, mode)
                assert not any("Alice" in r.memory.fact for r in found)
        assert [m.fact for m in memory.list("customer-b")] == ["Bob likes phone calls on Monday mornings"]
        assert memory.search("nobody", "Alice", offline_vector("Alice")) == []


def test_scores_are_in_zero_one_and_each_mode_reports_its_parts(tmp_path: Path) -> None:
    with open_store(tmp_path / "m.db") as store:
        memory = MemoryStore(store)
        for fact in ("The customer's favourite colour is green", "The office is in Lyon", "Invoices go to finance"):
            _save(memory, "acme", fact)
        query = "what colour does the customer like?"
        hybrid = memory.search("acme", query, offline_vector(query), k=3)
        assert hybrid[0].memory.fact.startswith("The customer's favourite colour")
        assert all(0.0 <= r.score <= 1.0 for r in hybrid)
        assert [r.score for r in hybrid] == sorted((r.score for r in hybrid), reverse=True)
        assert hybrid[0].vector_score is not None and hybrid[0].keyword_score == 1.0
        vector = memory.search("acme", query, offline_vector(query), mode="vector")
        assert vector[0].keyword_score is None and vector[0].score == vector[0].vector_score
        keyword = memory.search("acme", query, None, mode="keyword")
        assert keyword[0].vector_score is None and keyword[0].memory.fact.startswith("The customer's")
        assert memory.search("acme", query, offline_vector(query), min_score=0.99) == []
        with pytest.raises(MemoryRefused, match="needs the query's embedding"):
            memory.search("acme", query, None)


def test_the_same_fact_saved_twice_is_one_memory_with_the_first_provenance(tmp_path: Path) -> None:
    with open_store(tmp_path / "m.db") as store:
        memory = MemoryStore(store)
        first = memory.save("u1", "Prefers tea.", offline_vector("Prefers tea."), _prov(agent="a", run="r1"))
        again = memory.save("u1", "  prefers   TEA ", offline_vector("prefers tea"), _prov(agent="b", run="r2"))
        other = memory.save("u2", "Prefers tea.", offline_vector("Prefers tea."), _prov())
        assert first.created and not again.created and other.created
        assert again.memory.id == first.memory.id != other.memory.id
        assert again.memory.provenance == Provenance("r1", "t1", "a", NOW)
        assert [m.fact for m in memory.list("u1")] == ["Prefers tea."]


def test_expired_memories_are_never_recalled_and_are_removed_on_save(tmp_path: Path) -> None:
    with open_store(tmp_path / "m.db") as store:
        memory = MemoryStore(store)
        saved = _save(memory, "u1", "The door code is 4411", ttl_s=60, prov=_prov(at=NOW))
        assert saved.memory.expires_at == NOW + 60  # type: ignore[attr-defined]
        assert _search(memory, "u1", "door code", now=NOW + 30) == ["The door code is 4411"]
        for mode in ("hybrid", "vector", "keyword"):
            assert memory.search("u1", "door code", offline_vector("door code"), now=NOW + 61, mode=mode) == []  # type: ignore[arg-type]
        assert memory.list("u1") == []  # listed "now": long after NOW + 60
        _save(memory, "u1", "Likes jazz")
        with store.engine.connect() as conn:
            facts = conn.execute(sa.text("SELECT fact FROM memories WHERE resource = 'u1'")).scalars().all()
            assert facts == ["Likes jazz"]
            assert conn.execute(sa.text("SELECT count(*) FROM memories_fts WHERE fact LIKE '%door%'")).scalar() == 0


def test_caps_per_fact_and_per_resource_are_refused_with_what_to_do(tmp_path: Path) -> None:
    with open_store(tmp_path / "m.db") as store:
        memory = MemoryStore(store)
        limits = MemoryLimits(max_fact_chars=20, max_memories_per_resource=2)
        with pytest.raises(MemoryRefused, match=r"21 characters long; a memory holds at most 20"):
            _save(memory, "u1", "x" * 21, limits=limits)
        _save(memory, "u1", "fact one", limits=limits)
        _save(memory, "u1", "fact two", limits=limits)
        assert not _save(memory, "u1", "Fact one.", limits=limits).created  # type: ignore[attr-defined]
        with pytest.raises(MemoryRefused, match=r"'u1' already has 2 memories.*forget some"):
            _save(memory, "u1", "fact three", limits=limits)
        _save(memory, "u2", "fact three", limits=limits)
        with pytest.raises(MemoryRefused, match="empty"):
            _save(memory, "u1", "   ")


def test_a_vector_of_another_size_is_refused_on_save_and_search(tmp_path: Path) -> None:
    with open_store(tmp_path / "m.db") as store:
        memory = MemoryStore(store)
        memory.save("u1", "a fact", [1.0, 0.0, 0.0], _prov())
        with pytest.raises(MemoryRefused, match=r"has 2 dimensions but the memories of 'u1' have 3"):
            memory.save("u1", "another fact", [1.0, 0.0], _prov())
        with pytest.raises(MemoryRefused, match=r"query's embedding has 4 dimensions.*have 3"):
            memory.search("u1", "a fact", [1.0, 0.0, 0.0, 0.0])
        with pytest.raises(MemoryRefused, match="no direction"):
            memory.save("u1", "zero", [0.0, 0.0, 0.0], _prov())
        with pytest.raises(MemoryRefused, match="no direction"):
            memory.save("u1", "nan", [math.nan, 1.0, 0.0], _prov())
        memory.save("u2", "two dims is fine elsewhere", [0.0, 1.0], _prov())


@pytest.mark.parametrize(
    ("resource", "message"),
    [
        ("", "empty"),
        ("   ", "empty"),
        ("x" * 201, "201 characters long; at most 200"),
        ("a\nb", r"not printable text \(U\+000A\)"),
        ("a\x00b", r"not printable text \(U\+0000\)"),
        ("bad\udcff", r"not printable text \(U\+DCFF\)"),
        (42, "is text.*not a number"),
        (None, "not null"),
    ],
)
def test_a_bad_resource_id_is_refused_clearly(resource: object, message: str) -> None:
    with pytest.raises(MemoryRefused, match=message) as caught:
        check_resource_id(resource)
    assert isinstance(caught.value, UserError)


def test_a_good_resource_id_is_returned_unchanged() -> None:
    assert check_resource_id("customer-42") == "customer-42"
    assert check_resource_id("org:Société Générale/équipe 7") == "org:Société Générale/équipe 7"
    assert check_resource_id("x" * 200) == "x" * 200


def test_forget_removes_everything_of_a_resource_and_the_file_keeps_no_bytes_of_it(tmp_path: Path) -> None:
    path = tmp_path / "m.db"
    secret_facts = [f"Zanzibar-{i} quokka preference number {i} for customer A" for i in range(40)]
    with open_store(path) as store:
        memory = MemoryStore(store)
        for fact in secret_facts:
            _save(memory, "customer-a", fact)
        _save(memory, "customer-b", "Bob keeps the wombat")
        memory.save_working("customer-a", "support", "profile", 3, {"name": "Zanzibar-profile quokka"})
        memory.save_working("customer-b", "support", "profile", 1, {"name": "Bob"})
        assert _search(memory, "customer-a", "quokka preference")  # the cache holds A's matrix now
        forgotten = memory.forget("customer-a")
        assert (forgotten.resource, forgotten.memories, forgotten.working_memory) == ("customer-a", 40, 1)
        for mode in ("hybrid", "vector", "keyword"):
            assert memory.search("customer-a", "quokka", offline_vector("quokka"), mode=mode) == []  # type: ignore[arg-type]
        assert memory.list("customer-a") == [] and memory.load_working("customer-a", "support") == {}
        assert [m.fact for m in memory.list("customer-b")] == ["Bob keeps the wombat"]
        assert memory.load_working("customer-b", "support") == {"profile": (1, {"name": "Bob"})}
        assert memory.forget("customer-a").memories == 0
    files = [p for p in tmp_path.iterdir() if p.name.startswith("m.db")]
    content = b"".join(p.read_bytes() for p in files)
    assert b"wombat" in content  # B's fact is still there: the check below can see facts
    assert b"Zanzibar" not in content and b"quokka" not in content
    assert b"customer-a" not in content


def test_forget_is_one_transaction(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with open_store(tmp_path / "m.db") as store:
        memory = MemoryStore(store)
        _save(memory, "u1", "keeps everything")
        memory.save_working("u1", "team", "entry", 1, [1, 2])

        def broken(*_args: object) -> None:
            raise sa.exc.OperationalError("DELETE", {}, Exception("disk I/O error"))

        original = sa.Connection.execute

        def failing_on_generations(self: sa.Connection, statement: object, *args: object, **kw: object) -> object:
            if "DELETE FROM memory_generations" in str(statement):
                broken()
            return original(self, statement, *args, **kw)  # type: ignore[arg-type]

        monkeypatch.setattr(sa.Connection, "execute", failing_on_generations)
        with pytest.raises(UserError, match=r"cannot forget the memories of 'u1'.*disk I/O error"):
            memory.forget("u1")
        monkeypatch.undo()
        assert [m.fact for m in memory.list("u1")] == ["keeps everything"]  # nothing half-removed
        assert memory.load_working("u1", "team") == {"entry": (1, [1, 2])}


def test_another_process_save_is_seen_by_a_cached_matrix(tmp_path: Path) -> None:
    path = tmp_path / "m.db"
    with open_store(path) as one, open_store(path) as two:
        reader, writer = MemoryStore(one), MemoryStore(two)
        _save(writer, "u1", "The cat is called Miso")
        assert _search(reader, "u1", "cat name", mode="vector") == ["The cat is called Miso"]
        _save(writer, "u1", "The dog is called Pixel")
        assert "The dog is called Pixel" in _search(reader, "u1", "dog name", mode="vector")
        writer.forget("u1")
        assert _search(reader, "u1", "dog name", mode="vector") == []
        _save(writer, "u1", "The fish is called Bubbles")
        assert _search(reader, "u1", "dog fish name", mode="vector") == ["The fish is called Bubbles"]


def test_working_memory_is_one_record_per_resource_team_and_entry(store_url: str) -> None:
    with open_store(store_url) as store:
        memory = MemoryStore(store)
        memory.save_working("u1", "support", "profile", 1, {"tier": "gold"})
        memory.save_working("u1", "support", "profile", 2, {"tier": "platinum"})
        memory.save_working("u1", "support", "notes", 1, ["likes tea"])
        memory.save_working("u1", "sales", "profile", 7, None)
        memory.save_working("u2", "support", "profile", 1, {"tier": "bronze"})
        assert memory.load_working("u1", "support") == {
            "profile": (2, {"tier": "platinum"}),
            "notes": (1, ["likes tea"]),
        }
        assert memory.load_working("u1", "sales") == {"profile": (7, None)}
        assert memory.forget("u1").working_memory == 3
        assert memory.load_working("u2", "support") == {"profile": (1, {"tier": "bronze"})}
        with pytest.raises(MemoryRefused, match="not JSON data"):
            memory.save_working("u2", "support", "bad", 1, object())


def test_a_version_3_store_is_upgraded_to_hold_memories(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    with open_store(path) as store, store.engine.begin() as conn:  # made a version 3 store by hand
        for table in ("memories_fts", "memories", "memory_generations", "memory_working"):
            conn.execute(sa.text(f"DROP TABLE {table}"))
        conn.execute(sa.text("DELETE FROM schema_version WHERE version > 3"))
    with open_store(path) as store, store.engine.connect() as conn:
        assert migrations_module.current_version(conn) == migrations_module.latest_version()
        memory = MemoryStore(store)
        _save(memory, "u1", "upgraded stores remember")
        assert _search(memory, "u1", "remember", mode="keyword") == ["upgraded stores remember"]


def test_secrets_are_masked_before_a_fact_or_working_memory_is_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CRM_API_TOKEN", "tok-very-secret-4242")
    path = tmp_path / "m.db"
    with open_store(path) as store:
        memory = MemoryStore(store)
        saved = _save(memory, "u1", "The CRM token is tok-very-secret-4242, keep it")
        memory.save_working("u1", "support", "profile", 1, {"token": "tok-very-secret-4242"})
        assert "tok-very-secret-4242" not in saved.memory.fact  # type: ignore[attr-defined]
        assert memory.list("u1")[0].fact == "The CRM token is ***${CRM_API_TOKEN}***, keep it"
        assert memory.load_working("u1", "support") == {"profile": (1, {"token": "***${CRM_API_TOKEN}***"})}
    content = b"".join(p.read_bytes() for p in tmp_path.iterdir() if p.name.startswith("m.db"))
    assert b"tok-very-secret-4242" not in content


def test_two_processes_saving_the_same_fact_at_once_make_one_memory(tmp_path: Path) -> None:
    import threading

    path = tmp_path / "m.db"
    open_store(path).close()
    results: list[bool] = []
    barrier = threading.Barrier(4)

    def save() -> None:
        with open_store(path) as store:
            memory = MemoryStore(store)
            barrier.wait()
            results.append(_save(memory, "new-resource", "Same fact, saved at once").created)  # type: ignore[attr-defined]

    workers = [threading.Thread(target=save) for _ in range(4)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    assert sorted(results) == [False, False, False, True]
    with open_store(path) as store:
        assert len(MemoryStore(store).list("new-resource")) == 1


def test_a_large_resource_s_common_words_are_left_out_of_the_keyword_match(tmp_path: Path) -> None:
    with open_store(tmp_path / "m.db") as store:
        memory = MemoryStore(store)
        limits = MemoryLimits(max_memories_per_resource=1000)
        for number in range(600):
            fact = f"The customer's record {number} mentions item{number}"
            memory.save("big", fact, offline_vector(fact), _prov(), limits=limits)
        memory.save("big", "The customer keeps a zebra", offline_vector("zebra"), _prov(), limits=limits)
        matches: list[str] = []

        def seen(_conn: object, _cursor: object, statement: str, parameters: object, *_rest: object) -> None:
            if "MATCH" in statement:
                matches.append(str(parameters))

        sa.event.listen(store.engine, "before_cursor_execute", seen)
        found = memory.search("big", "customer zebra", None, mode="keyword")
        assert found[0].memory.fact == "The customer keeps a zebra"
        assert '"zebra"' in matches[-1] and '"customer"' not in matches[-1]
        assert memory.search("big", "customer", None, mode="keyword", k=3)  # only common words: kept
        assert '"customer"' in matches[-1]


def test_a_keyword_search_finds_other_forms_of_a_word(store_url: str) -> None:
    with open_store(store_url) as store:
        memory = MemoryStore(store)
        _save(memory, "u1", "Invoices are shipped on Mondays")
        _save(memory, "u1", "The cat sleeps all day")
        for query in ("invoice", "shipping", "monday", "o'brien's \\ invoice"):
            found = memory.search("u1", query, None, mode="keyword")
            assert [r.memory.fact for r in found] == ["Invoices are shipped on Mondays"], query


def test_the_vector_cache_keeps_the_recently_searched_resources_within_its_budget(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import teamrun.store.memory as memory_module

    monkeypatch.setattr(memory_module, "CACHE_BYTES", 4 * 256 * 4)  # four offline vectors: two resources here
    with open_store(tmp_path / "m.db") as store:
        memory = MemoryStore(store)
        for resource in ("a", "b", "c"):
            _save(memory, resource, f"{resource} likes tea")
            _save(memory, resource, f"{resource} likes jazz")
        for resource in ("a", "b", "c", "a"):
            assert _search(memory, resource, "tea", k=1) == [f"{resource} likes tea"]
        assert list(memory._cache) == ["c", "a"]  # the least recently searched went first
        assert _search(memory, "c", "jazz", k=1) == ["c likes jazz"]
        assert list(memory._cache) == ["a", "c"]
        assert _search(memory, "b", "jazz", k=1) == ["b likes jazz"]  # read again
        assert list(memory._cache) == ["c", "b"]


def test_saves_of_one_resource_at_once_never_pass_its_cap(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two saves (two processes, or one turn's parallel tool calls) that both counted the resource below its cap
    before either inserted would both insert: the count and the insert are one step under the resource's lock."""
    import threading

    path = tmp_path / "m.db"
    limits = MemoryLimits(max_memories_per_resource=2)
    with open_store(path) as store:
        _save(MemoryStore(store), "u1", "fact zero", limits=limits)
    both_counting = threading.Barrier(2)
    expire = MemoryStore._drop_expired

    def meet_then_expire(self: MemoryStore, conn: sa.Connection, resource: str, now: float) -> None:
        expire(self, conn, resource, now)
        try:  # unlocked, both saves are here before either inserts; locked, the second waits for the first
            both_counting.wait(timeout=3)
        except threading.BrokenBarrierError:
            pass

    monkeypatch.setattr(MemoryStore, "_drop_expired", meet_then_expire)
    outcomes: list[str] = []

    def save(fact: str) -> None:
        with open_store(path) as store:
            try:
                _save(MemoryStore(store), "u1", fact, limits=limits)
                outcomes.append("saved")
            except MemoryRefused as exc:
                outcomes.append(str(exc))

    workers = [threading.Thread(target=save, args=(f"fact {name}",)) for name in ("one", "two")]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    assert sorted(outcomes)[0].startswith("'u1' already has 2 memories")
    assert outcomes.count("saved") == 1
    with open_store(path) as store:
        assert len(MemoryStore(store).list("u1")) == 2


def test_a_full_resource_refuses_a_new_fact_before_it_is_embedded(tmp_path: Path) -> None:
    with open_store(tmp_path / "m.db") as store:
        memory = MemoryStore(store)
        limits = MemoryLimits(max_memories_per_resource=1)
        _save(memory, "u1", "fact one", limits=limits)
        memory.check_room("u1", "Fact one.", limits)  # already saved: no new memory
        memory.check_room("u2", "fact two", limits)
        with pytest.raises(MemoryRefused, match=r"'u1' already has 1 memories.*forget some"):
            memory.check_room("u1", "fact two", limits)
