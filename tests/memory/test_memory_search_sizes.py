"""Attack a44b item 6: `teamrun memory search` against an endpoint answering vectors of the wrong size.

The store cannot tell which model made its vectors, so the error names both causes (another model, or the right
model's endpoint answering a wrong size) as the save path does; it used to say "--embedding-model X is not the
model the team saved them with" even when X was that very model.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from teamrun.cli import main
from teamrun.llm.embedding import offline_vector
from teamrun.store import open_store
from teamrun.store.memory import MemoryStore, Provenance
from tests.memory.fake_embeddings import Behaviour, FakeEmbeddingHTTPServer

FACT = "Alice wants invoices by email as PDF"


def test_a_search_whose_endpoint_answers_the_wrong_size_names_both_causes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = tmp_path / "teamrun.db"
    with open_store(store) as opened:  # saved by the team with openai/fake-embed (16 dimensions)
        MemoryStore(opened).save("customer-a", FACT, offline_vector(FACT, 16), Provenance("r1", "t1", "support", 1.7e9))
    with FakeEmbeddingHTTPServer(Behaviour(wrong_size_after=0)) as fake:  # the same model now answers 15
        argv = ["memory", "search", "invoices", "--resource", "customer-a", "--store", str(store)]
        argv += ["--embedding-model", "openai/fake-embed", "--embedding-api-base", fake.url, "--mode", "vector"]
        assert main(argv) == 2
    err = capsys.readouterr().err
    assert "is not the model the team saved them with" not in err
    assert "has 15 dimensions but the memories of 'customer-a' have 16" in err
    assert "if openai/fake-embed is not it; if it is, its endpoint answered the wrong size" in err
    assert "--mode keyword" in err and "Traceback" not in err
