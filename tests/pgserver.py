"""A throwaway PostgreSQL server for the store tests (the Debian `postgresql` package's binaries), and one with the
pgvector extension for the memory tests (the binaries PyPI's `pgserver` bundles: :func:`pgvector_bin_dir`).

``TEAMRUN_TEST_POSTGRES_URL`` (a SQLAlchemy URL to a server the tests may create
databases on) is used instead when set. Missing binaries fail the tests with a
message naming the package to install; they are never skipped.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import uuid
from pathlib import Path

INSTALL_HINT = (
    "the PostgreSQL tests need a PostgreSQL server: install the Debian package `postgresql` "
    "(apt-get install postgresql; .ci/install-and-test does) or set TEAMRUN_TEST_POSTGRES_URL"
)


def _bin_dir() -> Path:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(Path(p).parts[4]))
    if found:
        return Path(found[-1]).parent
    on_path = shutil.which("initdb")
    if on_path:
        return Path(on_path).parent
    raise RuntimeError(INSTALL_HINT)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _bin_dir_or_none() -> Path | None:
    """The Debian package's binaries, or None where they are not installed."""
    try:
        return _bin_dir()
    except RuntimeError:
        return None


class PostgresServer:
    """``initdb`` into a temporary folder, ``pg_ctl start`` on a free loopback port; ``url`` is its SQLAlchemy URL."""

    def __init__(self, bin_dir: Path | None = None) -> None:
        self.bin = bin_dir or _bin_dir()
        self.root = Path(tempfile.mkdtemp(prefix="teamrun-pg-"))
        self.data = self.root / "data"
        self.port = _free_port()
        self.as_postgres = os.geteuid() == 0  # the server refuses to run as root
        self.url = f"postgresql+psycopg://teamrun@127.0.0.1:{self.port}/postgres"

    def _run(self, *argv: str) -> None:
        command = [str(self.bin / argv[0]), *argv[1:]]
        if self.as_postgres:
            command = ["runuser", "-u", "postgres", "--", *command]
        done = subprocess.run(command, capture_output=True, text=True, timeout=120)
        if done.returncode != 0:
            log = self.root / "server.log"
            tail = log.read_text(errors="replace")[-2000:] if log.exists() else ""
            raise RuntimeError(f"{' '.join(argv[:2])} failed ({done.returncode}): {done.stderr.strip()}\n{tail}")

    def start(self) -> PostgresServer:
        if self.as_postgres:
            user = pwd.getpwnam("postgres")
            os.chown(self.root, user.pw_uid, user.pw_gid)
            if self.bin != _bin_dir_or_none():
                # A build inside a virtual environment (pgserver's) may sit below a folder only root may enter
                # (.ci/run makes its venv in a `mktemp -d` folder, mode 0700): the server's user runs a copy of
                # the install (bin, lib, share: ~34 MB) from this server's own folder instead, laid out as in
                # site-packages (its binaries find their libraries at $ORIGIN/../../../pgserver.libs).
                install = self.bin.parent  # .../site-packages/pgserver/pginstall
                site = install.parent.parent
                copy = self.root / "site"
                shutil.copytree(install, copy / install.relative_to(site), symlinks=True)
                for libs in site.glob(f"{install.parent.name}.libs"):
                    shutil.copytree(libs, copy / libs.name, symlinks=True)
                self.bin = copy / install.relative_to(site) / "bin"
        self._run("initdb", "-D", str(self.data), "-U", "teamrun", "--auth=trust", "-E", "UTF8", "--no-sync")
        # max_connections: the replica tests run up to two servers with 40 runs in flight each (a connection each)
        options = f"-p {self.port} -k {self.root} -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=300"
        self._run("pg_ctl", "-D", str(self.data), "-l", str(self.root / "server.log"), "-o", options, "-w", "start")
        return self

    def stop(self) -> None:
        try:
            self._run("pg_ctl", "-D", str(self.data), "-m", "immediate", "-w", "stop")
        finally:
            shutil.rmtree(self.root, ignore_errors=True)


def new_database(server_url: str) -> str:
    """A fresh, empty database on the server; its SQLAlchemy URL."""
    import psycopg
    from sqlalchemy.engine import make_url

    url = make_url(server_url)
    name = f"teamrun_{uuid.uuid4().hex[:12]}"
    dsn = url.set(drivername="postgresql").render_as_string(hide_password=False)
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    return url.set(database=name).render_as_string(hide_password=False)


PGVECTOR_HINT = (
    "the pgvector tests need PyPI's `pgserver` (a PostgreSQL build that ships the pgvector extension; Debian 12 "
    "packages no pgvector): pip install -e '.[test]'"
)


def pgvector_bin_dir() -> Path:
    """The binaries of the PostgreSQL that PyPI's ``pgserver`` bundles (with pgvector). Found through the
    distribution's files, not imported: ``import pgserver`` here would find this module (tests/ is on sys.path)."""
    from importlib import metadata

    try:
        found = Path(str(metadata.distribution("pgserver").locate_file("pgserver/pginstall/bin")))
    except metadata.PackageNotFoundError:
        raise RuntimeError(PGVECTOR_HINT) from None
    if not (found / "initdb").exists():
        raise RuntimeError(f"{PGVECTOR_HINT} ({found / 'initdb'} is missing)")
    return found
