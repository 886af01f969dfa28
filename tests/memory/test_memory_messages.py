"""Issue 44.4: the messages the memory attack found confusing, each now saying what happened.

- a vector of another size than the resource's memories is not blamed on the model (the store cannot tell which
  model made them; an endpoint answering a wrong size for the same model is the other cause, named);
- an embedding endpoint that refuses the connection is said as such, not as HTTP 500;
- an endpoint answering something that is not a list of vectors writes no pydantic warnings on stderr;
- a fact that matched but did not fit the recall's token budget is not said as "nothing matches".
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from teamrun.engine.team import load_team
from teamrun.llm.embedding import EmbeddingFailed, embedder_for, offline_vector
from teamrun.store import open_store
from teamrun.store.memory import MemoryRefused, MemoryStore, Provenance
from teamrun.testing.scripted import ScriptedModel
from tests.cli_processes import free_port, teamrun


def test_a_vector_of_another_size_names_both_causes_not_the_model(tmp_path: Path) -> None:
    with open_store(tmp_path / "teamrun.db") as store:
        memory = MemoryStore(store)
        memory.save(
            "cust-A", "Invoices by email", offline_vector("Invoices by email", 16), Provenance(None, None, None, 1)
        )
        with pytest.raises(MemoryRefused) as searched:
            memory.search("cust-A", "invoices", [0.5] * 15, k=3)
        with pytest.raises(MemoryRefused) as saved:
            memory.save("cust-A", "Paper invoices", [0.5] * 15, Provenance(None, None, None, 2))
    for said in (str(searched.value), str(saved.value)):
        assert "has 15 dimensions but the memories of 'cust-A' have 16" in said
        assert "the embedding endpoint answered vectors of the wrong size" in said
        assert "memory.embedding.dimensions: 16" in said
        assert "embed the query with the model" not in said and "were embedded with another" not in said


def test_a_refused_connection_is_said_as_one_not_as_http_500() -> None:
    embedder = embedder_for(
        "openai/fake-embed", api_base=f"http://127.0.0.1:{free_port()}/v1", api_key="sk-test", num_retries=0
    )
    with pytest.raises(EmbeddingFailed) as failed:
        asyncio.run(embedder.embed(["a fact"]))
    said = str(failed.value)
    assert "could not connect" in said and "is its api_base right?" in said
    assert "HTTP 500" not in said and "InternalServerError" not in said


@pytest.fixture
def garbage_endpoint() -> Iterator[str]:
    """An OpenAI-compatible embedding endpoint that answers ``{"data": "nope"}``."""

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            pass

        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            body = json.dumps({"data": "nope"}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    finally:
        server.shutdown()
        server.server_close()


def test_an_answer_that_is_no_list_of_vectors_writes_no_pydantic_warning(garbage_endpoint: str, tmp_path: Path) -> None:
    store = tmp_path / "teamrun.db"
    with open_store(store) as opened:
        MemoryStore(opened).save("cust-A", "a fact", offline_vector("a fact", 16), Provenance(None, None, None, 1))
    argv = ["memory", "search", "a fact", "--resource", "cust-A", "--store", str(store)]
    done = teamrun(*argv, "--embedding-model", "openai/fake-embed", "--embedding-api-base", garbage_endpoint)
    assert done.returncode != 0
    assert "answered something that is not a list of vectors" in done.stderr, done.stderr
    assert "Pydantic" not in done.stderr and "Traceback" not in done.stderr, done.stderr


TEAM = """\
version: 1
name: desk
supervisor: support
agents:
  support:
    instructions: Help the customer.
memory:
  recall:
    support: {min_score: 0.05, max_tokens: 16}
"""
LONG = (
    "The customer wants every invoice sent by email as a PDF attachment, never on paper, to the billing address "
    "of the head office, and a copy to the accounts team"
)


def test_a_fact_cut_by_the_recall_budget_is_not_said_as_nothing_matches(tmp_path: Path) -> None:
    team, store = tmp_path / "desk.yaml", tmp_path / "teamrun.db"
    team.write_text(TEAM)
    with open_store(store) as opened:
        MemoryStore(opened).save("cust-A", LONG, offline_vector(LONG), Provenance(None, None, None, 1))
    model = ScriptedModel({"support": ["By email."]})
    result = load_team(team, chat_model=model, store=store).run_sync("How do my invoices go?", resource="cust-A")
    assert result.status == "done", result.error
    context = str(model.calls_of("support")[0].messages[-1]["content"])  # the runner's, after the conversation
    assert "Nothing saved about this user matches" not in context and LONG not in context
    assert "Saved facts about this user match, but none fits" in context
    [warning] = [w for w in result.warnings if w.startswith("memory:")]
    assert "1 matching fact support recalled before turn 1 was left out" in warning
    assert "memory.recall.support.max_tokens" in warning
