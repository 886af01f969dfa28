"""`teamrun memory list|search|forget --resource ID`: what a store remembers of a resource, from the command line
(in process, through ``main``); bad input is a clear error, never a traceback."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from teamrun.cli import main
from teamrun.llm.embedding import offline_vector
from teamrun.store import open_store
from teamrun.store.memory import MemoryStore, Provenance

FACTS = {
    "customer-a": ["Alice wants invoices by email as PDF", "Alice's cat is called Miso"],
    "customer-b": ["Bob pays by bank transfer"],
}


@pytest.fixture
def store_path(tmp_path: Path) -> Path:
    path = tmp_path / "teamrun.db"
    with open_store(path) as store:
        memory = MemoryStore(store)
        for resource, facts in FACTS.items():
            for number, fact in enumerate(facts):
                memory.save(resource, fact, offline_vector(fact), Provenance("r1", "t1", "support", 1.7e9 + number))
        memory.save_working("customer-a", "support", "profile", 2, {"tier": "gold"})
    return path


def test_list_shows_a_resource_s_memories_only(store_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["memory", "list", "--resource", "customer-a", "--store", str(store_path)]) == 0
    out = capsys.readouterr().out
    assert "Alice's cat is called Miso" in out and "Alice wants invoices" in out and "Bob" not in out
    assert out.splitlines()[0].split() == ["ID", "SAVED", "BY", "THREAD", "EXPIRES", "FACT"]
    assert main(["memory", "list", "--resource", "customer-b", "--store", str(store_path), "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["fact"] for r in rows] == ["Bob pays by bank transfer"]
    assert rows[0]["agent"] == "support" and rows[0]["thread_id"] == "t1" and rows[0]["resource"] == "customer-b"


def test_search_embeds_the_query_and_ranks_with_scores(store_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["memory", "search", "how should we send the invoices?", "--resource", "customer-a"]
    assert main([*argv, "--store", str(store_path), "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert rows[0]["fact"] == "Alice wants invoices by email as PDF"
    assert 0 < rows[0]["score"] <= 1 and rows[0]["vector_score"] is not None and rows[0]["keyword_score"] == 1.0
    assert main([*argv, "--store", str(store_path), "--mode", "keyword", "-k", "1"]) == 0
    out = capsys.readouterr().out
    assert "SCORE" in out.splitlines()[0] and "Alice wants invoices" in out and "Miso" not in out
    assert main(["memory", "search", "Alice invoices", "--resource", "customer-b", "--store", str(store_path)]) == 0
    captured = capsys.readouterr()
    assert "Alice" not in captured.out


def test_forget_says_what_it_removed_and_nothing_is_found_afterwards(
    store_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["memory", "forget", "--resource", "customer-a", "--store", str(store_path)]) == 0
    out = capsys.readouterr().out
    assert "forgot 'customer-a': 2 memories and 1 working-memory record removed, 0 journal entries of 0 runs" in out
    assert main(["memory", "forget", "--resource", "customer-a", "--store", str(store_path), "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == {
        "resource": "customer-a",
        "memories": 0,
        "working_memory": 0,
        "indexed_messages": 0,
        "runs": 0,
        "journal_entries": 0,
        "events": 0,
    }
    assert main(["memory", "search", "Alice", "--resource", "customer-a", "--store", str(store_path), "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == []
    assert main(["memory", "list", "--resource", "customer-b", "--store", str(store_path), "--json"]) == 0
    assert len(json.loads(capsys.readouterr().out)) == 1


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["memory", "list", "--resource", ""], "error: the resource id is empty"),
        (["memory", "forget", "--resource", "x" * 201], "error: the resource id is 201 characters long; at most 200"),
        (["memory", "list", "--resource", "a\x1b[2Jb"], "not printable text (U+001B)"),
        (["memory", "search", "q", "--resource", "bad\udcff"], "not printable text (U+DCFF)"),
        (["memory", "search", " ", "--resource", "customer-a"], "error: the query is empty"),
        (["memory", "list", "--resource", "customer-a", "--store", "{missing}"], "error: there is no store at "),
        (["memory", "forget", "--resource", "customer-a", "--store", "{missing}"], "error: there is no store at "),
        (
            [
                "memory",
                "search",
                "q",
                "--resource",
                "customer-a",
                "--embedding-model",
                "offline/x",
                "--store",
                "{small}",
            ],
            "has 256 dimensions but the memories of 'customer-a' have 3",
        ),
        (["memory", "list"], "Missing option '--resource'"),
    ],
)
def test_bad_input_is_a_clear_error_not_a_traceback(
    argv: list[str], message: str, store_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    small = tmp_path / "small.db"
    with open_store(small) as store:
        MemoryStore(store).save("customer-a", "three dims", [1.0, 0.0, 0.0], Provenance(None, None, None, 1.7e9))
    places = {"{missing}": str(tmp_path / "nope" / "none.db"), "{small}": str(small)}
    argv = [places.get(a, a) for a in argv]
    if "--store" not in argv:
        argv += ["--store", str(store_path)]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err
    assert not (tmp_path / "nope").exists()  # a read or a forget creates no store


def test_an_embedding_endpoint_that_fails_is_a_clear_error(
    store_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["memory", "search", "q", "--resource", "customer-a", "--store", str(store_path)]
    argv += ["--embedding-model", "openai/x", "--embedding-api-base", "http://127.0.0.1:1/v1"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    said = "error: cannot embed the query: embedding model 'openai/x' at http://127.0.0.1:1/v1: could not connect"
    assert said in err and "HTTP 500" not in err
    assert "Traceback" not in err


@pytest.mark.parametrize(
    ("url", "problem"),
    [
        ("not a url", "is not an http(s) URL with a host"),
        ("ftp://example.com/v1", "is not an http(s) URL with a host"),
        ("http://user:pw@example.com/v1", "carries user info; give the key with api_key_env instead"),
    ],
)
def test_an_embedding_api_base_that_is_no_endpoint_is_refused_before_any_call(
    url: str, problem: str, store_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["memory", "search", "q", "--resource", "customer-a", "--store", str(store_path)]
    argv += ["--embedding-model", "openai/x", "--embedding-api-base", url]
    assert main(argv) == 2
    err = capsys.readouterr().err
    shown = re.sub(r"//[^/@]*@", "//***@", url)  # user info is never repeated: it may be a key
    assert f"error: --embedding-api-base: {shown!r} {problem}" in err and "Traceback" not in err
