"""The two test tiers, decided from what each test uses (tests/conftest.py marks every collected test).

* ``inprocess``: the test runs in this Python process (the ``offline`` or a scripted model, the CLI
  through ``main([...])``, SQLite in ``tmp_path``; the short commands a team's command tools run
  are allowed): ``pytest -m inprocess``, the fast tier.
* ``outofprocess``: the test starts or talks to a program of its own: teamrun or Python in a
  subprocess, the fake OpenAI HTTP server, PostgreSQL, Chromium, Ray, MCP servers, uvicorn. Its
  marker holds the reason; ``pytest -m outofprocess --co`` lists them.

A test is ``outofprocess`` when it, one of its fixtures, or a helper of the same module that one of
them names, uses a fixture of :data:`OUTSIDE_FIXTURES`, a PostgreSQL parameter, or one of
:data:`OUTSIDE_WORDS`. Conservative by design: a test wrongly put here only runs in the slower
tier; the full suite (``pytest``) runs both tiers. A test the rules miss (a team file whose tool
starts an MCP server, and is no parameter) is marked ``@pytest.mark.outofprocess("why")`` by hand;
an ``inprocess`` test that starts a server, a browser or a Python running teamrun anyway fails
(tests/conftest.py, :func:`started_processes`), so the fast tier stays what it says. The short
commands a team's command tools run are in-process behaviour (:data:`HEAVY_PROCESS`).
"""

from __future__ import annotations

import ast
import contextlib
import functools
import inspect
import re
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

__all__ = ["HEAVY_PROCESS", "OUTSIDE_FIXTURES", "OUTSIDE_WORDS", "mark", "outside_reason", "started_processes"]


OUTSIDE_FIXTURES = {
    "fake_openai": "the fake OpenAI HTTP server",
    "postgres_server": "a PostgreSQL server",
    "pgvector_server": "a PostgreSQL server with pgvector",
    "serve": "a uvicorn server",
    "everything_url": "the npm MCP server",
    "time_server": "an MCP server process",
    "git_server": "an MCP server process",
}
OUTSIDE_WORDS = re.compile(
    r"\b(subprocess|Popen|pexpect|sys\.executable|playwright|chromium|ray|uvicorn|FakeOpenAI|multiprocessing"
    r"|RunningServer|PostgresServer|\w*HTTPServer)\b"
)


def outside_reason(item: pytest.Item) -> str | None:
    """Why ``item`` is out of process (``None``: it runs in process)."""
    for name in getattr(item, "fixturenames", ()):
        if name in OUTSIDE_FIXTURES:
            return f"fixture {name}: {OUTSIDE_FIXTURES[name]}"
    callspec = getattr(item, "callspec", None)
    for value in callspec.params.values() if callspec is not None else ():
        if str(value) == "postgres":
            return "parameter postgres: a PostgreSQL server"
        if str(value).endswith((".yaml", ".yml")) and _starts_mcp_servers(Path(str(value))):
            return f"parameter {Path(str(value)).name}: a team file with an MCP server"
    root = item.config.rootpath.resolve()
    functions: list[tuple[str, Callable[..., Any]]] = []
    if isinstance(item, pytest.Function):
        functions.append((item.name, item.function))
        info = getattr(item, "_fixtureinfo", None)
        for name, definitions in info.name2fixturedefs.items() if info is not None else ():
            functions.extend((f"fixture {name}", d.func) for d in definitions)
    elif not str(item.path).endswith(".py"):
        return "not a Python test"
    for label, function in functions:
        reason = _function_reason(function, root)
        if reason is not None:
            return f"{label}: {reason}"
    return None


def mark(items: list[pytest.Item]) -> None:
    """Give every item its tier marker (a test marked ``outofprocess("why")`` by hand keeps it)."""
    for item in items:
        if item.get_closest_marker("outofprocess") is not None:
            continue
        reason = outside_reason(item)
        item.add_marker(pytest.mark.outofprocess(reason) if reason is not None else pytest.mark.inprocess)


HEAVY_PROCESS = re.compile(r"mcp|node|npx|chromium|postgres|initdb|pg_ctl|ray|teamrun|pytest|uvicorn", re.IGNORECASE)
"""A program (or ``python -m`` module) the in-process tier must not start: a server, a browser, Ray, or
teamrun itself. The short commands a team's command tools run (``grep``, ``git``, ``python -c ...``)
are allowed: they are the tool behaviour under test, and take milliseconds."""


