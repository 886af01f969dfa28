"""Fixtures of the memory tests: a fresh SQLite store, the fake embedding endpoint."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.memory.fake_embeddings import FakeEmbeddingHTTPServer


@pytest.fixture
def fake_embeddings() -> Iterator[FakeEmbeddingHTTPServer]:
    """A fake OpenAI-compatible embedding endpoint (a thread of this process): counts calls, keeps inputs."""
    with FakeEmbeddingHTTPServer() as fake:
        yield fake


@pytest.fixture
def sqlite_path(tmp_path: Path) -> Path:
    return tmp_path / "teamrun.db"
