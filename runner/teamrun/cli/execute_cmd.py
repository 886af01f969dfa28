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
from teamrun.cli.options import RUN_PROGRESS_MODES, api_base_option, progress_option, rate_limit_options
from teamrun.defaults import team_models
from teamrun.errors import UsageError
from teamrun.logs import add_log_secrets, hidden_log_events, log_line
from teamrun.observe.bidi import for_terminal, inert

HELP = """Run a team on an input and print the final answer on stdout.

The input comes from --input, --input-file, or stdin. Progress goes to
stderr: a live tree of agents on a terminal, plain lines otherwise. Ctrl-C
stops every running agent and still prints what finished (exit 130).

\b
Examples:
  teamrun execute teams/research-report.yaml --input "Compare Rust and Go"
  echo "Review this" | teamrun execute team.yaml
  teamrun execute team.yaml -i "..." --model openai/gpt-4o-mini
  teamrun execute team.yaml -i "..." --model openai/my-model --api-base http://localhost:8000/v1
  teamrun execute team.yaml -i "..." --var audience=engineers --json
  teamrun execute team.yaml -i "..." --approve grep,git_log   # for CI
  teamrun execute team.yaml -i "..." --trace run.jsonl && teamrun trace show run.jsonl
  teamrun execute team.yaml -i "..." --record run.cassette.jsonl   # a real run, once
  teamrun execute team.yaml -i "..." --replay run.cassette.jsonl   # offline, in CI
  teamrun execute team.yaml -i "..." --thread support-42   # continue a conversation
  teamrun execute team.yaml -i "..." --store .teamrun/runs.db   # journaled: resumable after a crash
  teamrun execute team.yaml --resume 3f2a9c1b7d4e --store .teamrun/runs.db

An agent with a `person:` tool asks its questions on the terminal (as tool
approvals are asked). With --detach, or without a terminal when the run is
journaled, the run suspends instead: its questions and approvals are kept in
the store, the process exits with 4, and `teamrun answer RUN ITEM VALUE`
(`teamrun approve` / `teamrun deny`) continues it from its journal.

Exit codes: 0 done, 1 run failed, 2 invalid config or usage,
3 budget exhausted, 4 waiting for a person, 130 interrupted.
"""

_EXIT = {"done": 0, "failed": 1, "budget_exhausted": 3, "waiting": 4, "cancelled": 130}


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
        except UnicodeDecodeError as exc:
            raise UsageError(
                f"--input-file {file} is not UTF-8 text (byte {exc.start}); convert it, e.g. "
                f"`iconv -f latin1 -t utf-8 {file}`"
            ) from None
    elif sys.stdin.isatty():
        raise UsageError("no input: pass --input TEXT, --input-file FILE, or pipe it on stdin")
    else:
        source, task = "stdin", sys.stdin.read()
    if not task.strip():
        raise UsageError(
            f"the input ({source}) is empty: give the team a task with --input TEXT, --input-file FILE, or on stdin"
        )
    return task


def load_checked_config(team_file: str, given_vars: dict[str, str], *, strict: bool, logs: LogSettings) -> Any:
    """The team file, checked against the run's ``--var`` names; its warnings said on stderr, or with
    ``--strict`` raised as errors (exit 2). Only the config layer is imported: nothing runs yet."""
    from teamrun.config.diagnostics import Diagnostic
    from teamrun.config.loader import load_config
    from teamrun.errors import ConfigError

    loaded = load_config(team_file, given_vars=given_vars)
    add_log_secrets(loaded.secrets | _remote_tokens(loaded.config))
    if strict and loaded.warnings:
        raise ConfigError([Diagnostic(d.file, d.line, d.column, d.message, "error", d.rule) for d in loaded.warnings])
    for warning in loaded.warnings:
        if warning.rule != "program":  # a missing MCP server program: the run itself stops on it, with the hint
            _say(logs, "warning", "config_warning", warning.render())
    return loaded


