"""``teamrun trace show``: a trace file's delegation tree, as text, JSON or Mermaid; ``trace view``: an HTML page."""

from __future__ import annotations

from pathlib import Path

import click

HELP = """Show trace files written by `teamrun execute --trace FILE`: a tree, or a timeline page."""

SHOW_HELP = """Show the delegation tree of a trace: every agent run with its status,
duration, tokens and cost (tokens and cost are each agent's own model calls;
the run line has the totals).

Works on a trace cut short by a killed run: spans that never ended are marked
'unfinished'. A line that is not a trace record (cut short, or its data not an
object) is skipped, and NaN or Infinity is read as null; each is noted below the
tree.

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
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["text", "json", "mermaid"]),
    default="text",
    show_default=True,
    help="Output format.",
)
@click.option("--calls", is_flag=True, help="Text format: list each model call and tool call too.")
def show(trace_file: str, fmt: str, calls: bool) -> None:
    from teamrun.observe.render import render_trace
    from teamrun.observe.trace_read import read_trace

    click.echo(render_trace(read_trace(trace_file), fmt, calls=calls))  # type: ignore[arg-type]


VIEW_HELP = """Write the view of a trace as one self-contained HTML file (and print its path).

The page shows the run's timeline (agents, model calls, tool calls, waits on
workers, retries; what ran in parallel and the critical path), tokens and cost
per agent, the delegation tree, errors, limits reached and warnings where they
happened, and the answer. Click a bar for its details: with a trace written
with `--trace-content`, a model call's messages and a tool call's input and
output (secrets are masked when the trace is written).

The file needs no server and no network: open it in any browser.

\b
Examples:
  teamrun trace view run.jsonl                  writes run.html beside it
  teamrun trace view run.jsonl -o /tmp/run.html --open
"""


@trace.command(help=VIEW_HELP, short_help="Write a trace's timeline view as an HTML file.")
@click.argument("trace_file", type=click.Path(dir_okay=False))
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False),
    metavar="FILE",
    help="Where to write the page (default: the trace's name with .html).",
)
@click.option(
    "--open",
    "open_page",
    is_flag=True,
    help="Open the page in the default browser (or say on stderr that none could be opened).",
)
def view(trace_file: str, output: str | None, open_page: bool) -> None:
    from teamrun.errors import UsageError
    from teamrun.observe.bidi import isolate
    from teamrun.observe.trace_read import read_trace
    from teamrun.observe.view import render_page
    from teamrun.secrets import Redactor

    read = read_trace(trace_file)
    target = Path(output) if output else Path(trace_file).with_suffix(".html")
    if target.resolve() == Path(trace_file).resolve():
        raise UsageError(f"{trace_file}: the page would overwrite the trace; name another file with -o")
    run = next((r for r in read.roots if r.kind == "run"), None)
    title = f"teamrun · {isolate(run.name)} · {run.attributes.get('run_id', '')}" if run is not None else "teamrun run"
    records = Redactor().value(read.records)  # masked when written; again here, with this environment's secrets
    page = render_page(records, title=title, notes=read.problems, content=read.content)
    try:
        target.write_text(page, encoding="utf-8")
    except OSError as exc:
        raise UsageError(f"cannot write {target}: {exc.strerror}") from None
    click.echo(str(target))
    if open_page and not _open_in_browser(target.resolve()):
        click.echo(f"teamrun: no browser could be opened; open {target.resolve()} by hand", err=True)


def _open_in_browser(page: Path) -> bool:
    """Whether a browser was started on the page (``webbrowser`` answers False, or raises, when none can be)."""
    import webbrowser

    try:
        return webbrowser.open(page.as_uri())
    except webbrowser.Error:
        return False
