"""The store: opening by path or URL, versioned migrations, the thread and run repositories (SQLite and PostgreSQL)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import sqlalchemy as sa

from teamrun.errors import StoreError
from teamrun.store import default_store_location, open_store, resolve_store_url
from teamrun.store import migrations as migrations_module
from teamrun.store.threads import NewMessage

REPO = Path(__file__).resolve().parents[2]
TEAM = REPO / "teams" / "research-report.yaml"


def test_threads_and_runs_round_trip(store_url: str) -> None:
    with open_store(store_url) as store:
        store.threads.create("t-1", "support")
        store.threads.append(
            "t-1",
            [NewMessage("user", "hello"), NewMessage("assistant", "hi", agent="triage")],
            run_id="r-1",
            current_agent="billing",
        )
        store.threads.append(
            "t-1",
            [
                NewMessage("user", "task", scope="researcher"),
                NewMessage("assistant", "found", agent="researcher", scope="researcher"),
            ],
        )
        store.threads.append("t-1", [NewMessage("user", "again")])
        thread = store.threads.get("t-1")
        assert thread is not None and thread.current_agent == "billing" and thread.turns == 2
        conversation = store.threads.messages("t-1")
        assert [(m.seq, m.turn, m.role, m.content) for m in conversation] == [
            (1, 1, "user", "hello"),
            (2, 1, "assistant", "hi"),
            (5, 2, "user", "again"),
        ]
        assert [m.content for m in store.threads.messages("t-1", scope="researcher")] == ["task", "found"]
        assert [t.id for t in store.threads.list(team="support")] == ["t-1"]
        assert store.threads.list(team="other") == []

        store.runs.start("r-1", "support", "hello", thread_id="t-1")
        assert store.runs.get("r-1").status == "running"  # type: ignore[union-attr]
        store.runs.finish("r-1", status="done", final_output="hi", usage={"total_tokens": 3}, cost=0.5)
        run = store.runs.get("r-1")
        assert run is not None and (run.status, run.final_output, run.usage, run.cost, run.thread_id) == (
            "done",
            "hi",
            {"total_tokens": 3},
            0.5,
            "t-1",
        )
        assert run.ended_at is not None

        assert store.threads.delete("t-1") is True
        assert store.threads.get("t-1") is None and store.threads.messages("t-1", scope=None) == []
        assert store.threads.delete("t-1") is False


def test_a_file_path_opens_a_sqlite_store_and_creates_its_folder(tmp_path: Path) -> None:
    path = tmp_path / "deep" / "er" / "runs.db"
    with open_store(path) as store:
        assert store.dialect == "sqlite"
    assert path.is_file()
    assert resolve_store_url(str(path)) == f"sqlite:///{path}"


def test_the_default_location_follows_teamrun_store_then_xdg_data_home(tmp_path: Path) -> None:
    assert default_store_location({"XDG_DATA_HOME": str(tmp_path)}) == str(tmp_path / "teamrun" / "teamrun.db")
    assert default_store_location({"TEAMRUN_STORE": "postgresql://h/db", "XDG_DATA_HOME": "/x"}) == "postgresql://h/db"
    home = default_store_location({"HOME": "/nowhere"})
    assert home.endswith(os.path.join(".local", "share", "teamrun", "teamrun.db"))


def test_an_older_database_is_upgraded_step_by_step(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "old.db"
    open_store(path).close()  # the latest version
    latest = migrations_module.latest_version()

    def add_label(conn: sa.Connection) -> None:
        conn.execute(sa.text("ALTER TABLE threads ADD COLUMN label VARCHAR(100)"))

    steps = [*migrations_module.MIGRATIONS, (latest + 1, "thread labels", add_label)]
    monkeypatch.setattr(migrations_module, "MIGRATIONS", steps)
    with open_store(path) as store, store.engine.connect() as conn:
        assert migrations_module.current_version(conn) == latest + 1
        assert "label" in {c["name"] for c in sa.inspect(conn).get_columns("threads")}
    with open_store(path) as store, store.engine.connect() as conn:  # opening again runs nothing twice
        versions = conn.execute(sa.text("SELECT version FROM schema_version ORDER BY version")).scalars().all()
        assert versions == [latest, latest + 1]


def test_a_version_2_store_is_upgraded_to_keep_run_events_and_keeps_its_runs(store_url: str) -> None:
    with open_store(store_url) as store, store.engine.begin() as conn:  # made a version 2 store by hand
        store.runs.start("r-old", "support", "hello")
        conn.execute(sa.text("DROP TABLE run_events"))
        conn.execute(sa.text("DELETE FROM schema_version"))
        conn.execute(sa.text("INSERT INTO schema_version (version, applied_at) VALUES (2, '2026-01-01')"))
    with open_store(store_url) as store, store.engine.connect() as conn:
        assert migrations_module.current_version(conn) == migrations_module.latest_version()
        versions = conn.execute(sa.text("SELECT version FROM schema_version ORDER BY version")).scalars().all()
        assert versions == [2, *range(3, migrations_module.latest_version() + 1)]
        assert store.runs.get("r-old") is not None
        assert store.run_events.save("r-old", [{"kind": "run_start"}]) is not None


def test_a_version_5_store_is_upgraded_to_keep_the_leases_of_live_runs_only(store_url: str) -> None:
    """Version 7: the lease rows of ended runs (and of no run) go; a running run's and a waiting one's stay; the
    heartbeat's queries read the live leases through indexes of their own."""
    with open_store(store_url) as store, store.engine.begin() as conn:  # made a version 5 store by hand
        conn.execute(sa.text("DROP INDEX ix_run_leases_held"))
        conn.execute(sa.text("DROP INDEX ix_run_leases_live"))
        conn.execute(sa.text("CREATE INDEX ix_run_leases_owner ON run_leases (owner)"))
        conn.execute(sa.text("CREATE INDEX ix_run_leases_expires ON run_leases (expires_at)"))
        conn.execute(sa.text("DELETE FROM schema_version"))
        conn.execute(sa.text("INSERT INTO schema_version (version, applied_at) VALUES (5, '2026-01-01')"))
        for run_id, status in (("done", "done"), ("running", "running"), ("waiting", "waiting")):
            store.runs.start(run_id, "support", "hello", conn=conn)
            conn.execute(sa.text("UPDATE runs SET status = :s WHERE id = :id"), {"s": status, "id": run_id})
        leases = [
            ("done", "over", 0.0),
            ("running", None, 2e9),
            ("waiting", "waiting", 0.0),
            ("gone", "over", 0.0),  # a run whose record was deleted
        ]
        for run_id, released, expires in leases:
            conn.execute(
                sa.text(
                    "INSERT INTO run_leases (run_id, owner, generation, expires_at, released) "
                    "VALUES (:id, 'a', 1, :e, :r)"
                ),
                {"id": run_id, "e": expires, "r": released},
            )
    with open_store(store_url) as store, store.engine.connect() as conn:
        assert migrations_module.current_version(conn) == migrations_module.latest_version()
        kept = conn.execute(sa.text("SELECT run_id FROM run_leases ORDER BY run_id")).scalars().all()
        assert kept == ["running", "waiting"]
        indexes = {index["name"] for index in sa.inspect(conn).get_indexes("run_leases")}
        assert {"ix_run_leases_held", "ix_run_leases_live"} <= indexes
        assert not indexes & {"ix_run_leases_owner", "ix_run_leases_expires"}