def _starting_line(loaded: Any, model: str | None) -> str:
    """What is about to run, from the team file alone: said before the engine, the store and LiteLLM load."""
    config = loaded.config
    models = team_models(config.agents.values(), config.defaults, override=model)
    agents = len(config.agents)
    label = "model" if len(models) == 1 else "models"
    shown = ", ".join(models[:3]) + (f" and {len(models) - 3} more" if len(models) > 3 else "")
    return f"starting {config.name} ({agents} agent{'s' if agents != 1 else ''}, {label} {shown})"


async def _run_with_interrupt(
    team: Any,
    task: str,
    subscribers: list[Any],
    thread: str | None = None,
    journal: Any = None,
    resource: str | None = None,
) -> Any:
    cancel = asyncio.Event()
    loop = asyncio.get_running_loop()
    try:
        loop.add_signal_handler(signal.SIGINT, cancel.set)
        loop.add_signal_handler(signal.SIGTERM, cancel.set)
    except (NotImplementedError, RuntimeError):  # not the main thread, or no signals here
        pass
    try:
        extra: dict[str, Any] = {"thread": thread} if thread is not None else {}
        if journal is not None:
            extra["journal"] = journal
        if resource is not None:
            extra["resource"] = resource
        return await team.run(task, subscribers=subscribers, cancel=cancel, **extra)
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
@api_base_option
@rate_limit_options
@click.option("--json", "as_json", is_flag=True, help="Print the whole result as JSON instead of the answer.")
@click.option("--approve", metavar="all|none|TOOL,...", help="Answer approval prompts up front (for scripts and CI).")
@progress_option(
    RUN_PROGRESS_MODES,
    "How to show progress on stderr (auto: a tree on a terminal, plain lines otherwise, "
    "one JSON line per event with --log-format json, none with -q; none: off).",
)
@click.option(
    "--trace",
    "trace_path",
    type=click.Path(dir_okay=False),
    metavar="FILE",
    help="Write every event as a JSON line to FILE, as it happens (see `teamrun trace show`).",
)
@click.option(
    "--trace-content", is_flag=True, help="Include prompts, tasks, answers and tool payloads in the trace / OTel spans."
)
@click.option(
    "--otel", is_flag=True, help="Export spans with OpenTelemetry (OTLP endpoint from OTEL_EXPORTER_OTLP_* variables)."
)
@click.option(
    "--record",
    "record_path",
    type=click.Path(dir_okay=False),
    metavar="CASSETTE",
    help="Store every model exchange in CASSETTE (JSON lines) for --replay.",
)
@click.option(
    "--replay",
    "replay_path",
    type=click.Path(dir_okay=False),
    metavar="CASSETTE",
    help="Answer every model call from CASSETTE, with no network.",
)
@click.option(
    "--replay-mode",
    type=click.Choice(["strict", "lenient"]),
    default=None,
    help="strict (default): fail on a request that was not recorded; lenient: use the next "
    "recorded reply of that agent and turn.",
)
@click.option(
    "--thread",
    "thread_id",
    metavar="ID",
    help="Continue the conversation ID (a new ID starts one): earlier turns are kept in the store.",
)
@click.option(
    "--resource",
    "resource",
    metavar="ID",
    help="Whose long-term memory the run recalls and saves (a user's or an organisation's id, e.g. customer-42; "
    "the team file's memory:). A resume keeps its first attempt's.",
)
@click.option(
    "--store",
    "store_location",
    metavar="PATH|URL",
    help="The store for threads and run journals: a SQLite file or a SQLAlchemy URL "
    "(postgresql+psycopg://...). Default: $TEAMRUN_STORE, else ~/.local/share/teamrun/teamrun.db. "
    "Giving it turns journaling on.",
)
@click.option(
    "--journal/--no-journal",
    "journal",
    default=None,
    help="Write every finished model call and tool result to the store, so the run can be resumed "
    "(default: on when a store is configured: --store, $TEAMRUN_STORE or --thread).",
)
@click.option(
    "--resume",
    "resume",
    metavar="RUN_ID",
    help="Continue run RUN_ID from its journal (its input, vars, model and thread unless given); see `teamrun resume`.",
)
@click.option(
    "--yes",
    "-y",
    "yes",
    is_flag=True,
    help="With --resume: run again, without asking, interrupted tools that are not idempotent.",
)
@click.option(
    "--strict",
    is_flag=True,
    help="Treat warnings about the team file and the command line (a --var the team does not have) "
    "as errors: exit 2 before any model call.",
)
@click.option(
    "--detach",
    is_flag=True,
    help="Ask no one on the terminal: questions and approvals wait in the store and the run suspends "
    "(exit 4) until `teamrun answer` (journaled: the store as --store).",
)
def execute(
    team_file: str,
    input_text: str | None,
    input_file: str | None,
    variables: tuple[str, ...],
    model: str | None,
    as_json: bool,
    approve: str | None,
    progress: str,
    trace_path: str | None,
    trace_content: bool,
    otel: bool,
    record_path: str | None,
    replay_path: str | None,
    replay_mode: str | None,
    thread_id: str | None,
    store_location: str | None,
    journal: bool | None,
    resume: str | None,
    yes: bool,
    strict: bool,
    detach: bool = False,
    api_base: str | None = None,
    resource: str | None = None,
) -> int:
    from teamrun.cli.resume_cmd import JournalChoice
    from teamrun.secrets import Redactor

    _check_observe_flags(trace_path, trace_content, otel, record_path, replay_path, replay_mode)
    if resource is not None:
        from teamrun.store.memory import check_resource_id

        check_resource_id(resource)  # exit 2 before anything runs
    logs = _log_settings()
    redactor = Redactor()
    if detach and journal is False:
        raise UsageError(
            "--detach suspends the run in the store until it is answered: it cannot be combined with --no-journal"
        )
    choice = JournalChoice(True if detach else journal, store_location, resume, yes, thread=thread_id)
    journaled = choice.enabled()
    parsed_vars = _parse_vars(variables)
    backend, earlier = _journal_backend(choice) if choice.resume is not None else (None, None)
    if earlier is not None and earlier.status == "waiting":  # continued detached: answered with `teamrun answer`
        from teamrun.cli.answer_cmd import claim_waiting

        claim_waiting(backend, earlier.run_id)
        detach = True
    if earlier is not None:  # a resumed run's vars, model, endpoint and thread come from its record
        parsed_vars, model, api_base, thread_id = stored_settings(earlier, parsed_vars, model, api_base, thread_id)
        choice.thread = thread_id
    loaded = load_checked_config(team_file, parsed_vars, strict=strict, logs=logs)
    if earlier is not None:
        task = _resumed_input(earlier, input_text, input_file)
    else:
        task = _read_input(input_text, input_file)
    view = _progress_view(progress, logs, redactor)
    if view is not None and earlier is None:  # said now: the engine, the store and LiteLLM are imported after it
        _say(logs, "info", "run_starting", _starting_line(loaded, model))
    if journaled and backend is None:
        backend, _ = _journal_backend(choice)
    with contextlib.ExitStack() as cleanup:
        from teamrun.engine.team import Team
        from teamrun.tools.approval import ApprovalPolicy, choose_approver

        writer = _trace_writer(trace_path, trace_content, redactor, cleanup)
        team = Team(
            loaded,
            vars=parsed_vars,
            model=model,
            api_base=api_base,
            record=record_path,
            replay=replay_path,
            replay_mode="lenient" if replay_mode == "lenient" else "strict",
            wrap_model=_content_capture if trace_content else None,
            store=backend.store if backend is not None else store_location,
        )
        redactor.add(team.loaded.secrets)
        policy = None
        if approve is not None:
            from teamrun.tools.mcp.table import approvable_names  # MCP tools named in the file

            policy = ApprovalPolicy.parse(approve, known_tools=approvable_names(team.tools))
        team.approver = choose_approver(policy)
        from teamrun.cli.answer_cmd import people_desk

        backend = people_desk(team, backend, policy, detach=detach)
        run_journal = _run_journal(choice, backend, team, team_file, task, parsed_vars, model)
        if view is not None and earlier is not None:  # a resume says it once the journal was read
            _say(logs, "info", "run_starting", _starting_line(loaded, model))
        subscribers: list[Any] = []
        if view is not None:
            if run_journal is not None:  # said once the journal opened (a read-only store refuses it)
                subscribers.append(_journal_said(logs, run_journal, backend))
            subscribers.append(view)
            if getattr(view, "shows_warnings", False):  # say each warning once: in the view, not as a log line too
                cleanup.enter_context(hidden_log_events("run_warning"))
            if getattr(view, "says_unknown_cost", False):  # said once, in the run's summary
                cleanup.enter_context(hidden_log_events("llm_cost_unknown"))
        if view is not None and team.imports_litellm():  # seconds without a word otherwise
            _say(logs, "info", "llm_loading", "loading LiteLLM…")
            team.prepare_models()
        if writer is not None:
            subscribers.append(writer)
        if otel:
            subscribers.append(_otel_exporter(trace_content, redactor, cleanup))
        continued = _continued_events(earlier, backend, redactor)
        if continued is not None:
            subscribers.append(continued)
        result = asyncio.run(_run_with_interrupt(team, task, subscribers, thread_id, run_journal, resource))
        if continued is not None:
            continued.keep()
    if result.status == "waiting":  # also with --json: how to answer goes to stderr
        from teamrun.cli.answer_cmd import waiting_lines

        for line in waiting_lines(backend, result.run_id, store_location):
            _say(logs, "warning", "run_waiting", line, run_id=result.run_id)
    # remote agents' bearer tokens are masked on stdout too (an agent may echo one); other secrets of the
    # file are the user's own answer's business, as before
    tokens = _remote_tokens(team.config)
    shown = Redactor(tokens, include_env=False) if tokens else None
    if as_json:
        answer = result.as_dict()
        click.echo(
            shown.dumps(answer, indent=2, ensure_ascii=False)
            if shown
            else json.dumps(answer, indent=2, ensure_ascii=False)
        )
    else:
        if result.final_text or result.status == "done":
            answer_text = shown.text(result.final_text) if shown else result.final_text
            click.echo(for_terminal(answer_text, sys.stdout))  # inert on a terminal, byte for byte in a pipe
        if result.status not in ("done", "waiting"):
            _say(
                logs,
                "error",
                "run_not_done",
                f"teamrun: run {result.status}"
                + (f" ({result.stopped_by})" if result.stopped_by else "")
                + (f": {result.error}" if result.error else ""),
                status=result.status,
                stopped_by=result.stopped_by,
                error=result.error,
            )
            if run_journal is not None and result.status not in ("done", "waiting"):
                from teamrun.cli.resume_cmd import resume_command

                _say(
                    logs,
                    "error",
                    "run_resumable",
                    f"teamrun: resume it with `{resume_command(result.run_id, store_location)}`",
                    run_id=result.run_id,
                )
    return _EXIT[result.status]


