"""The fakes are imported one way and started by one fixture each (tests/conftest.py)."""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
HELPERS = {"fakeserver", "pgserver"}
"""Modules of tests/ with fakes; imported as ``tests.<name>``: a bare ``<name>`` would be a second module object."""
STARTS_THE_FAKE = {REPO / "tests" / "conftest.py", REPO / "tests" / "llm" / "test_fakeserver.py"}
"""The ``fake_openai`` fixture, and the tests of the fake itself."""


def _problems(path: Path, source: str) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [f"{path}:{node.lineno}: import {a.name}" for a in node.names if a.name.split(".")[0] in HELPERS]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").split(".")[0] in HELPERS:
            found.append(f"{path}:{node.lineno}: from {node.module} import ...: import it from tests.{node.module}")
        elif (
            isinstance(node, ast.Call)
            and getattr(node.func, "id", None) == "FakeOpenAI"
            and path not in STARTS_THE_FAKE
        ):
            found.append(f"{path}:{node.lineno}: FakeOpenAI(): use the fake_openai fixture")
    return found


def test_the_fakes_are_imported_one_way_and_started_by_their_fixture() -> None:
    files = sorted([*(REPO / "tests").rglob("*.py"), *(REPO / "examples").rglob("*.py")])
    problems = [p for path in files for p in _problems(path, path.read_text(encoding="utf-8"))]
    assert problems == []


def test_the_checker_sees_a_second_import_and_a_second_server() -> None:
    source = "import fakeserver\nfrom pgserver import x\nfrom tests.fakeserver import y\nserver = FakeOpenAI()\n"
    problems = _problems(REPO / "tests" / "engine" / "test_x.py", source)
    assert [p.split(": ", 1)[1].split(":")[0] for p in problems] == [
        "import fakeserver",
        "from pgserver import ...",
        "FakeOpenAI()",
    ]
