"""Fixtures shared by every test. Keep each owner's fixtures in its own marked block."""

from __future__ import annotations

# ---- llm: fake OpenAI server (owner: runner/llm) ----------------------------------------
# The network guard (no test may connect to anything but loopback) is teamrun's pytest
# plugin, `teamrun.testing.plugin`, loaded by `-p` in pyproject's addopts (and by its
# pytest11 entry point once installed): one guard for this repo and for users' tests.
from collections.abc import Iterator

import pytest

from fakeserver import FakeOpenAI

pytest_plugins = ["pytester"]  # tests/testing runs small pytest sessions against teamrun's plugin


def pytest_configure(config: pytest.Config) -> None:
    """LiteLLM's streaming types trip a harmless pydantic warning; keep reports clean."""
    config.addinivalue_line("filterwarnings", r"ignore:.*`ReadOnly` qualifier:UserWarning")


@pytest.fixture
def fake_openai(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeOpenAI]:
    """A scripted OpenAI-compatible server on 127.0.0.1; ``.url`` is the ``api_base``.

    Sets a dummy ``OPENAI_API_KEY`` (the OpenAI client refuses to send without one).
    Call ``fake_openai.assert_complete()`` in the test to check the script was used up.
    """
    monkeypatch.setenv("OPENAI_API_KEY", "sk-fake-openai-test-key")
    for name in ("NO_PROXY", "no_proxy"):  # never send loopback traffic through a proxy
        monkeypatch.setenv(name, "127.0.0.1,localhost")
    server = FakeOpenAI().start()
    try:
        yield server
    finally:
        server.stop()


# ---- end llm block ----------------------------------------------------------------------


# ---- store: SQLite and a real PostgreSQL server (owner: runner/store) -------------------
@pytest.fixture(scope="session")
def postgres_server() -> Iterator[str]:
    """The URL of a PostgreSQL server for this session (``TEAMRUN_TEST_POSTGRES_URL``, else a throwaway one)."""
    import os

    from pgserver import PostgresServer

    given = os.environ.get("TEAMRUN_TEST_POSTGRES_URL")
    if given:
        yield given
        return
    try:
        server = PostgresServer().start()
    except RuntimeError as exc:
        pytest.fail(str(exc), pytrace=False)
    try:
        yield server.url
    finally:
        server.stop()


@pytest.fixture(params=["sqlite", "postgres"])
def store_url(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> str:
    """A new, empty store: a SQLite file, then a fresh database on the PostgreSQL server."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path_factory.mktemp('store') / 'teamrun.db'}"
    from pgserver import new_database

    return new_database(request.getfixturevalue("postgres_server"))


# ---- end store block --------------------------------------------------------------------