def test_run_events_are_kept_in_parts_compressed_and_capped(store_url: str) -> None:
    first = [{"kind": "run_start", "span_id": "s1", "data": {"input": "é" * 10}}, {"kind": "run_end", "data": {}}]
    later = [
        {"kind": "run_start", "span_id": "s1", "data": {}},
        {"kind": "llm_io", "data": {"m": os.urandom(3000).hex()}},
    ]
    with open_store(store_url) as store:
        store.runs.start("r-1", "support", "hello")
        store.runs.start("r-2", "support", "hello")
        repo = store.run_events
        assert repo.load("r-1") is None and repo.kept(["r-1", "r-2"]) == set()
        assert repo.save("r-none", first) is None  # no such run in the store
        kept = repo.save("r-1", first)
        assert kept is not None and (kept.part, kept.count) == (0, 2) and kept.stored_bytes < kept.raw_bytes + 20
        assert repo.save("r-1", later) is not None  # another process continued it: the next part
        assert repo.load("r-1") == first + later
        assert repo.save("r-1", first + first, part=0) is not None  # the same process continued it: rewritten
        assert repo.load("r-1") == first + first + later
        assert repo.kept(["r-1", "r-2", "r-3"]) == {"r-1"}

        small = type(repo)(store.engine, max_part_bytes=100)
        cut = small.save("r-2", later)
        assert cut is not None and cut.without_content and repo.load("r-2") == later[:1]
        assert type(repo)(store.engine, max_part_bytes=10).save("r-2", later) is None
    with open_store(store_url) as store:  # deleting a run deletes its events
        with store.engine.begin() as conn:
            conn.execute(sa.text("DELETE FROM runs WHERE id = 'r-1'"))
        assert store.run_events.load("r-1") is None and store.run_events.load("r-2") == later[:1]


def test_a_database_from_a_newer_teamrun_is_refused_clearly(tmp_path: Path) -> None:
    path = tmp_path / "new.db"
    with open_store(path) as store, store.engine.begin() as conn:
        conn.execute(sa.text("INSERT INTO schema_version (version, applied_at) VALUES (99, '2030-01-01')"))
    latest = migrations_module.latest_version()
    with pytest.raises(StoreError, match=rf"schema version 99, newer than this teamrun knows \({latest}\); upgrade"):
        open_store(path)


