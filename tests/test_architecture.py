"""ARCHITECTURE.md says the truth about the package: it places every module, its layer table is the one
``tests/test_layers.py`` enforces, only the journal's own modules read raw journal entries, and serve's
``create_app`` only assembles the app (at most 60 lines, no function inside it).

**Where a module is placed** (the rule :func:`placed` applies): a module of ``runner/teamrun`` is placed when
ARCHITECTURE.md names it

- by its path from ``runner/teamrun/``, with or without ``.py`` (``engine/kinds.py``, ``llm/router``), or
- by its name as a whole word in an entry of its folder: in a fenced code block, a line that starts (column 0) with
  the folder's path and a slash (``engine/turn/``) or with a module of that folder (``serve/state.py``), and the
  indented lines under it (``engine/turn/   agent_loop (the loop), turn_plan ...`` places ``agent_loop``), or
- for a top-level module (``bounds.py``), by its name in backticks (the bottom row of the layer table).

A package's ``__init__.py`` is placed by an entry of its folder. So a new module needs one word in its folder's
entry, and a new folder one entry line.
"""

from __future__ import annotations

import ast
import re

from tests.test_layers import ALLOWED, BOTTOM, PACKAGE

ARCHITECTURE = PACKAGE.parents[1] / "ARCHITECTURE.md"

_ENTRY_START = re.compile(r"([a-z_0-9]+(?:/[a-z_0-9]+)*)/([a-z_0-9]+\.py)?(?=\s|$)")


def folder_entries(text: str) -> dict[str, str]:
    """Folder (``engine/turn``, ``serve``) → the text of its entries in the document's code blocks."""
    entries: dict[str, list[str]] = {}
    in_code, current = False, None
    for line in text.splitlines():
        if line.startswith("```"):
            in_code, current = not in_code, None
            continue
        if not in_code:
            continue
        start = _ENTRY_START.match(line)
        if start is not None:
            current = start.group(1)
            entries.setdefault(current, []).append(line[start.end() :])
        elif current is not None and line.startswith(" "):
            entries[current].append(line)
        else:
            current = None
    return {folder: "\n".join(lines) for folder, lines in entries.items()}


def placed(module: str, text: str, entries: dict[str, str]) -> bool:
    """Whether the document places ``module`` (a path from ``runner/teamrun/``, ``engine/turn/answer.py``)."""
    folder, _, filename = module.rpartition("/")
    name = filename.removesuffix(".py")
    if name == "__init__":
        return folder == "" or folder in entries
    path = module.removesuffix(".py")
    if re.search(rf"(?<![\w/]){re.escape(path)}(?:\.py)?(?!\w)", text):
        return True
    if folder == "":
        return f"`{name}`" in text
    return folder in entries and re.search(rf"(?<![\w/]){re.escape(name)}(?!\w)", entries[folder]) is not None


def _modules() -> list[str]:
    return sorted(str(p.relative_to(PACKAGE)) for p in PACKAGE.rglob("*.py") if "__pycache__" not in p.parts)


def test_architecture_places_every_module() -> None:
    text = ARCHITECTURE.read_text(encoding="utf-8")
    entries = folder_entries(text)
    unplaced = [m for m in _modules() if not placed(m, text, entries)]
    assert unplaced == [], f"ARCHITECTURE.md does not place these modules (see this test's docstring): {unplaced}"


def test_the_placing_rule() -> None:
    text = (
        "Intro `bounds` and `engine/kinds.py`, llm/router.\n"
        "```\n"
        "engine/turn/          agent_loop (the loop), turn_plan\n"
        "                      answer (the last turn)\n"
        "serve/state.py        ServeState; settings (ServeSettings)\n"
        "```\n"
        "answer_cmd outside any block\n"
    )
    entries = folder_entries(text)
    assert set(entries) == {"engine/turn", "serve"}
    assert all(
        placed(m, text, entries)
        for m in [
            "bounds.py",
            "engine/kinds.py",
            "llm/router.py",
            "engine/turn/agent_loop.py",
            "engine/turn/answer.py",
            "engine/turn/__init__.py",
            "serve/settings.py",
            "serve/state.py",
        ]
    )
    assert not any(
        placed(m, text, entries)
        for m in [
            "money.py",  # named nowhere
            "cli/answer_cmd.py",  # its name, but not in an entry of cli/
            "engine/turn/plan.py",  # only inside a longer word (turn_plan)
            "engine/kinds/__init__.py",  # no entry for the folder
            "llm/routers.py",
            "engine/workflow/workspace.py",  # `workflow/workspace.py` is not a path from runner/teamrun/
        ]
    )


