"""Fixtures for the MCP tests: real MCP servers nobody here wrote, started as a user would.

* ``mcp-server-time`` and ``mcp-server-git`` (the reference Python servers, pip) run over stdio;
* ``@modelcontextprotocol/server-everything`` (npm) runs over streamable HTTP on 127.0.0.1.
  It is found in ``$TEAMRUN_TEST_EVERYTHING_DIR`` (``.ci/install-and-test`` installs it there), by default
  ``~/.cache/teamrun-test/server-everything``; install it with
  ``npm install --prefix <dir> @modelcontextprotocol/server-everything``.

A missing server fails the test (never a skip): these tests are the proof that MCP works.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest
import yaml

EVERYTHING_DIR = Path(
    os.environ.get("TEAMRUN_TEST_EVERYTHING_DIR")
    or Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "teamrun-test" / "server-everything"
)


def _need_module(module: str, package: str) -> None:
    if importlib.util.find_spec(module) is None:
        pytest.fail(f"the MCP server {package} is not installed: pip install {package} (.ci/install-and-test does)")


@pytest.fixture
def marker() -> str:
    """A value put in the environment of the stdio servers a test starts, to find their processes."""
    return f"teamrun-test-{uuid.uuid4().hex[:12]}"


def marked_processes(marker: str) -> list[psutil.Process]:
    """Live processes whose environment carries ``marker`` (zombies count as gone)."""
    found = []
    for process in psutil.process_iter():
        try:
            if process.status() == psutil.STATUS_ZOMBIE:
                continue
            if process.environ().get("TEAMRUN_TEST_MARKER") == marker:
                found.append(process)
        except (psutil.Error, OSError):
            continue
    return found


@pytest.fixture
def time_server(marker: str) -> dict[str, Any]:
    """A tool entry for mcp-server-time over stdio (its processes carry ``marker``)."""
    _need_module("mcp_server_time", "mcp-server-time")
    return {
        "mcp": {
            "command": [sys.executable, "-m", "mcp_server_time", "--local-timezone", "Etc/UTC"],
            "env": {"TEAMRUN_TEST_MARKER": marker},
        }
    }


@pytest.fixture
def git_repo(tmp_path: Path) -> Path:
    """A git repository with two commits."""
    repo = tmp_path / "repo"
    repo.mkdir()
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@example.com",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@example.com",
    }

    def git(*args: str) -> None:
        subprocess.run(["git", *args], cwd=repo, env=env, check=True, capture_output=True)

    git("init", "-q", "-b", "main")
    (repo / "app.py").write_text("print('hi')\n")
    git("add", "app.py")
    git("commit", "-qm", "first commit")
    (repo / "app.py").write_text("print('hello')\n")
    git("commit", "-qam", "say hello properly")
    return repo


@pytest.fixture
def git_server(marker: str, git_repo: Path) -> dict[str, Any]:
    """A tool entry for mcp-server-git over stdio, confined to ``git_repo``."""
    _need_module("mcp_server_git", "mcp-server-git")
    return {
        "mcp": {
            "command": [sys.executable, "-m", "mcp_server_git", "--repository", str(git_repo)],
            "env": {"TEAMRUN_TEST_MARKER": marker},
        },
        "fixed_arguments": {"repo_path": str(git_repo)},
    }


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def everything_url(tmp_path: Path) -> Iterator[str]:
    """server-everything over streamable HTTP on a free loopback port; yields its MCP URL."""
    entry = EVERYTHING_DIR / "node_modules" / "@modelcontextprotocol" / "server-everything" / "dist" / "index.js"
    node = shutil.which("node")
    if node is None or not entry.is_file():
        pytest.fail(
            f"@modelcontextprotocol/server-everything is not installed in {EVERYTHING_DIR} "
            f"(npm install --prefix {EVERYTHING_DIR} @modelcontextprotocol/server-everything; "
            "or set TEAMRUN_TEST_EVERYTHING_DIR); .ci/install-and-test installs it"
        )
    port = free_port()
    log = (tmp_path / "everything.log").open("wb")
    server = subprocess.Popen(
        [node, str(entry), "streamableHttp"],
        env={**os.environ, "PORT": str(port)},
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if server.poll() is not None or time.monotonic() > deadline:
                    pytest.fail(f"server-everything did not start: {(tmp_path / 'everything.log').read_text()}")
                time.sleep(0.1)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        server.terminate()
        try:
            server.wait(10)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
        log.close()


def write_team(directory: Path, agents: dict[str, Any], tools: dict[str, Any], supervisor: str = "lead") -> Path:
    """A team file in ``directory``; returns its path."""
    path = directory / "team.yaml"
    path.write_text(
        yaml.safe_dump(
            {"version": 1, "name": "mcp-test", "supervisor": supervisor, "agents": agents, "tools": tools},
            sort_keys=False,
        )
    )
    return path


HOSTILE_SERVER = Path(__file__).with_name("hostile_server.py")


def hostile_server(marker: str, *flags: str, **options: Any) -> dict[str, Any]:
    """A tool entry for ``hostile_server.py`` run with ``flags`` (its processes carry ``marker``)."""
    return {
        "mcp": {"command": [sys.executable, str(HOSTILE_SERVER), *flags], "env": {"TEAMRUN_TEST_MARKER": marker}},
        **options,
    }
