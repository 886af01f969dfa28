"""``teamrun validate``: check team files without running anything."""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import click

from teamrun.config.diagnostics import Diagnostic
from teamrun.config.loader import CheckResult, check_file

_SUFFIXES = (".yaml", ".yml")
_IGNORED_FOLDERS = frozenset({"node_modules", "__pycache__", "site-packages", "venv", "env"})
"""Folder names never searched (besides dot-folders such as .git, .venv, .github and folders holding a venv)."""
_TEAM_KEYS = re.compile(r"^(?:agents|supervisor)[ \t]*:", re.MULTILINE)
_SCHEMA_HEADER = re.compile(r"^#\s*yaml-language-server:\s*\$schema=\S*team\.schema\.json", re.MULTILINE)
_SNIFF_BYTES = 256 * 1024

HELP = """Check team files: YAML, the JSON Schema, then cross-references.

Reports every problem at once as `file:line:col: error: message`. PATH may be
files or folders. A file named on the command line is always checked. In a
folder, *.yaml and *.yml files are checked when they look like team files (a
top-level `agents:` or `supervisor:` key, or a yaml-language-server header
naming team.schema.json); dot-folders (.git, .venv, .github...), virtual
environments, node_modules and __pycache__ are not searched. --glob chooses
the files of a folder instead. What was skipped is said on stderr. Nothing is
run: no model is called and no user code is imported unless --import-check is
given.

\b
Examples:
  teamrun validate team.yaml
  teamrun validate teams/ other/team.yml
  teamrun validate --glob 'agents/**/*.team.yml' .
  teamrun validate --format github teams/     # annotations in a GitHub workflow
  teamrun validate --format junit teams/ > validate.xml

Exit status: 0 when every file is valid (warnings allowed), 2 otherwise.
"""


@dataclass
class Skipped:
    """What a folder search left out, for the summary line on stderr."""

    folders: list[str] = field(default_factory=list)
    files: list[str] = field(default_factory=list)

    def summary(self) -> str | None:
        if not self.folders and not self.files:
            return None
        parts = []
        if self.folders:
            names = sorted({Path(f).name for f in self.folders})
            shown = ", ".join(names[:5]) + (", ..." if len(names) > 5 else "")
            parts.append(f"{_count(len(self.folders), 'folder')} ({shown})")
        if self.files:
            parts.append(
                f"{_count(len(self.files), 'YAML file')} that do not look like team files "
                "(no top-level 'agents:' or 'supervisor:')"
            )
        return "validate: skipped " + " and ".join(parts) + "; name files or use --glob to check them"


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'s' if n != 1 else ''}"


def _ignored(folder: Path) -> bool:
    return folder.name.startswith(".") or folder.name in _IGNORED_FOLDERS or (folder / "pyvenv.cfg").is_file()


def _walk(root: Path, skipped: Skipped) -> Iterator[Path]:
    """Every file under ``root``, in sorted order, not descending into ignored folders."""
    for folder, dirs, files in os.walk(root):
        here = Path(folder)
        kept = []
        for name in sorted(dirs):
            if _ignored(here / name):
                skipped.folders.append(str(here / name))
            else:
                kept.append(name)
        dirs[:] = kept
        for name in sorted(files):
            yield here / name


def looks_like_team_file(path: Path) -> bool:
    """A top-level ``agents:``/``supervisor:`` key or the schema header (unreadable files are checked, to say why)."""
    try:
        with path.open("rb") as handle:
            head = handle.read(_SNIFF_BYTES).decode("utf-8", "replace")
    except OSError:
        return True
    return bool(_TEAM_KEYS.search(head) or _SCHEMA_HEADER.search(head))


def _in_folder(root: Path, globs: tuple[str, ...], skipped: Skipped) -> list[Path]:
    if globs:
        chosen = {p for pattern in globs for p in root.glob(pattern) if p.is_file()}
        return sorted(p for p in chosen if not any(_ignored(d) for d in p.relative_to(root).parents if d.name))
    found = []
    for file in _walk(root, skipped):
        if file.suffix not in _SUFFIXES or not file.is_file():
            continue
        if looks_like_team_file(file):
            found.append(file)
        else:
            skipped.files.append(str(file))
    return sorted(found)


def _expand(paths: Iterable[str], globs: tuple[str, ...], skipped: Skipped) -> Iterator[tuple[str, Diagnostic | None]]:
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            before = len(skipped.files)
            found = _in_folder(path, globs, skipped)
            if not found:
                if globs:
                    message = f"no file in this folder matches --glob {' '.join(globs)}"
                elif len(skipped.files) > before:
                    message = (
                        "folder holds no team files: its .yaml/.yml files have no top-level 'agents:' or "
                        "'supervisor:' (name them, or use --glob, to check them anyway)"
                    )
                else:
                    message = "folder holds no .yaml or .yml files"
                yield raw, Diagnostic(raw, 1, 1, message, rule="io")
            for file in found:
                yield str(file), None
        else:
            yield raw, None


