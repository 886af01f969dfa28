"""``teamrun validate``: check team files without running anything."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path

import click

from teamrun.config.diagnostics import Diagnostic
from teamrun.config.loader import CheckResult, check_file

_SUFFIXES = (".yaml", ".yml")

HELP = """Check team files: YAML, the JSON Schema, then cross-references.

Reports every problem at once as `file:line:col: error: message`. PATH may be
files or folders (folders are searched for *.yaml and *.yml). Nothing is run:
no model is called and no user code is imported unless --import-check is
given.

\b
Examples:
  teamrun validate team.yaml
  teamrun validate teams/ other/team.yml
  teamrun validate --format github teams/     # annotations in a GitHub workflow
  teamrun validate --format junit teams/ > validate.xml

Exit status: 0 when every file is valid (warnings allowed), 2 otherwise.
"""


def _expand(paths: Iterable[str]) -> Iterator[tuple[str, Diagnostic | None]]:
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            found = sorted(p for p in path.rglob("*") if p.suffix in _SUFFIXES and p.is_file())
            if not found:
                yield raw, Diagnostic(raw, 1, 1, "folder holds no .yaml or .yml files", rule="io")
            for file in found:
                yield str(file), None
        else:
            yield raw, None


def check_paths(paths: Iterable[str], *, import_check: bool = False) -> list[CheckResult]:
    results: list[CheckResult] = []
    for shown, problem in _expand(paths):
        if problem is not None:
            results.append(CheckResult(shown, [problem]))
        else:
            results.append(check_file(shown, import_check=import_check))
            if import_check:  # MCP servers: start each one, check the tool names the file uses
                from teamrun.tools.mcp.check import check_mcp_servers

                results[-1].diagnostics.extend(check_mcp_servers(results[-1]))
    return results


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
    help="Also import every python: tool, hook and filter, and start every MCP server, "
    "to check what the file names exists (runs user code).",
)
@click.option("--strict", is_flag=True, help="Treat warnings as errors.")
def validate(paths: tuple[str, ...], output_format: str, import_check: bool, strict: bool) -> int:
    from teamrun.cli.report import REPORTERS

    results = check_paths(paths, import_check=import_check)
    if strict:
        results = [
            CheckResult(
                r.file,
                [
                    Diagnostic(d.file, d.line, d.column, d.message, "error", d.rule)
                    for d in r.diagnostics
                ],
                r.data,
                r.source_map,
                r.secrets,
            )
            for r in results
        ]
    click.echo(REPORTERS[output_format](results), nl=False)
    return 0 if all(r.ok for r in results) else 2
