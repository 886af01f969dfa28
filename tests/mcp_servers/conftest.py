"""Fixtures for the MCP tests: real MCP servers nobody here wrote, started as a user would.

* ``mcp-server-time`` and ``mcp-server-git`` (the reference Python servers, pip) run over stdio;
* ``@modelcontextprotocol/server-everything`` (npm) runs over streamable HTTP on 127.0.0.1.
  It is found in ``$TEAMRUN_TEST_EVERYTHING_DIR`` (``.ci/install-and-test`` installs it there), by default
  ``~/.cache/teamrun-test/server-everything``: the version ``.ci/server-everything/package.json`` pins, with
  dependencies the ``node`` on PATH supports (the fixture checks both before it starts the server).

A missing server fails the test (never a skip): these tests are the proof that MCP works.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest
import yaml

from tests.cli_processes import free_port
from tests.waiting import wait_until

EVERYTHING_DIR = Path(
    os.environ.get("TEAMRUN_TEST_EVERYTHING_DIR")
    or Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "teamrun-test" / "server-everything"
)


PINNED_EVERYTHING = Path(__file__).resolve().parents[2] / ".ci" / "server-everything" / "package.json"
"""What ``.ci/install-and-test`` installs in :data:`EVERYTHING_DIR` (it copies this file there)."""


def node_supports(version: str, spec: str) -> bool | None:
    """Whether Node ``version`` (``v18.20.4``) satisfies a package's ``engines.node`` range (``>=18``,
    ``^18.14 || >=20``...); ``None`` for a range this does not read (a hyphen range, a tag)."""

    def parse(text: str) -> tuple[int, int, int] | None:
        parts = text.lstrip("v=").split(".")
        if not 1 <= len(parts) <= 3 or not all(part.isdigit() for part in parts):
            return None
        numbers = [int(part) for part in parts] + [0] * (3 - len(parts))
        return numbers[0], numbers[1], numbers[2]

    have = parse(version)
    if have is None:
        return None
    for alternative in spec.split("||"):
        words = re.sub(r"(>=|<=|>|<|\^|~)\s+", r"\1", alternative).split()
        satisfied = True
        for word in words or ["*"]:
            if word in ("*", "x"):
                continue
            operator = re.match(r"(>=|<=|>|<|\^|~|=?)", word)
            assert operator is not None
            bound = parse(word[operator.end() :])
            if bound is None:
                return None
            op = operator.group(1)
            if op == "^":
                ok = have >= bound and have[0] == bound[0]
            elif op == "~":
                ok = have >= bound and have[:2] == bound[:2]
            else:
                ok = {">=": have >= bound, ">": have > bound, "<=": have <= bound, "<": have < bound}.get(
                    op, have == bound
                )
            satisfied = satisfied and ok
        if satisfied:
            return True
    return False


def everything_install_problems(directory: Path, node_version: str) -> list[str]:
    """Why the server-everything installed in ``directory`` is not the one the tests run against: not the
    pinned package.json, or a package whose ``engines.node`` the ``node`` at ``node_version`` does not meet
    (npm only warns about those, and the server then fails at run time)."""
    installed = directory / "package.json"
    problems = []
    if not installed.is_file() or installed.read_bytes() != PINNED_EVERYTHING.read_bytes():
        problems.append(f"{installed} is not a copy of {PINNED_EVERYTHING}")
    for manifest in sorted((directory / "node_modules").glob("**/package.json")):
        try:
            package = json.loads(manifest.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        engines = package.get("engines") if isinstance(package, dict) else None
        spec = engines.get("node") if isinstance(engines, dict) else None
        if "name" not in package or not isinstance(spec, str):
            continue
        if node_supports(node_version, spec) is not True:
            problems.append(f"{package['name']}@{package.get('version')} needs node {spec}, this is {node_version}")
    return problems


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


def _listens(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
    except OSError:
        return False
    return True


@pytest.fixture
def everything_url(tmp_path: Path) -> Iterator[str]:
    """server-everything over streamable HTTP on a free loopback port; yields its MCP URL."""
    entry = EVERYTHING_DIR / "node_modules" / "@modelcontextprotocol" / "server-everything" / "dist" / "index.js"
    node = shutil.which("node")
    if node is None or not entry.is_file():
        pytest.fail(
            f"@modelcontextprotocol/server-everything is not installed in {EVERYTHING_DIR} (or node is missing; "
            "set TEAMRUN_TEST_EVERYTHING_DIR to where it is); .ci/install-and-test installs it"
        )
    version = subprocess.run([node, "--version"], capture_output=True, text=True, check=True).stdout.strip()
    problems = everything_install_problems(EVERYTHING_DIR, version)
    if problems:
        pytest.fail(
            f"the server-everything in {EVERYTHING_DIR} is not the one to test against (.ci/install-and-test "
            "installs it again): " + "; ".join(problems)
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
        wait_until(
            lambda: _listens(port),
            "server-everything listening",
            alive=server,
            where=lambda: (tmp_path / "everything.log").read_text(errors="replace"),
        )
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
