"""The click command group; each command lives in its own module."""

from __future__ import annotations

import click

from teamrun import __version__
from teamrun.cli.execute_cmd import execute
from teamrun.cli.graph_cmd import graph
from teamrun.cli.schema_cmd import schema
from teamrun.cli.trace_cmd import trace
from teamrun.cli.validate_cmd import validate

HELP = """Run teams of LLM agents declared in YAML.

A supervisor agent delegates sub-tasks to worker agents through tools; each
worker runs in its own context and only its final answer flows back. Every
model call goes through LiteLLM, so any provider works by changing one
string; the built-in `offline` model needs no key and no network.

\b
Examples:
  teamrun validate teams/                   check every team file in a folder
  teamrun validate --format github team.yaml  annotations for a GitHub workflow
  teamrun graph team.yaml                   the delegation graph as Mermaid
  teamrun schema > team.schema.json         the JSON Schema, for editors
  teamrun trace show run.jsonl              the delegation tree of a traced run

Exit codes: 0 done, 1 run failed, 2 invalid config or usage,
3 budget exhausted, 130 interrupted.
"""


@click.group(help=HELP, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(__version__, "--version", prog_name="teamrun")
@click.option("-v", "--verbose", count=True, help="More log output on stderr (-v info, -vv debug).")
@click.option("-q", "--quiet", is_flag=True, help="Only errors on stderr.")
@click.option("--log-format", type=click.Choice(["auto", "console", "json"]), default="auto",
              show_default=True, help="Log lines for people (console) or machines (json, e.g. in CI).")
def cli(verbose: int, quiet: bool, log_format: str) -> None:
    from teamrun.cli.logs import configure_logging

    configure_logging(-1 if quiet else verbose, log_format)  # type: ignore[arg-type]


cli.add_command(execute)
cli.add_command(validate)
cli.add_command(schema)
cli.add_command(graph)
cli.add_command(trace)