def _continued_events(earlier: Any, backend: Any, redactor: Any) -> Any:
    """For a resumed run a server started (the store keeps its events): a subscriber that keeps this process's
    events after the server's, so the server's `GET /v1/runs/{id}/events` shows the whole run."""
    if earlier is None or backend is None:
        return None
    from teamrun.serve.history import continued_events

    return continued_events(backend.store, earlier.run_id, redactor)


def _journal_backend(choice: Any) -> tuple[Any, Any]:
    """The store's journal when journaling is on, and the record of the run to resume (if any)."""
    if not choice.enabled():
        return None, None
    from teamrun.cli.resume_cmd import open_backend

    backend = open_backend(choice.store)
    if choice.resume is None:
        return backend, None
    earlier = backend.get_run(choice.resume, unmasked=True)
    if earlier is None:
        raise UsageError(
            f"no run {choice.resume!r} in the store {backend.store.display}; "
            "`teamrun runs list` shows the runs it holds"
        )
    return backend, earlier


def stored_settings(
    earlier: Any, variables: dict[str, str], model: str | None, api_base: str | None, thread_id: str | None
) -> tuple[dict[str, str], str | None, str | None, str | None]:
    """What a resumed run runs with (``teamrun execute --resume`` and ``teamrun resume`` alike): its ``--var``
    values, ``--model``, endpoint (``--api-base``) and thread as the store keeps them, each unless given again."""
    return (
        variables or dict(earlier.vars),
        model or earlier.model,
        api_base if api_base is not None else earlier.api_base,
        thread_id or earlier.thread_id,
    )