def layer_table(text: str) -> dict[str, set[str]]:
    """Layer → what it may import, from the first Markdown table whose header starts with ``Layer``.

    A row's first cell names its layers in backticks; its second cell is a comma-separated list of layers
    (text in parentheses is a comment), ``—`` for none, or ``each other`` (the row's own layers)."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("| Layer"))
    table: dict[str, set[str]] = {}
    for row in lines[start + 2 :]:
        if not row.startswith("|"):
            break
        cells = [cell.strip() for cell in row.strip().strip("|").split("|")]
        layers = re.findall(r"`([a-z_]+)`", cells[0])
        said = re.sub(r"\([^)]*\)", "", cells[1]).strip()
        if said == "each other":
            names = set(layers)
        elif said in {"—", "-", ""}:
            names = set()
        else:
            names = {name.strip() for name in said.split(",")}
        for layer in layers:
            assert layer not in table, f"layer {layer!r} has two rows in ARCHITECTURE.md's layer table"
            table[layer] = names
    return table


def test_the_layer_table_is_the_one_the_layer_test_enforces() -> None:
    documented = layer_table(ARCHITECTURE.read_text(encoding="utf-8"))
    enforced = {
        layer: (set(BOTTOM) if layer in BOTTOM else allowed - BOTTOM - {layer}) for layer, allowed in ALLOWED.items()
    }
    assert documented == enforced


def test_the_layer_table_reader() -> None:
    text = (
        "| Layer (`runner/teamrun/`) | May import | What it is |\n"
        "|---|---|---|\n"
        "| `evals` | engine (public API), checks | batch |\n"
        "| `store` | — | threads |\n"
        "| `errors`, `money` | each other | the bottom |\n"
        "\n"
        "| Other | table |\n"
    )
    assert layer_table(text) == {
        "evals": {"engine", "checks"},
        "store": set(),
        "errors": {"errors", "money"},
        "money": {"errors", "money"},
    }


JOURNAL_MODULES = ("engine/durability/", "store/journal.py", "store/memory_journal.py")
"""The journal: its entry kinds, records and replay (``engine/durability/``), its store backend, and the redaction
``teamrun memory forget`` makes in the journals of a resource's runs (in the forget's transaction, in the store)."""

RAW_JOURNAL_READERS: set[str] = set()
"""Modules besides :data:`JOURNAL_MODULES` that still read raw journal payloads: none (the served run's stored
workspace reads its journal through ``Replay`` too). Nothing may join this set."""


def _raw_journal_reads(tree: ast.Module) -> list[str]:
    return [
        f"{ast.unparse(node)} (line {node.lineno})"
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute)
        and (node.attr == "payload" or (node.attr == "entries" and "replay" in ast.unparse(node.value).lower()))
    ]


def test_only_the_journal_modules_read_raw_journal_entries() -> None:
    """Journal entries are read through the typed ``Replay`` accessors; a raw ``entry.payload`` or
    ``replay.entries`` appears only in the journal's modules (``engine/durability/``, where the entry kinds and
    their records are, and the store's journal backend)."""
    found: dict[str, list[str]] = {}
    for module in _modules():
        if module.startswith(JOURNAL_MODULES) or module in RAW_JOURNAL_READERS:
            continue
        reads = _raw_journal_reads(ast.parse((PACKAGE / module).read_text(encoding="utf-8")))
        if reads:
            found[module] = reads
    assert found == {}
    for module in RAW_JOURNAL_READERS:
        assert _raw_journal_reads(ast.parse((PACKAGE / module).read_text(encoding="utf-8"))), (
            f"{module} no longer reads raw journal entries: take it out of RAW_JOURNAL_READERS"
        )


def test_no_journal_entry_kind_is_silenced_for_the_type_checker() -> None:
    """A journal entry's kind is one of ``EntryKind``'s values; none is forced past mypy."""
    silenced = [
        f"{module}:{number}"
        for module in _modules()
        for number, line in enumerate((PACKAGE / module).read_text(encoding="utf-8").splitlines(), 1)
        if "type: ignore" in line and re.search(r"EntryKey|JournalEntry|EntryKind|entry_kind", line)
    ]
    assert silenced == []


CREATE_APP_MOST_LINES = 60
"""Issue 43 item 5: ``create_app`` only assembles the routers (it was a 319-line closure factory)."""


def _function(source: str, name: str) -> ast.FunctionDef:
    """The module-level function ``name`` of ``source``."""
    found = [n for n in ast.parse(source).body if isinstance(n, ast.FunctionDef) and n.name == name]
    assert len(found) == 1, f"{name} is not one module-level function"
    return found[0]


def _lines(function: ast.FunctionDef) -> int:
    """The function's lines, from its first decorator (or ``def``) to its last, docstring included."""
    first = min([function.lineno, *(d.lineno for d in function.decorator_list)])
    assert function.end_lineno is not None
    return function.end_lineno - first + 1


def _inner_functions(function: ast.FunctionDef) -> list[str]:
    return [
        n.name
        for n in ast.walk(function)
        if n is not function and isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)
    ]


def test_create_app_only_assembles_the_app() -> None:
    create_app = _function((PACKAGE / "serve" / "app.py").read_text(encoding="utf-8"), "create_app")
    assert _lines(create_app) <= CREATE_APP_MOST_LINES, f"create_app is {_lines(create_app)} lines"
    assert _inner_functions(create_app) == []  # no closure factory: routes live in serve/routes/


def test_the_function_measures() -> None:
    source = "import x\n\n@decorated\ndef f(a):\n    '''Doc.'''\n    def g():\n        return 1\n    return g\n"
    f = _function(source, "f")
    assert (_lines(f), _inner_functions(f)) == (6, ["g"])
