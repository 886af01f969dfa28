"""The config layer's shape (issue 43 item 6): checks are one module per concern over one small public
interface (``CheckContext``), with no import circle among config's modules — not even one hidden under
``TYPE_CHECKING`` — and nothing in config contacts the network or reads a token (agent cards are read by
the engine, called by ``validate --import-check`` from the CLI)."""

from __future__ import annotations

import ast
from pathlib import Path

from tests.test_layers import _circles

CONFIG = Path(__file__).resolve().parents[2] / "runner" / "teamrun" / "config"
NETWORK = ("httpx", "a2a", "requests", "socket", "urllib.request", "http.client", "aiohttp")


def _name(path: Path) -> str:
    parts = ["teamrun", "config", *path.relative_to(CONFIG).with_suffix("").parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _sources() -> dict[str, ast.Module]:
    return {_name(p): ast.parse(p.read_text(encoding="utf-8")) for p in sorted(CONFIG.rglob("*.py"))}


def _imports(tree: ast.Module) -> set[str]:
    """Every module an import statement names, those under ``TYPE_CHECKING`` and inside functions too."""
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
    return found


def test_no_import_circle_in_config_even_under_type_checking() -> None:
    sources = _sources()
    graph = {name: {m for m in _imports(tree) if m in sources and m != name} for name, tree in sources.items()}
    # a package's __init__ re-exporting its own module is no circle (Python initialises the parent first)
    for name in graph:
        graph[name] = {m for m in graph[name] if not (name.startswith(m + ".") and m + ".__init__" not in sources)}
    assert _circles(graph) == []


def test_each_check_module_sees_only_the_check_context_not_the_runner() -> None:
    sources = _sources()
    checks = [name for name in sources if name.startswith("teamrun.config.checks.")]
    assert "teamrun.config.checks.semantic" in checks and "teamrun.config.checks.context" in checks
    importers = sorted(name for name in checks if "teamrun.config.checks.semantic" in _imports(sources[name]))
    assert importers == []
    other_checks = [
        m for m in _imports(sources["teamrun.config.checks.context"]) if m.startswith("teamrun.config.checks.")
    ]
    assert [m for m in other_checks if not m.startswith("teamrun.config.checks.raw")] == []


def test_nothing_in_config_contacts_the_network() -> None:
    found = sorted(
        f"{name} imports {module}"
        for name, tree in _sources().items()
        for module in _imports(tree)
        if module.split(".")[0] in NETWORK or module in NETWORK
    )
    assert found == []


def test_the_checks_and_the_graph_drawing_are_packages() -> None:
    flat = sorted(p.stem for p in CONFIG.glob("*.py"))
    assert not [stem for stem in flat if stem.endswith("_checks") and stem != "answer_checks"], flat
    assert not [stem for stem in flat if stem.endswith("graph")], flat
    assert "remote_card" not in flat


def _bodies(sources: dict[str, ast.Module]) -> dict[str, list[str]]:
    """Each function body in config (its docstring left out, names of the function's own arguments kept) → where."""
    found: dict[str, list[str]] = {}
    for module, tree in sources.items():
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                body = node.body[1:] if ast.get_docstring(node) is not None else node.body
                if body:
                    key = "\n".join(ast.dump(statement) for statement in body)
                    found.setdefault(key, []).append(f"{module}.{node.name}")
    return found


def test_no_function_is_written_twice_in_config() -> None:
    """What ``duplicates runner/teamrun/config`` found (issue 43.6, item 4): the defensive readers of raw data
    (``checks.raw``), a workspace entry's users, the Mermaid node ids and labels (``graph.nodes``), each once."""
    twice = sorted(", ".join(places) for places in _bodies(_sources()).values() if len(places) > 1)
    assert twice == []
