"""Fixtures shared by every test. Keep each owner's fixtures in its own marked block.

The fakes: ``fake_openai`` (the scripted OpenAI-compatible HTTP server, tests/fakeserver.py) is the one
fixture for it; import its helpers as ``from tests.fakeserver import ...`` (and ``tests.pgserver``),
never as top-level ``fakeserver``, which would make a second module object.
"""

from __future__ import annotations

# The network guard (no test may connect to anything but loopback) is teamrun's pytest
# plugin, `teamrun.testing.plugin`, loaded by `-p` in pyproject's addopts (and by its
# pytest11 entry point once installed): one guard for this repo and for users' tests.
from collections.abc import Iterator

import pytest

from tests import tiers
from tests.fakeserver import TEST_KEY, FakeOpenAI

pytest_plugins = ["pytester"]  # tests/testing runs small pytest sessions against teamrun's plugin


def pytest_configure(config: pytest.Config) -> None:
    """LiteLLM's streaming types trip a harmless pydantic warning; keep reports clean."""
    config.addinivalue_line("filterwarnings", r"ignore:.*`ReadOnly` qualifier:UserWarning")


# ---- tiers: inprocess / outofprocess (owner: tests) -------------------------------------
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark every test ``inprocess`` or ``outofprocess`` (tests/tiers.py): ``pytest -m inprocess`` is the
    fast tier."""
    tiers.mark(items)


@pytest.fixture(autouse=True)
def _inprocess_starts_no_process(request: pytest.FixtureRequest) -> Iterator[None]:
    """An ``inprocess`` test fails if it starts a server, a browser or a teamrun process (its tier would be
    a lie); the commands of command tools are allowed (tests/tiers.py)."""
    if request.node.get_closest_marker("inprocess") is None:
        yield
        return
    with tiers.started_processes() as started:
        yield
    if started:
        pytest.fail(
            f"this test is in the inprocess tier but started {len(started)} server or teamrun "
            f'process(es), first: {started[0][:200]}; mark it @pytest.mark.outofprocess("why") '
            "(tests/tiers.py)",
            pytrace=False,
        )


# ---- end tiers block --------------------------------------------------------------------


# ---- llm: fake OpenAI server (owner: runner/llm) ----------------------------------------
@pytest.fixture
def fake_openai(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeOpenAI]:
    """A scripted OpenAI-compatible server on 127.0.0.1; ``.url`` is the ``api_base``. The one fixture of
    this fake: teams talk to it as ``openai/<agent>`` with ``api_base: <url>``.

    Sets ``OPENAI_API_KEY`` and ``TEAMRUN_TEST_KEY`` (for ``api_key_env``) to ``TEST_KEY`` (the OpenAI
    client refuses to send without a key), and ``TEAMRUN_API_BASE`` to its URL (the endpoint of every agent
    that sets no ``api_base``: the ready-made teams set none).
    Call ``fake_openai.assert_complete()`` in the test to check the script was used up.
    """
    monkeypatch.setenv("OPENAI_API_KEY", TEST_KEY)
    monkeypatch.setenv("TEAMRUN_TEST_KEY", TEST_KEY)
    for name in ("NO_PROXY", "no_proxy"):  # never send loopback traffic through a proxy
        monkeypatch.setenv(name, "127.0.0.1,localhost")
    server = FakeOpenAI().start()
    monkeypatch.setenv("TEAMRUN_API_BASE", server.url)
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def second_openai(fake_openai: FakeOpenAI) -> Iterator[FakeOpenAI]:
    """A second scripted provider beside ``fake_openai`` (a fallback model's endpoint, the other side of a circuit
    breaker): the keys and proxy settings are ``fake_openai``'s, its ``.url`` its own ``api_base``."""
    with FakeOpenAI() as server:
        yield server


# ---- end llm block ----------------------------------------------------------------------


# ---- store: SQLite and a real PostgreSQL server (owner: runner/store) -------------------
@pytest.fixture(scope="session")
def postgres_server() -> Iterator[str]:
    """The URL of a PostgreSQL server for this session (``TEAMRUN_TEST_POSTGRES_URL``, else a throwaway one)."""
    import os

    from tests.pgserver import PostgresServer

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
    from tests.pgserver import new_database

    return new_database(request.getfixturevalue("postgres_server"))


@pytest.fixture(scope="session")
def pgvector_server() -> Iterator[str]:
    """The URL of a throwaway PostgreSQL server that has the pgvector extension (the build PyPI's ``pgserver``
    bundles, tests/pgserver.py), for this session; a test makes its own database with ``new_database``."""
    from tests.pgserver import PostgresServer, pgvector_bin_dir

    try:
        server = PostgresServer(pgvector_bin_dir()).start()
    except RuntimeError as exc:
        pytest.fail(str(exc), pytrace=False)
    try:
        yield server.url
    finally:
        server.stop()


# ---- end store block --------------------------------------------------------------------
