"""ARCHITECTURE.md's promise, checked on the source: the workspace and its boards change through one path.

A workspace's state is assigned only in ``engine/workspace/state.py`` (its one version counter); a write, a board
operation or a restore is called only from the functions listed here — the rules themselves, the ``decide``
functions each writer hands to :func:`teamrun.engine.workspace.changes.apply_change`, and the run's start (the
journal's or the thread's workspace restored). A module that changes the workspace another way fails this test.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import teamrun

PACKAGE = Path(teamrun.__file__).parent
STATE_FIELDS = {"version", "value", "writers", "keys", "key_writers", "entries"}
"""What a workspace (``WorkspaceState``) or one of its entries (``EntryState``) holds."""
WORKSPACE_CHANGES = {"write", "commit", "restore", "reset", "start_at"}
BOARD_CHANGES = {"post", "claim", "complete", "release"}
ALLOWED: dict[str, set[str]] = {
    "engine/workspace/board.py": {"Board._apply"},  # the board's rules, on the state's counter
    "engine/workspace/writes.py": {"_decide", "restore_from_journal"},
    "engine/workspace/board_calls.py": {"_outcome", "_claim"},
    "engine/workflow/workspace.py": {"write_step_output.write"},
    "engine/workspace/answers.py": {"_write"},  # an answer written by declaration (answer_to)
    "engine/peers/driver.py": {"_post", "_take_back.release"},
    "engine/workspace/carry.py": {"carry_over"},  # a new run starts from its thread's kept workspace
    "engine/memory/working.py": {"_load"},  # a resource's working memory loaded as the run starts (apply_change)
    "serve/workspace.py": {"stored_workspace"},  # a copy restored from a stored journal, for reading
}
"""Who calls a change: module → functions (``outer.inner`` for a nested one)."""
WRITERS = (
    "engine/workspace/writes.py",
    "engine/workspace/board_calls.py",
    "engine/workflow/workspace.py",
    "engine/workspace/answers.py",
    "engine/memory/working.py",
)
"""The modules whose changes are made through ``apply_change`` (the driver too, below)."""


def _functions(tree: ast.AST, prefix: str = "") -> Iterator[tuple[str, ast.AST]]:
    """Every function of ``tree`` by its dotted name, with the body it owns (not its nested functions')."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            name = f"{prefix}{node.name}"
            if not isinstance(node, ast.ClassDef):
                yield name, node
            yield from _functions(node, f"{name}.")
        else:
            yield from _functions(node, prefix)


def _own(function: ast.AST) -> Iterator[ast.AST]:
    """The nodes of ``function`` outside its nested functions."""
    for node in ast.iter_child_nodes(function):
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda | ast.ClassDef):
            yield node
            yield from _own(node)


def _changes(function: ast.AST) -> Iterator[str]:
    """The workspace or board changes ``function`` calls itself."""
    for node in _own(function):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            receiver = ast.unparse(node.func.value).lower()
            on_workspace = node.func.attr in WORKSPACE_CHANGES and ("workspace" in receiver or receiver == "state")
            on_board = node.func.attr in BOARD_CHANGES and "board" in receiver
            if on_workspace or on_board:
                yield ast.unparse(node.func)


def _assigned_state(tree: ast.AST) -> Iterator[str]:
    """Assignments to a workspace's or an entry's fields (``state.version = ...``, ``entry.value = ...``)."""
    for node in ast.walk(tree):
        targets = node.targets if isinstance(node, ast.Assign) else []
        if isinstance(node, ast.AugAssign | ast.AnnAssign):
            targets = [node.target]
        for target in targets:
            for part in ast.walk(target):
                if isinstance(part, ast.Attribute) and part.attr in STATE_FIELDS:
                    owner = ast.unparse(part.value).lower()
                    if any(word in owner for word in ("workspace", "state", "entry")):
                        yield f"{ast.unparse(target)} (line {node.lineno})"


def _modules() -> Iterator[tuple[str, ast.AST]]:
    for path in sorted(PACKAGE.rglob("*.py")):
        yield path.relative_to(PACKAGE).as_posix(), ast.parse(path.read_text(encoding="utf-8"))


def test_only_the_state_assigns_the_workspace_s_fields() -> None:
    found = {
        module: list(_assigned_state(tree)) for module, tree in _modules() if module != "engine/workspace/state.py"
    }
    assert {module: lines for module, lines in found.items() if lines} == {}


def test_the_workspace_and_its_boards_are_changed_only_through_the_one_path() -> None:
    found: dict[str, set[str]] = {}
    for module, tree in _modules():
        if module == "engine/workspace/state.py":
            continue
        for name, function in _functions(tree):
            if any(True for _ in _changes(function)):
                found.setdefault(module, set()).add(name)
    strays = {m: names - ALLOWED.get(m, set()) for m, names in found.items() if names - ALLOWED.get(m, set())}
    assert strays == {}, "change the workspace through engine/workspace/changes.py:apply_change"
    for module in (*WRITERS, "engine/peers/driver.py"):
        source = (PACKAGE / module).read_text(encoding="utf-8")
        assert "apply_change(" in source, f"{module} changes the workspace without apply_change"


def test_in_the_engine_only_durability_reads_journal_payloads() -> None:
    """Journal entries are read through typed Replay accessors (`replay.change`, `workspace_states`, ...), never by
    their raw payloads or `replay.entries` outside engine/durability/."""
    found = {}
    for module, tree in _modules():
        if not module.startswith("engine/") or module.startswith("engine/durability/"):
            continue
        raw = [
            f"{ast.unparse(node)} (line {node.lineno})"
            for node in ast.walk(tree)
            if isinstance(node, ast.Attribute)
            and (node.attr == "payload" or (node.attr == "entries" and "replay" in ast.unparse(node.value)))
        ]
        if raw:
            found[module] = raw
    assert found == {}
