"""Opening the store: the SQLAlchemy engine for a URL, dialect settings, migrations, the repositories."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import make_url

from teamrun.errors import StoreError
from teamrun.extras import install_hint
from teamrun.secrets import StoreMask
from teamrun.store.leases import Fences, LeaseRepository
from teamrun.store.location import resolve_store_url
from teamrun.store.migrations import upgrade
from teamrun.store.run_events import RunEventRepository
from teamrun.store.runs import RunRepository
from teamrun.store.threads import ThreadRepository

_DRIVERLESS = {"postgresql": "postgresql+psycopg", "postgres": "postgresql+psycopg"}
"""URLs without a driver use psycopg 3 (SQLAlchemy's own default would be psycopg2)."""


class Store:
    """An open store: ``threads``, ``runs`` and ``run_events`` repositories over one SQLAlchemy engine.

    Every method is blocking (call it from a thread inside async code) and runs in
    its own short transaction, so several processes can share one store.
    """

    def __init__(self, engine: sa.Engine, *, display: str) -> None:
        self.engine = engine
        self.display = display
        """Where the store is, for messages (the password of a URL is hidden)."""
        self.secrets = StoreMask()
        """Masks what traces mask before it is written (``***${NAME}***`` for a secret-named variable's
        value, see :class:`~teamrun.secrets.StoreMask`): thread messages, run journals and run records."""
        self.threads = ThreadRepository(engine, secrets=self.secrets)
        self.runs = RunRepository(engine, secrets=self.secrets)
        self.run_events = RunEventRepository(engine)
        """Served runs' events (masked by the server before they are written), for the page's view."""
        self.leases = LeaseRepository(engine)
        """Which replica executes each running run (``teamrun serve`` replicas on one store)."""
        self.fences = Fences()
        """The leases this process's writes for its runs must still hold (empty: nothing is fenced)."""

    @property
    def dialect(self) -> str:
        return self.engine.dialect.name

    def separate_engine(self, *, pool_size: int, timeout_s: float) -> sa.Engine:
        """Another engine on this store's database with a pool of its own (``pool_size`` connections, no
        overflow): what takes its connections there never waits behind the requests' (a replica's lease
        heartbeat, issue 46). An in-memory SQLite store has only its own engine."""
        url = self.engine.url
        if self.dialect == "sqlite" and (not url.database or url.database == ":memory:" or url.query.get("uri")):
            return self.engine
        return _engine(url, self.display, pool={"pool_size": pool_size, "max_overflow": 0, "pool_timeout": timeout_s})

    def close(self) -> None:
        self.engine.dispose()

    @contextlib.contextmanager
    def errors(self, doing: str) -> Iterator[None]:
        """Database errors inside become a :class:`~teamrun.errors.StoreError` saying what failed, and where."""
        try:
            yield
        except sa.exc.SQLAlchemyError as exc:
            raise StoreError(f"cannot {doing} in the store {self.display}: {first_line(exc)}") from None

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Store({self.display})"


def open_store(
    location: str | os.PathLike[str] | None = None,
    *,
    environ: Mapping[str, str] | None = None,
    pool_size: int | None = None,
    max_overflow: int | None = None,
) -> Store:
    """Open (and create or upgrade) the store at ``location``: a file path, a SQLAlchemy URL, or
    ``None`` for the default (``$TEAMRUN_STORE``, else ``$XDG_DATA_HOME/teamrun/teamrun.db``).
    ``pool_size``: connections kept open (SQLAlchemy's 5 by default); ``max_overflow``: how many more are opened at
    need, and closed once returned (10 by default; ``teamrun serve`` allows one per run slot, as each running
    run's journal writes on a connection of its own).

    Raises :class:`~teamrun.errors.StoreError` when it cannot be opened.
    """
    if location is not None and not os.fspath(location).strip():
        raise StoreError(
            "the store location is empty: give a SQLite file path or a SQLAlchemy URL "
            "(or leave --store out for the default)"
        )
    url_text = resolve_store_url(location, environ)
    try:
        url = make_url(url_text)
    except sa.exc.ArgumentError as exc:
        raise StoreError(f"--store {url_text!r} is neither a file path nor a SQLAlchemy URL: {exc}") from None
    url = url.set(drivername=_DRIVERLESS.get(url.drivername, url.drivername))
    display = url.render_as_string(hide_password=True)
    file_or_server = url.get_backend_name() != "sqlite" or url.database not in (None, "", ":memory:")
    sizes = {"pool_size": pool_size, "max_overflow": max_overflow}
    pool = {name: size for name, size in sizes.items() if size is not None} if file_or_server else None
    engine = _engine(url, display, pool=pool)
    try:
        upgrade(engine, where=display)
    except sa.exc.SQLAlchemyError as exc:
        engine.dispose()
        raise StoreError(f"cannot open the store {display}: {first_line(exc)}") from None
    except BaseException:
        engine.dispose()
        raise
    return Store(engine, display=display)


def _engine(url: sa.URL, display: str, *, pool: Mapping[str, Any] | None = None) -> sa.Engine:
    kwargs: dict[str, Any] = dict(pool or {})
    if url.get_backend_name() == "sqlite":
        if url.database and url.database != ":memory:" and not url.query.get("uri"):
            path = Path(url.database)
            if path.is_dir():
                raise StoreError(f"the store {display} is a folder: give a file path, e.g. {path / 'teamrun.db'}")
            _create_private(path, display)
        kwargs["connect_args"] = {"timeout": 30}
    try:
        engine = sa.create_engine(url, **kwargs)
    except ModuleNotFoundError as exc:
        if url.get_backend_name() == "postgresql":
            hint = install_hint("postgres")
        else:
            hint = f"pip install {_DRIVER_PACKAGES.get(exc.name or '', exc.name)}"
        raise StoreError(f"the store {display} needs the database driver {exc.name!r}: {hint}") from None
    except sa.exc.NoSuchModuleError:
        raise StoreError(
            f"cannot use the store {display}: {url.drivername!r} is not a database SQLAlchemy knows; "
            "give a SQLite file path, sqlite:///FILE or postgresql+psycopg://USER@HOST/DB"
        ) from None
    except sa.exc.ArgumentError as exc:
        raise StoreError(f"cannot use the store {display}: {exc}") from None
    if url.get_backend_name() == "sqlite":
        sa.event.listen(engine, "connect", _sqlite_pragmas)
    return engine


def _create_private(path: Path, display: str) -> None:
    """A new SQLite store is private to its owner (it holds conversations, tool outputs and vars): a folder
    teamrun creates is 0700, the file 0600 (SQLite gives its -wal and -shm files the file's mode)."""
    try:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)  # the mode applies to the last folder only
    except OSError as exc:
        raise StoreError(f"cannot create the folder of the store {display}: {exc.strerror or exc}") from None
    try:
        if not path.exists():
            os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
    except FileExistsError:  # another process created it first
        pass
    except OSError as exc:
        raise StoreError(f"cannot create the store {display}: {exc.strerror or exc}") from None


