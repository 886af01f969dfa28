"""``teamrun execute``: run a team and print its answer."""

from __future__ import annotations

import asyncio
import contextlib
import json
import signal
import sys
from typing import Any

import click

from teamrun.cli.app import LogSettings
from teamrun.errors import UsageError
from teamrun.logs import add_log_secrets, hidden_log_events, log_line

HELP = """Run a team on an input and print the final answer on stdout.

The input comes from --input, --input-file, or stdin. Progress goes to
stderr: a live tree of agents on a terminal, plain lines otherwise. Ctrl-C
stops every running agent and still prints what finished (exit 130).

\b
Examples:
  teamrun execute teams/research-report.yaml --input "Compare Rust and Go"
  echo "Review this" | teamrun execute team.yaml
  teamrun execute team.yaml -i "..." --model openai/gpt-4o-mini
  teamrun execute team.yaml -i "..." --var audience=engineers --json
  teamrun execute team.yaml -i "..." --approve grep,git_log   # for CI
  teamrun execute team.yaml -i "..." --trace run.jsonl && teamrun trace show run.jsonl
  teamrun execute team.yaml -i "..." --record run.cassette.jsonl   # a real run, once
  teamrun execute team.yaml -i "..." --replay run.cassette.jsonl   # offline, in CI
  teamrun execute team.yaml -i "..." --thread support-42   # continue a conversation

Exit codes: 0 done, 1 run failed, 2 invalid config or usage,
3 budget exhausted, 130 interrupted.
"""

_EXIT = {"done": 0, "failed": 1, "budget_exhausted": 3, "cancelled": 130}


def _parse_vars(items: tuple[str, ...]) -> dict[str, str]:
    parsed: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise UsageError(f"--var expects NAME=VALUE, got '{item}'")
        parsed[key.strip()] = value
    return parsed


def _read_input(text: str | None, file: str | None) -> str:
    if text is not None and file is not None:
        raise UsageError("give the input with --input or --input-file, not both")
    if text is not None:
        source, task = "--input", text
    elif file is not None:
        try:
            with open(file, encoding="utf-8") as handle:
                source, task = f"--input-file {file}", handle.read()
        except OSError as exc:
            raise UsageError(f"cannot read --input-file {file}: {exc.strerror}") from None
    elif sys.stdin.isatty():
        raise UsageError("no input: pass --input TEXT, --input-file FILE, or pipe it on stdin")
    else:
        source, task = "stdin", sys.stdin.read()
    if not task.strip():
        raise UsageError(f"the input ({source}) is empty: give the supervisor a task with --input TEXT, "
                         "--input-file FILE, or on stdin")
    return task


def _starting_line(team: Any) -> str:
    """What is about to run, shown before anything slow (such as importing LiteLLM) happens."""
    agents = len(team.config.agents)
    models = team.models()
    label = "model" if len(models) == 1 else "models"
    shown = ", ".join(models[:3]) + (f" and {len(models) - 3} more" if len(models) > 3 else "")
    return f"starting {team.name} ({agents} agent{'s' if agents != 1 else ''}, {label} {shown})"


async def _run_with_interrupt(team: Any, task: str, subscribers: list[Any], thread: str | None = None) -> Any:
    cancel = asyncio.Event()
    loop = asyncio.get_running_loop()
    try:
        loop.add_signal_handler(signal.SIGINT, cancel.set)
        loop.add_signal_handler(signal.SIGTERM, cancel.set)
    except (NotImplementedError, RuntimeError):  # not the main thread, or no signals here
        pass
    try:
        return await team.run(task, subscribers=subscribers, cancel=cancel, thread=thread)
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM):
            try:
                loop.remove_signal_handler(sig)
            except (NotImplementedError, RuntimeError):
                pass


@click.command(help=HELP, short_help="Run a team and print its answer.")
@click.argument("team_file", type=click.Path(dir_okay=False))
@click.option("-i", "--input", "input_text", help="The task for the supervisor.")
@click.option("--input-file", type=click.Path(dir_okay=False), help="Read the task from this file.")
@click.option("--var", "variables", multiple=True, metavar="NAME=VALUE", help="Template variable (repeatable).")
@click.option("--model", help="Use this LiteLLM model for every agent (e.g. offline, openai/gpt-4o-mini).")
@click.option("--json", "as_json", is_flag=True, help="Print the whole result as JSON instead of the answer.")
@click.option("--approve", metavar="all|none|TOOL,...",
              help="Answer approval prompts up front (for scripts and CI).")
@click.option("--progress", type=click.Choice(["auto", "tree", "plain", "none"]), default="auto",
              show_default=True,
              help="How to show progress on stderr (auto: a tree on a terminal, plain lines otherwise, "
                   "one JSON line per event with --log-format json, none with -q).")
@click.option("--trace", "trace_path", type=click.Path(dir_okay=False), metavar="FILE",
              help="Write every event as a JSON line to FILE, as it happens (see `teamrun trace show`).")
@click.option("--trace-content", is_flag=True,
              help="Include prompts, tasks, answers and tool payloads in the trace / OTel spans.")
@click.option("--otel", is_flag=True,
              help="Export spans with OpenTelemetry (OTLP endpoint from OTEL_EXPORTER_OTLP_* variables).")
@click.option("--record", "record_path", type=click.Path(dir_okay=False), metavar="CASSETTE",
              help="Store every model exchange in CASSETTE (JSON lines) for --replay.")
@click.option("--replay", "replay_path", type=click.Path(dir_okay=False), metavar="CASSETTE",
              help="Answer every model call from CASSETTE, with no network.")
@click.option("--replay-mode", type=click.Choice(["strict", "lenient"]), default=None,
              help="strict (default): fail on a request that was not recorded; lenient: use the next "
                   "recorded reply of that agent and turn.")