def _program(args: Any) -> str:
    """What a command line starts: the program's name, and the module of ``python -m``."""
    argv = [str(a) for a in args] if isinstance(args, list | tuple) else str(args).split()
    program = Path(argv[0]).name if argv else ""
    module = argv[argv.index("-m") + 1] if "-m" in argv[:-1] else ""
    return f"{program} {module}".strip()


@contextlib.contextmanager
def started_processes() -> Iterator[list[str]]:
    """Record the command line of every :data:`HEAVY_PROCESS` started (through ``subprocess``, so
    asyncio's and the MCP client's too); a program that is not there starts nothing."""
    started: list[str] = []
    original = subprocess.Popen.__init__

    def recording(self: subprocess.Popen[Any], args: Any, *rest: Any, **kwargs: Any) -> None:
        original(self, args, *rest, **kwargs)
        if HEAVY_PROCESS.search(_program(args)):
            started.append(" ".join(map(str, args)) if isinstance(args, list | tuple) else str(args))

    subprocess.Popen.__init__ = recording  # type: ignore[method-assign]
    try:
        yield started
    finally:
        subprocess.Popen.__init__ = original  # type: ignore[method-assign]


def _starts_mcp_servers(path: Path) -> bool:
    try:
        return path.is_file() and re.search(r"^\s*mcp:", path.read_text(encoding="utf-8"), re.MULTILINE) is not None
    except (OSError, UnicodeDecodeError):
        return False


def _function_reason(function: Callable[..., Any], root: Path) -> str | None:
    """Why ``function`` (a test or a fixture) reaches outside; only the checkout's tests are read: pytest's
    own fixtures and teamrun's plugin run in process."""
    function = inspect.unwrap(function)
    try:
        path = Path(inspect.getsourcefile(function) or "").resolve()
    except TypeError:
        return None  # built in
    if not path.is_relative_to(root) or path.relative_to(root).parts[0] in _NOT_TESTS or "site-packages" in path.parts:
        return None
    try:
        source = inspect.getsource(function)
    except OSError:
        return "source unavailable"
    return _source_reason(source, _outside_helpers(path, root))


def _source_reason(source: str, helpers: dict[str, str]) -> str | None:
    found = OUTSIDE_WORDS.search(source)
    if found is not None:
        return f"uses {found.group(1)}"
    for word in sorted(set(re.findall(r"\b[A-Za-z_]\w*\b", source)) & set(helpers)):
        return f"calls {word}, which {helpers[word]}"
    return None


_NOT_TESTS = {"runner", ".venv", "venv"}
"""Folders of the checkout holding no tests: the package itself, a virtual environment."""
_reading: set[Path] = set()


@functools.cache
def _outside_helpers(path: Path, root: Path) -> dict[str, str]:
    """The module's top-level functions and classes that reach outside, directly or through each other,
    and the names it imports from other test modules that do."""
    source = path.read_text(encoding="utf-8")
    tree = ast.parse(source)
    bodies = {
        node.name: ast.get_source_segment(source, node) or ""
        for node in tree.body
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
    }
    found: dict[str, str] = {}
    _reading.add(path)
    try:
        for node in tree.body:
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                other = root.joinpath(*node.module.split(".")).with_suffix(".py")  # a test module of the checkout
                if not other.is_file() or other in _reading:
                    continue
                theirs = _outside_helpers(other, root)
                for alias in node.names:
                    if alias.name in theirs:
                        found[alias.asname or alias.name] = f"is {node.module}.{alias.name}, which {theirs[alias.name]}"
    finally:
        _reading.discard(path)
    for name, body in bodies.items():
        match = OUTSIDE_WORDS.search(body)
        if match is not None:
            found[name] = f"uses {match.group(1)}"
    changed = True
    while changed:
        changed = False
        for name, body in bodies.items():
            if name in found:
                continue
            via = next((w for w in sorted(set(re.findall(r"\b[A-Za-z_]\w*\b", body)) & set(found)) if w != name), None)
            if via is not None:
                found[name] = f"calls {via}"
                changed = True
    return found
