"""Attack a44b item 10: several openers of one store file that does not exist yet, at once, all open it.

Each opener has its own engine (as separate ``teamrun execute`` processes do); a barrier starts them together,
several rounds over. Before, pysqlite ran the new database's CREATE TABLEs outside any transaction, so two
openers both saw version 0 and one failed ("table schema_version already exists", "UNIQUE constraint failed:
schema_version.version"). One migrates at a time now, and the others read the version again inside the lock;
and a new file's switch to WAL, which SQLite refuses at once ("database is locked") while another opener switches
it, is tried again.
"""

from __future__ import annotations

import threading
from pathlib import Path

import sqlalchemy as sa

from teamrun.store import open_store
from teamrun.store.migrations import latest_version

OPENERS = 12
ROUNDS = 20


def _open_at_once(path: Path | str) -> list[str]:
    start, failures = threading.Barrier(OPENERS), []

    def open_it() -> None:
        start.wait()
        try:
            with open_store(path):
                pass
        except Exception as exc:  # every failure is the finding
            failures.append(f"{type(exc).__name__}: {exc}")

    threads = [threading.Thread(target=open_it) for _ in range(OPENERS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return failures


def test_openers_of_one_new_store_file_at_once_all_open_it_and_it_is_migrated_once(tmp_path: Path) -> None:
    for round_ in range(ROUNDS):
        path = tmp_path / f"round{round_}.db"
        assert _open_at_once(path) == [], f"round {round_}"
        engine = sa.create_engine(f"sqlite:///{path}")
        try:
            with engine.connect() as conn:
                stamps = conn.execute(sa.text("SELECT version FROM schema_version")).scalars().all()
        finally:
            engine.dispose()
        assert stamps == [latest_version()], f"round {round_}"


def test_openers_of_one_new_postgresql_database_at_once_all_open_it(postgres_server: str) -> None:
    from tests.pgserver import new_database

    for round_ in range(3):
        url = new_database(postgres_server)
        assert _open_at_once(url) == [], f"round {round_}"
        engine = sa.create_engine(url)
        try:
            with engine.connect() as conn:
                stamps = conn.execute(sa.text("SELECT version FROM schema_version")).scalars().all()
        finally:
            engine.dispose()
        assert stamps == [latest_version()], f"round {round_}"