_DRIVER_PACKAGES = {
    "MySQLdb": "mysqlclient",
    "pymysql": "PyMySQL",
    "psycopg2": "psycopg2-binary",
    "oracledb": "oracledb",
    "pyodbc": "pyodbc",
    "pymssql": "pymssql",
}
"""The PyPI package that provides a database driver module, where the names differ."""


def _sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
    """Foreign keys on (deleting a thread deletes its messages); WAL so readers never block the writer."""
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA busy_timeout=30000")
    cursor.execute("PRAGMA foreign_keys=ON")
    _wal(cursor)
    cursor.execute("PRAGMA synchronous=NORMAL")  # with WAL: a killed process loses nothing; no fsync per commit
    cursor.close()


_WAL_TRIES = 200
"""How often a new file's switch to WAL is tried while other openers hold it (about 40 s in all)."""


def _wal(cursor: Any) -> None:
    """Put the file in WAL mode (kept in the file: once done, this only reads it). Switching a new file needs it
    alone, and SQLite answers "database is locked" at once, without its busy timeout, while other openers of
    the same new file switch it too: tried again a moment later (the others are done within milliseconds)."""
    import sqlite3
    import time

    for attempt in range(_WAL_TRIES):
        try:
            cursor.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or attempt == _WAL_TRIES - 1:
                raise
            time.sleep(min(0.01 * (attempt + 1), 0.2))


def first_line(exc: BaseException) -> str:
    """A database error's first line, without the statement and parameters SQLAlchemy appends."""
    text = str(getattr(exc, "orig", None) or exc)
    return text.strip().splitlines()[0] if text.strip() else type(exc).__name__


__all__ = ["Store", "first_line", "open_store"]
