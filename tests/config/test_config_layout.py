"""The config layer's shape (issue 43 item 6): checks are one module per concern over one small public
interface (``CheckContext``), with no import circle among config's modules — not even one hidden under
``TYPE_CHECKING`` — and nothing in config contacts the network (agent cards are read by the engine, called by
``validate --import-check`` from the CLI) or reads the process environment but the ``${VAR}`` interpolation."""

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


ENVIRONMENT_READER = "teamrun.config.loader.check_text"
"""The one place in config that reads the process environment: the loader's ``${VAR}`` interpolation, where
``check_text`` hands ``os.environ`` (or the caller's ``environ``) to the ``Interpolator``. Whether a key variable is
set is ``validate --import-check``'s, in the CLI; an ``a2a:`` agent's bearer token is read by the engine
(``engine/remote/cards.py``) (issue 43 item 6); a program is looked up on ``PATH`` by ``shutil.which`` as the
started server would, not by reading the variable here."""

_OS_ENVIRONMENT = {"environ", "environb", "getenv", "getenvb"}


def _environment_reads(module: str, tree: ast.Module) -> list[str]:
    """``module.function:line`` of each ``os.environ`` / ``os.getenv`` (``from os import environ`` too) in ``tree``."""
    found: list[str] = []

    def visit(node: ast.AST, where: str) -> None:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            where = f"{where}.{node.name}"
        read = (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id == "os"
            and node.attr in _OS_ENVIRONMENT
        ) or (
            isinstance(node, ast.ImportFrom)
            and node.module == "os"
            and any(alias.name in _OS_ENVIRONMENT for alias in node.names)
        )
        if read:
            found.append(f"{where}:{getattr(node, 'lineno', 0)}")
        for child in ast.iter_child_nodes(node):
            visit(child, where)

    visit(tree, module)
    return found


def test_nothing_in_config_reads_the_process_environment_but_the_interpolation() -> None:
    reads = [read for name, tree in _sources().items() for read in _environment_reads(name, tree)]
    assert [read for read in reads if read.rsplit(":", 1)[0] != ENVIRONMENT_READER] == []
    assert [read.rsplit(":", 1)[0] for read in reads] == [ENVIRONMENT_READER]  # the allowed place is still there


def test_the_environment_checker_sees_a_read() -> None:
    source = (
        "import os\nfrom os import getenv\ndef key(name):\n    return os.environ.get(name)\n"
        "class C:\n    def f(self):\n        return os.getenv('X')\ndef g(environ):\n    return environ.get('X')\n"
    )
    assert _environment_reads("m", ast.parse(source)) == ["m:2", "m.key:4", "m.C.f:7"]