def _resumed_input(earlier: Any, text: str | None, file: str | None) -> str:
    """A resumed run's input is the one it was given; another one is refused."""
    if text is None and file is None:
        return str(earlier.input)
    given = _read_input(text, file)
    if given != earlier.input:
        raise UsageError(
            f"--resume {earlier.run_id} continues the run on its own input; leave out "
            "--input/--input-file, or start a new run without --resume"
        )
    return given


def _run_journal(
    choice: Any, backend: Any, team: Any, team_file: str, task: str, vars: dict[str, str], model: str | None
) -> Any:
    if backend is None:
        return None
    from teamrun.cli.resume_cmd import new_journal, resumed_journal

    if choice.resume is not None:
        return resumed_journal(backend, choice.resume, yes=choice.yes)
    return new_journal(backend, team=team, team_file=team_file, task=task, vars=vars, model=model, thread=choice.thread)


def _journal_said(logs: LogSettings, run_journal: Any, backend: Any) -> Any:
    """A subscriber that says where the run is journaled at its start, unless the store refused it."""

    def say(event: Any) -> None:
        if event.kind == "run_start" and run_journal.failure is None:
            _say(logs, "info", "run_journal", _journal_line(run_journal, backend))

    return say


def _journal_line(run_journal: Any, backend: Any) -> str:
    record = run_journal.record
    verb = (
        f"resuming run {record.run_id} (attempt {record.attempts})" if record.attempts > 1 else f"run {record.run_id}"
    )
    return f"{verb}, journaled in {backend.store.display}"