@click.option("--thread", "thread_id", metavar="ID",
              help="Continue the conversation ID (a new ID starts one): earlier turns are kept in the store.")
@click.option("--store", "store_location", metavar="PATH|URL",
              help="The store for threads: a SQLite file or a SQLAlchemy URL (postgresql+psycopg://...). "
                   "Default: $TEAMRUN_STORE, else ~/.local/share/teamrun/teamrun.db.")
def execute(team_file: str, input_text: str | None, input_file: str | None, variables: tuple[str, ...],
            model: str | None, as_json: bool, approve: str | None, progress: str, trace_path: str | None,
            trace_content: bool, otel: bool, record_path: str | None, replay_path: str | None,
            replay_mode: str | None, thread_id: str | None, store_location: str | None) -> int:
    from teamrun.engine.team import load_team
    from teamrun.secrets import Redactor
    from teamrun.tools.approval import ApprovalPolicy, choose_approver

    _check_observe_flags(trace_path, trace_content, otel, record_path, replay_path, replay_mode)
    logs = _log_settings()
    redactor = Redactor()
    with contextlib.ExitStack() as cleanup:
        writer = _trace_writer(trace_path, trace_content, redactor, cleanup)
        team = load_team(team_file, vars=_parse_vars(variables), model=model, record=record_path,
                         replay=replay_path, replay_mode="lenient" if replay_mode == "lenient" else "strict",
                         wrap_model=_content_capture if trace_content else None, store=store_location)
        redactor.add(team.loaded.secrets)
        add_log_secrets(team.loaded.secrets)
        for warning in team.loaded.warnings:
            _say(logs, "warning", "config_warning", warning.render())
        if approve is not None:
            from teamrun.tools.mcp.table import approvable_names  # MCP tools named in the file

            team.approver = choose_approver(ApprovalPolicy.parse(approve, known_tools=approvable_names(team.tools)))
        else:
            team.approver = choose_approver(None)
        task = _read_input(input_text, input_file)
        subscribers: list[Any] = []
        view = _progress_view(progress, logs)
        if view is not None:  # at once: LiteLLM's import may follow, and take seconds
            _say(logs, "info", "run_starting", _starting_line(team))
            subscribers.append(view)
            if getattr(view, "shows_warnings", False):  # say each warning once: in the view, not as a log line too
                cleanup.enter_context(hidden_log_events("run_warning"))
        if writer is not None:
            subscribers.append(writer)
        if otel:
            subscribers.append(_otel_exporter(trace_content, redactor, cleanup))
        result = asyncio.run(_run_with_interrupt(team, task, subscribers, thread_id))
    if as_json:
        click.echo(json.dumps(result.as_dict(), indent=2, ensure_ascii=False))
    else:
        if result.final_text or result.status == "done":
            click.echo(result.final_text)
        if result.status != "done":
            _say(logs, "error", "run_not_done",
                 f"teamrun: run {result.status}" + (f" ({result.stopped_by})" if result.stopped_by else "")
                 + (f": {result.error}" if result.error else ""),
                 status=result.status, stopped_by=result.stopped_by, error=result.error)
    return _EXIT[result.status]


def _log_settings() -> LogSettings:
    found = click.get_current_context().find_object(LogSettings)
    return found if found is not None else LogSettings(0, "console")


def _say(logs: LogSettings, level: str, event: str, text: str, **fields: Any) -> None:
    """A message for the person on stderr: as it is, or as a JSON log line under ``--log-format json``."""
    if logs.log_format == "json":
        click.echo(log_line(level, event, message=text, **fields), err=True)
    else:
        click.echo(text, err=True)


def _progress_view(progress: str, logs: LogSettings) -> Any:
    """The progress subscriber: ``auto`` is nothing with ``-q``, one JSON line per event with
    ``--log-format json``, the live tree on a terminal and plain lines otherwise."""
    from teamrun.cli.progress import EventLog, LiveTree, PlainProgress

    if progress == "auto":
        if logs.verbosity < 0:
            return None
        if logs.log_format == "json":
            return EventLog()
        progress = "tree" if sys.stderr.isatty() else "plain"
    if progress == "tree":
        return LiveTree()
    if progress == "plain":
        return PlainProgress()
    return None


def _check_observe_flags(trace_path: str | None, trace_content: bool, otel: bool, record_path: str | None,
                         replay_path: str | None, replay_mode: str | None) -> None:
    if record_path is not None and replay_path is not None:
        raise UsageError("--record and --replay exclude each other: record a real run, then replay it")
    if replay_mode is not None and replay_path is None:
        raise UsageError("--replay-mode only applies with --replay CASSETTE")
    if trace_content and trace_path is None and not otel:
        raise UsageError("--trace-content only applies with --trace FILE or --otel")
    if otel:
        from teamrun.observe.otel import require_otel

        require_otel(exporter=True)


def _content_capture(model: Any) -> Any:
    """The model wrapped so each call's content is published as ``llm_io`` events (trace, OTel)."""
    from teamrun.observe.trace_file import ContentCapture

    return ContentCapture(model)


def _trace_writer(path: str | None, content: bool, redactor: Any, cleanup: contextlib.ExitStack) -> Any:
    if path is None:
        return None
    from teamrun.observe.trace_file import TraceWriter

    return cleanup.enter_context(TraceWriter(path, content=content, redactor=redactor))


def _otel_exporter(content: bool, redactor: Any, cleanup: contextlib.ExitStack) -> Any:
    from teamrun.observe.otel import OTelExporter, otlp_tracer_provider, shutdown_provider

    provider = otlp_tracer_provider()
    cleanup.callback(shutdown_provider, provider)
    return OTelExporter(provider, content=content, redactor=redactor)
