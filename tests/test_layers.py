"""The package's layers import only downward (STYLE.md: cli → engine → config, llm, tools → errors, events).

Scans every module's imports (those under ``if TYPE_CHECKING:`` excepted: they
never run) and checks each against the layer table below.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "runner" / "teamrun"

BOTTOM = {"errors", "events", "secrets", "defaults", "logs", "_version"}
"""Everything may import these; they import only each other."""

ALLOWED: dict[str, set[str]] = {
    "cli": {"cli", "evals", "serve", "engine", "observe", "config", "llm", "tools", "store"} | BOTTOM,
    "evals": {"evals", "engine", "checks", "config", "llm", "tools"} | BOTTOM,  # eval and batch: the public engine API
    "serve": {"serve", "engine", "observe", "config", "llm", "tools", "store"} | BOTTOM,  # HTTP over the engine
    "testing": {"testing", "engine", "observe", "config", "llm", "tools"} | BOTTOM,
    "observe": {"observe", "llm"} | BOTTOM,  # consumers of events; ContentCapture wraps a ChatModel
    "engine": {"engine", "checks", "config", "llm", "tools", "store"} | BOTTOM,  # never observe, cli or logging setup
    "checks": {"checks", "config", "llm"} | BOTTOM,  # checks of an answer: eval cases and `accept:`
    "store": {"store"} | BOTTOM,  # threads, runs, journals in SQLite or PostgreSQL (SQLAlchemy, imported lazily)
    "tools": {"tools", "config", "llm"} | BOTTOM,
    "llm": {"llm"} | BOTTOM,  # never observe, config or tools
    "config": {"config"} | BOTTOM,  # never llm: `teamrun validate` must not pay for LiteLLM
    **{name: BOTTOM for name in BOTTOM},
}
"""Layer → the layers its modules may import (``teamrun`` itself, for ``__version__``, is always allowed)."""

LITELLM_IMPORTERS = {"llm/adapter.py"}


def _layer(path: Path) -> str | None:
    relative = path.relative_to(PACKAGE)
    if len(relative.parts) == 1:
        return None if relative.stem == "__init__" else relative.stem
    return relative.parts[0]


def _runtime_imports(tree: ast.Module) -> list[tuple[int, str]]:
    """(line, module) of every import that runs: inside functions too, but not under ``TYPE_CHECKING``."""
    found: list[tuple[int, str]] = []

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.Import):
            found.extend((node.lineno, alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.append((node.lineno, node.module))
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return found


def _modules() -> list[Path]:
    return sorted(p for p in PACKAGE.rglob("*.py") if "__pycache__" not in p.parts)


def test_the_layer_table_names_every_package_and_module() -> None:
    layers = {_layer(p) for p in _modules()} - {None}
    assert layers <= set(ALLOWED), sorted(layers - set(ALLOWED))


def test_imports_point_only_down_the_layers() -> None:
    problems: list[str] = []
    for path in _modules():
        layer = _layer(path)
        if layer is None:
            continue
        for line, module in _runtime_imports(ast.parse(path.read_text(encoding="utf-8"))):
            parts = module.split(".")
            if parts[0] != "teamrun" or len(parts) == 1:
                continue
            if parts[1] not in ALLOWED[layer]:
                problems.append(f"{path.relative_to(PACKAGE)}:{line}: {layer} imports {module}")
    assert problems == []


def test_only_the_adapter_imports_litellm() -> None:
    importers = sorted(
        str(path.relative_to(PACKAGE)) for path in _modules()
        if any(module.split(".")[0] == "litellm"
               for _, module in _runtime_imports(ast.parse(path.read_text(encoding="utf-8")))))
    assert set(importers) <= LITELLM_IMPORTERS, importers


def test_the_checker_sees_a_violation() -> None:
    source = "import os\nif TYPE_CHECKING:\n    import teamrun.cli\ndef f():\n    from teamrun.observe import x\n"
    tree = ast.parse(source)
    assert _runtime_imports(tree) == [(1, "os"), (5, "teamrun.observe")]