def test_a_bad_store_is_a_store_error_not_a_traceback(tmp_path: Path) -> None:
    with pytest.raises(StoreError, match="cannot open the store"):
        open_store("postgresql+psycopg://nobody@127.0.0.1:1/none?connect_timeout=2")
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises((StoreError, OSError)):
        open_store(blocker / "sub" / "x.db")


def test_a_plain_execute_neither_imports_sqlalchemy_nor_writes_a_store(tmp_path: Path) -> None:
    probe = (
        "import sys\n"
        "from teamrun.cli import main\n"
        f"code = main(['execute', {str(TEAM)!r}, '--input', 'Compare Rust and Go', '--progress', 'none'])\n"
        "assert code == 0, code\n"
        "loaded = sorted(m for m in sys.modules if m.split('.')[0] in ('sqlalchemy', 'psycopg'))\n"
        "print('LOADED', loaded)\n"
    )
    env = {
        **os.environ,
        "XDG_DATA_HOME": str(tmp_path / "data"),
        "PYTHONPATH": str(REPO / "runner"),
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
    }
    env.pop("TEAMRUN_STORE", None)
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300
    )
    assert done.returncode == 0, done.stderr
    assert "LOADED []" in done.stdout
    assert not (tmp_path / "data").exists()
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    "argv", [["--help"], ["validate", str(TEAM)], ["chat", "--help"], ["threads", "--help"], ["execute", "--help"]]
)
def test_help_and_validate_never_import_sqlalchemy(argv: list[str]) -> None:
    probe = (
        "import sys\n"
        "from teamrun.cli import main\n"
        f"code = main({argv!r})\n"
        "loaded = sorted(m for m in sys.modules if m.split('.')[0] == 'sqlalchemy')\n"
        "assert not loaded, loaded\n"
        "raise SystemExit(code)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(REPO / "runner"), "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=env, cwd=REPO, timeout=120)
    assert done.returncode == 0, done.stderr


def test_concurrent_writers_to_one_thread_get_distinct_ordered_seqs(store_url: str) -> None:
    from concurrent.futures import ThreadPoolExecutor

    with open_store(store_url) as store:
        store.threads.create("busy", "team")

        def write(number: int) -> None:
            with open_store(store_url) as own:  # one engine per writer, as separate processes would have
                own.threads.append("busy", [NewMessage("user", f"q{number}"), NewMessage("assistant", f"a{number}")])

        with ThreadPoolExecutor(max_workers=6) as pool:
            list(pool.map(write, range(12)))
        messages = store.threads.messages("busy")
        assert [m.seq for m in messages] == list(range(1, 25))
        assert sorted(m.turn for m in messages) == sorted([*range(1, 13), *range(1, 13)])
        for question, answer in zip(messages[::2], messages[1::2], strict=True):  # each append stays together
            assert (question.content[1:], question.turn) == (answer.content[1:], answer.turn)


def test_missing_postgresql_binaries_name_the_debian_package(monkeypatch: pytest.MonkeyPatch) -> None:
    from tests import pgserver

    monkeypatch.setattr(pgserver.glob, "glob", lambda pattern: [])
    monkeypatch.setattr(pgserver.shutil, "which", lambda name: None)
    with pytest.raises(RuntimeError, match=r"install the Debian package `postgresql`"):
        pgserver.PostgresServer()


def test_a_version_7_store_is_upgraded_to_say_which_leases_are_watched(store_url: str) -> None:
    """Version 8: a lease says until when another replica streams its run's events (``watched_until``); a lease of
    the version 7 store keeps working, unwatched, and can be watched."""
    with open_store(store_url) as store, store.engine.begin() as conn:  # made a version 7 store by hand
        store.runs.start("r7", "support", "hello", conn=conn)
        conn.execute(sa.text("DROP INDEX ix_run_leases_held"))  # (SQLite drops no column an index names)
        conn.execute(sa.text("ALTER TABLE run_leases DROP COLUMN watched_until"))
        conn.execute(sa.text("DELETE FROM schema_version"))
        conn.execute(sa.text("INSERT INTO schema_version (version, applied_at) VALUES (7, '2026-01-01')"))
        conn.execute(
            sa.text("INSERT INTO run_leases (run_id, owner, generation, expires_at) VALUES ('r7', 'a', 1, 2e9)")
        )
    with open_store(store_url) as store:
        with store.engine.connect() as conn:
            assert migrations_module.current_version(conn) == migrations_module.latest_version()
            assert "watched_until" in {c["name"] for c in sa.inspect(conn).get_columns("run_leases")}
        assert store.leases.renew("a", 60)["r7"].watched_until is None
        store.leases.watch("r7", 3e9)
        store.leases.watch("r7", 2.5e9)  # an earlier mark never shortens a later one
        assert store.leases.renew("a", 60)["r7"].watched_until == 3e9
