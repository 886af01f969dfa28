"""The two test tiers, decided from what each test uses (tests/conftest.py marks every collected test).

* ``inprocess``: the test runs in this Python process alone (the ``offline`` or a scripted model,
  the CLI through ``main([...])``, SQLite in ``tmp_path``): ``pytest -m inprocess``, the fast tier.
* ``outofprocess``: the test starts or talks to something outside it: a subprocess, the fake OpenAI
  HTTP server, PostgreSQL, Chromium, Ray, MCP servers, uvicorn. Its marker holds the reason:
  ``pytest -m outofprocess --collect-only -q`` lists them.

A test is ``outofprocess`` when it, one of its fixtures, or a helper of the same module that one of
them names, uses a fixture of :data:`OUTSIDE_FIXTURES`, a PostgreSQL parameter, or one of
:data:`OUTSIDE_WORDS`. Conservative by design: a test wrongly put here only runs in the slower
tier; the full suite (``pytest``) runs both tiers.
"""

from __future__ import annotations

import ast
import functools
import inspect
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

__all__ = ["OUTSIDE_FIXTURES", "OUTSIDE_WORDS", "mark", "outside_reason"]

TESTS_ROOT = Path(__file__).resolve().parents[1]
TEST_FOLDERS = ("tests", "examples")
"""Fixtures and helpers defined in these folders are read; pytest's and teamrun's are not."""

OUTSIDE_FIXTURES = {
    "fake_openai": "the fake OpenAI HTTP server",
    "postgres_server": "a PostgreSQL server",
    "serve": "a uvicorn server",
    "everything_url": "the npm MCP server",
    "time_server": "an MCP server process",
    "git_server": "an MCP server process",
}
OUTSIDE_WORDS = re.compile(
    r"\b(subprocess|Popen|pexpect|sys\.executable|playwright|chromium|ray|uvicorn|FakeOpenAI|multiprocessing"
    r"|RunningServer|PostgresServer)\b"
)


def outside_reason(item: pytest.Item) -> str | None:
    """Why ``item`` is out of process (``None``: it runs in process)."""
    for name in getattr(item, "fixturenames", ()):
        if name in OUTSIDE_FIXTURES:
            return f"fixture {name}: {OUTSIDE_FIXTURES[name]}"
    callspec = getattr(item, "callspec", None)
    if callspec is not None and "postgres" in [str(v) for v in callspec.params.values()]:
        return "parameter postgres: a PostgreSQL server"
    functions: list[tuple[str, Callable[..., Any]]] = []
    if isinstance(item, pytest.Function):
        functions.append((item.name, item.function))
        info = getattr(item, "_fixtureinfo", None)
        for name, definitions in (info.name2fixturedefs.items() if info is not None else ()):
            functions.extend((f"fixture {name}", d.func) for d in definitions)
    elif not str(item.path).endswith(".py"):
        return "not a Python test"
    for label, function in functions:
        reason = _function_reason(function)
        if reason is not None:
            return f"{label}: {reason}"
    return None


def mark(items: list[pytest.Item]) -> None:
    """Give every item its tier marker."""
    for item in items:
        reason = outside_reason(item)
        item.add_marker(pytest.mark.outofprocess(reason) if reason is not None else pytest.mark.inprocess)


def _function_reason(function: Callable[..., Any]) -> str | None:
    function = inspect.unwrap(function)
    try:
        path = Path(inspect.getsourcefile(function) or "").resolve()
    except TypeError:
        return None  # built in
    if not path.is_relative_to(TESTS_ROOT) or path.relative_to(TESTS_ROOT).parts[0] not in TEST_FOLDERS:
        return None  # pytest's own fixtures, teamrun's plugin: they run in process
    try:
        source = inspect.getsource(function)
    except OSError:
        return "source unavailable"
    return _source_reason(source, _outside_helpers(path))


def _source_reason(source: str, helpers: dict[str, str]) -> str | None:
    found = OUTSIDE_WORDS.search(source)
    if found is not None:
        return f"uses {found.group(1)}"
    for word in sorted(set(re.findall(r"\b[A-Za-z_]\w*\b", source)) & set(helpers)):
        return f"calls {word}, which {helpers[word]}"
    return None


@functools.cache
def _outside_helpers(path: Path) -> dict[str, str]:
    """The module's top-level functions and classes that reach outside, directly or through each other."""
    source = path.read_text(encoding="utf-8")
    bodies = {node.name: ast.get_source_segment(source, node) or ""
              for node in ast.parse(source).body
              if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)}
    found: dict[str, str] = {}
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
