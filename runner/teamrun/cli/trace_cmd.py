"""``teamrun trace show``: a trace file's delegation tree, as text, JSON or Mermaid."""

from __future__ import annotations

import click

HELP = """Read trace files written by `teamrun execute --trace FILE`."""

SHOW_HELP = """Show the delegation tree of a trace: every agent run with its status,
duration, tokens and cost (tokens and cost are each agent's own model calls;
the run line has the totals).

Works on a trace cut short by a killed run: spans that never ended are marked
'unfinished'.

\b
Examples:
  teamrun trace show run.jsonl
  teamrun trace show run.jsonl --calls            also each model and tool call
  teamrun trace show run.jsonl --format json      every span, nested, for tools
  teamrun trace show run.jsonl --format mermaid   a flowchart for docs and PRs
"""


@click.group(help=HELP, short_help="Show trace files.")
def trace() -> None:
    pass


@trace.command(help=SHOW_HELP, short_help="Show a trace's delegation tree.")
@click.argument("trace_file", type=click.Path(dir_okay=False))
@click.option("--format", "fmt", type=click.Choice(["text", "json", "mermaid"]), default="text",
              show_default=True, help="Output format.")
@click.option("--calls", is_flag=True, help="Text format: list each model call and tool call too.")
def show(trace_file: str, fmt: str, calls: bool) -> None:
    from teamrun.observe.render import render_trace
    from teamrun.observe.trace_read import read_trace

    click.echo(render_trace(read_trace(trace_file), fmt, calls=calls))  # type: ignore[arg-type]
