"""The package's layers import only downward (STYLE.md: cli → engine → config, llm, tools → errors, events),
and no two modules of ``runner/teamrun`` import each other, directly or around a circle.

Scans every module's imports and checks each against the layer table below (imports under
``if TYPE_CHECKING:`` excepted: they never run). Imports inside functions count too: a lazy
import that closes a circle still makes two modules depend on each other (it only moves the
failure from import time to call time); lazy imports stay fine for cost (LiteLLM, SQLAlchemy)
as long as they point down. The circle check counts the imports under ``TYPE_CHECKING`` as
well: a circle hidden there is still two modules that need each other's names (issue 43); it
becomes a third module holding what both need (a Protocol or the shared types). Dynamic imports
(``importlib.import_module`` of a string) are not seen.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "runner" / "teamrun"

BOTTOM = {
    "errors",
    "events",
    "secrets",
    "defaults",
    "logs",
    "conventions",
    "extras",
    "money",
    "bounds",
    "terminal",
    "_version",
}
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
        str(path.relative_to(PACKAGE))
        for path in _modules()
        if any(
            module.split(".")[0] == "litellm"
            for _, module in _runtime_imports(ast.parse(path.read_text(encoding="utf-8")))
        )
    )
    assert set(importers) <= LITELLM_IMPORTERS, importers


def test_the_checker_sees_a_violation() -> None:
    source = "import os\nif TYPE_CHECKING:\n    import teamrun.cli\ndef f():\n    from teamrun.observe import x\n"
    tree = ast.parse(source)
    assert _runtime_imports(tree) == [(1, "os"), (5, "teamrun.observe")]


def _module_name(path: Path) -> str:
    parts = ["teamrun", *path.relative_to(PACKAGE).with_suffix("").parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _import_graph(sources: dict[str, str]) -> dict[str, set[str]]:
    """Module → the package modules it imports (at run time, in functions and under ``TYPE_CHECKING`` too).
    ``from a.b import c`` points at the
    module ``a.b.c`` when there is one, else at ``a.b``; the parent packages Python initialises on
    the way are not edges (a package's ``__init__`` importing its own modules is no circle)."""
    graph: dict[str, set[str]] = {name: set() for name in sources}
    for name, source in sources.items():
        for node in _import_nodes(ast.parse(source)):
            targets = (
                [alias.name for alias in node.names]
                if isinstance(node, ast.Import)
                else ([f"{node.module}.{alias.name}" for alias in node.names] + [node.module or ""])
            )
            for target in targets:
                if target in sources and target != name:
                    graph[name].add(target)
                    if isinstance(node, ast.ImportFrom):
                        break  # the most specific module named by this statement
    return graph


def _import_nodes(tree: ast.Module) -> Iterable[ast.Import | ast.ImportFrom]:
    """Every absolute import statement: at the top, in functions and under ``TYPE_CHECKING``."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import) or (isinstance(node, ast.ImportFrom) and node.level == 0 and node.module):
            yield node


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted, in order."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def connect(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph[node]):
            if target not in index:
                connect(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component: list[str] = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            connect(node)
    return sorted(found)


def _describe(circle: list[str], graph: dict[str, set[str]]) -> str:
    """One circle as its modules and, for each, the modules of the circle it imports."""
    short = {name: name.removeprefix("teamrun.") for name in circle}
    return "; ".join(f"{short[m]} → {', '.join(short[t] for t in sorted(graph[m] & set(circle)))}" for m in circle)


def test_no_import_circles_inside_the_package() -> None:
    sources = {_module_name(p): p.read_text(encoding="utf-8") for p in _modules()}
    graph = _import_graph(sources)
    circles = [_describe(circle, graph) for circle in _circles(graph)]
    assert circles == [], "\n".join(["import circles:", *circles])


def test_the_circle_finder_sees_a_circle_through_a_function_local_import() -> None:
    sources = {
        "teamrun.a": "from teamrun.b import x\n",
        "teamrun.b": "def f():\n    from teamrun import c\n",
        "teamrun.c": "import teamrun.a\n",
        "teamrun": "from teamrun.a import x\n",
    }
    graph = _import_graph(sources)
    assert graph["teamrun.c"] == {"teamrun.a"}
    assert graph["teamrun.b"] == {"teamrun.c"}
    assert _circles(graph) == [["teamrun.a", "teamrun.b", "teamrun.c"]]


def test_the_circle_finder_sees_a_circle_hidden_under_type_checking() -> None:
    sources = {
        "teamrun.runtime": "if TYPE_CHECKING:\n    from teamrun.session import Session\n",
        "teamrun.session": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from teamrun.runtime import Run\n",
        "teamrun.calls": "from teamrun.session import Session\nfrom teamrun.runtime import Run\n",
    }
    graph = _import_graph(sources)
    assert graph["teamrun.session"] == {"teamrun.runtime"}
    assert _circles(graph) == [["teamrun.runtime", "teamrun.session"]]