def _log_settings() -> LogSettings:
    found = click.get_current_context().find_object(LogSettings)
    return found if found is not None else LogSettings(0, "console")


def _say(logs: LogSettings, level: str, event: str, text: str, **fields: Any) -> None:
    """A message for the person on stderr: as it is, or as a JSON log line under ``--log-format json``."""
    if logs.log_format == "json":
        click.echo(log_line(level, event, message=text, **fields), err=True)
    else:
        click.echo(inert(text), err=True)  # it may quote a model or a provider (a question, an error)


def _progress_view(progress: str, logs: LogSettings, redactor: Any = None) -> Any:
    """The progress subscriber: ``auto`` is nothing with ``-q``, one JSON line per event with
    ``--log-format json``, the live tree on a terminal and plain lines otherwise. Its lines are masked with
    ``redactor`` (the run's, which the trace masks with too), else the environment's secrets."""
    from teamrun.cli.progress import EventLog, LiveTree, PlainProgress

    if progress == "auto":
        if logs.verbosity < 0:
            return None
        if logs.log_format == "json":
            return EventLog()
        progress = "tree" if sys.stderr.isatty() else "plain"
    if progress == "tree":
        return LiveTree(redactor=redactor)
    if progress == "plain":
        return PlainProgress(redactor=redactor)
    return None


def _check_observe_flags(
    trace_path: str | None,
    trace_content: bool,
    otel: bool,
    record_path: str | None,
    replay_path: str | None,
    replay_mode: str | None,
) -> None:
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


def _remote_tokens(config: Any) -> set[str]:
    if not any(agent.a2a is not None for agent in config.agents.values()):
        return set()
    from teamrun.engine.remote.cards import remote_tokens

    return remote_tokens(config)


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