def check_paths(
    paths: Iterable[str],
    *,
    import_check: bool = False,
    globs: tuple[str, ...] = (),
    skipped: Skipped | None = None,
) -> list[CheckResult]:
    results: list[CheckResult] = []
    for shown, problem in _expand(paths, globs, skipped if skipped is not None else Skipped()):
        if problem is not None:
            results.append(CheckResult(shown, [problem]))
        else:
            results.append(_check_one(shown, import_check=import_check))
            if import_check:  # MCP servers: start each one, check the tool names the file uses; read a2a: cards
                from teamrun.engine.remote.cards import check_cards
                from teamrun.tools.mcp.check import check_mcp_servers

                result = results[-1]
                result.add([*check_mcp_servers(result), *check_cards(result), *check_fallback_keys(result)])
    return results


_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
"""An environment variable name (the schema's pattern for ``api_key_env``, which reports any other value)."""


def check_fallback_keys(result: CheckResult, environ: Mapping[str, str] | None = None) -> list[Diagnostic]:
    """``--import-check``: each fallback entry's key variable (``api_key_env``, in ``defaults.fallbacks`` and
    each agent's ``fallbacks``) is set, and not empty, in this environment: a fallback whose key is unset fails
    only when the models before it have failed, the worst moment to find out. A value that is no variable name
    is the schema's error, not said again. Read here, above the config layer, which reads no key variable."""
    from teamrun.config.checks.raw import mapping, sequence
    from teamrun.config.diagnostics import JsonPath, dotted

    env = os.environ if environ is None else environ
    data = mapping(result.data)
    lists: list[tuple[JsonPath, dict[str, Any]]] = [
        (("defaults",), mapping(data.get("defaults"))),
        *((("agents", name), mapping(spec)) for name, spec in mapping(data.get("agents")).items()),
    ]
    found: list[Diagnostic] = []
    for at, spec in lists:
        for index, entry in enumerate(sequence(spec.get("fallbacks"))):
            name = mapping(entry).get("api_key_env")
            if isinstance(name, str) and _ENV_NAME.fullmatch(name) and not env.get(name):
                path: JsonPath = (*at, "fallbacks", index, "api_key_env")
                mark = result.source_map.value(path)
                message = (
                    f"{dotted(path)}: the variable {name} is not set (or empty) here; this fallback would fail "
                    "when it is needed: export it with the API key"
                )
                found.append(Diagnostic(result.file, mark.line, mark.column, message, "error", "fallbacks"))
    return found


def _check_one(shown: str, *, import_check: bool) -> CheckResult:
    """One file's result; a bug in a check costs that file's report, not the rest of the folder's."""
    try:
        return check_file(shown, import_check=import_check)
    except Exception as exc:  # a bug in teamrun, not in the file: say so, and carry on
        message = f"internal error while checking this file ({type(exc).__name__}: {exc}); please report it"
        return CheckResult(shown, [Diagnostic(shown, 1, 1, message, rule="internal")])


@click.command(help=HELP, short_help="Check team files (schema, references, templates).")
@click.argument("paths", nargs=-1, required=True, metavar="PATH...")
@click.option(
    "--format",
    "output_format",
    type=click.Choice(["text", "json", "github", "junit"]),
    default="text",
    show_default=True,
    help="How to report problems.",
)
@click.option(
    "--import-check",
    is_flag=True,
    help="Also import every python: tool, hook and filter, start every MCP server, and read every a2a: "
    "agent's card (contacts it), to check what the file names exists (runs user code).",
)
@click.option("--strict", is_flag=True, help="Treat warnings as errors.")
@click.option(
    "--glob",
    "globs",
    multiple=True,
    metavar="PATTERN",
    help="In folders, check the files matching this pattern (e.g. '**/*.team.yaml'), team-like or not. Repeatable.",
)
def validate(
    paths: tuple[str, ...], output_format: str, import_check: bool, strict: bool, globs: tuple[str, ...]
) -> int:
    from teamrun.cli.report import REPORTERS

    skipped = Skipped()
    results = check_paths(paths, import_check=import_check, globs=globs, skipped=skipped)
    note = skipped.summary()
    if note:
        click.echo(note, err=True)
    if strict:
        results = [
            CheckResult(
                r.file,
                [Diagnostic(d.file, d.line, d.column, d.message, "error", d.rule) for d in r.diagnostics],
                r.data,
                r.source_map,
                r.secrets,
            )
            for r in results
        ]
    click.echo(REPORTERS[output_format](results), nl=False)
    return 0 if all(r.ok for r in results) else 2
