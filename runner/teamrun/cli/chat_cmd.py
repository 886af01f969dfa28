"""``teamrun chat``: an interactive conversation with a team, kept as a thread in the store."""

from __future__ import annotations

import asyncio
import contextlib
import datetime as _dt
import json
import sys
import uuid
from typing import Any

import click

from teamrun.cli.execute_cmd import (
    _log_settings,
    _parse_vars,
    _progress_view,
    _run_with_interrupt,
    _say,
    load_checked_config,
)
from teamrun.cli.options import RUN_PROGRESS_MODES, api_base_option, progress_option, rate_limit_options
from teamrun.logs import hidden_log_events
from teamrun.terminal import for_terminal, inert, isolate

HELP = """Talk with a team, turn by turn. Every turn is a run of the team on your
message with the conversation so far; after a handoff the next turn goes
straight to the agent the conversation was handed to. The conversation is a
thread in the store, so `teamrun execute --thread ID` (or a later chat with
--thread ID) continues it.

While a turn runs, its agent tree is shown on stderr. Ctrl-C cancels the
turn, not the session; Ctrl-D or /exit ends it. stdout carries only the
answers: the `you> ` prompt is shown only when you type at a terminal (on
stderr when stdout is not that terminal), so messages can be piped in. The
exit code is 1 when a turn failed, else 3 when a turn ran out of budget,
else 0.

\b
Commands inside the chat:
  /new       start a new thread
  /threads   list this team's threads
  /workspace show the workspace the last turn ended with (a team with `workspace:`)
  /exit      leave (also /quit, Ctrl-D)

\b
Examples:
  teamrun chat teams/support-triage.yaml
  teamrun chat team.yaml --thread support-42 --store postgresql+psycopg://db/teamrun
  teamrun chat team.yaml < messages.txt > answers.txt   a message per line, no prompts
"""

PROMPT = "you> "
COMMANDS_HELP = "commands: /new (a new thread), /threads (this team's threads), /workspace, /exit"


def read_message() -> str:
    """One line of input. stdout carries only the answers: the prompt is for a person at a terminal
    (none when stdin is a pipe or a file), on stderr when stdout is not that terminal."""
    if not _is_terminal(sys.stdin):
        return input()
    if _is_terminal(sys.stdout):
        return input(PROMPT)  # readline knows the prompt (line editing redraws it)
    click.echo(PROMPT, err=True, nl=False)
    return input()


def _is_terminal(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):  # replaced by an object without it, or closed
        return False


def new_thread_id() -> str:
    return f"chat-{_dt.datetime.now().strftime('%Y%m%d-%H%M%S')}-{uuid.uuid4().hex[:4]}"


@click.command(help=HELP, short_help="Talk with a team, turn by turn (a thread).")
@click.argument("team_file", type=click.Path(dir_okay=False))
@click.option("--thread", "thread_id", metavar="ID", help="Continue this thread (a new ID starts one).")
@click.option(
    "--store",
    "store_location",
    metavar="PATH|URL",
    help="The store for threads: a SQLite file or a SQLAlchemy URL (postgresql+psycopg://...). "
    "Default: $TEAMRUN_STORE, else ~/.local/share/teamrun/teamrun.db.",
)
@click.option(
    "--resource",
    "resource",
    metavar="ID",
    help="Whose long-term memory every turn recalls and saves (a user's or an organisation's id, e.g. customer-42; "
    "the team file's memory:).",
)
@click.option("--var", "variables", multiple=True, metavar="NAME=VALUE", help="Template variable (repeatable).")
@click.option("--model", help="Use this LiteLLM model for every agent (e.g. offline, openai/gpt-4o-mini).")
@api_base_option
@rate_limit_options
@click.option("--approve", metavar="all|none|TOOL,...", help="Answer approval prompts up front.")
@progress_option(RUN_PROGRESS_MODES, "How each turn's progress is shown on stderr (as `teamrun execute`).")
@click.option("--strict", is_flag=True, help="Treat warnings about the team file and --var as errors (exit 2).")
def chat(
    team_file: str,
    thread_id: str | None,
    store_location: str | None,
    variables: tuple[str, ...],
    model: str | None,
    approve: str | None,
    progress: str,
    strict: bool,
    api_base: str | None = None,
    resource: str | None = None,
) -> int:
    from teamrun.engine.team import Team
    from teamrun.tools.approval import ApprovalPolicy, choose_approver

    try:
        import readline  # noqa: F401  (line editing and history for input())
    except ImportError:  # not on every platform
        pass
    if resource is not None:
        from teamrun.store.memory import check_resource_id

        check_resource_id(resource)  # exit 2 before anything runs
    logs = _log_settings()
    parsed_vars = _parse_vars(variables)
    loaded = load_checked_config(team_file, parsed_vars, strict=strict, logs=logs)
    team = Team(loaded, vars=parsed_vars, model=model, api_base=api_base, store=store_location)
    policy = None
    if approve is not None:
        from teamrun.tools.mcp.table import approvable_names

        policy = ApprovalPolicy.parse(approve, known_tools=approvable_names(team.tools))
    team.approver = choose_approver(policy)
    from teamrun.cli.answer_cmd import people_desk
    from teamrun.store.journal import StoreJournal

    # every turn is journaled in the store: on a terminal the agents' questions are asked inline, otherwise
    # the turn suspends there (answered with `teamrun answer`)
    backend = people_desk(team, StoreJournal(team.store, location=store_location), policy, detach=False)
    if team.imports_litellm():  # seconds: before the first prompt, said, rather than inside the first turn
        if progress != "none" and logs.verbosity >= 0:
            _say(logs, "info", "llm_loading", "loading LiteLLM…")
        team.prepare_models()
    session = ChatSession(team, thread_id or new_thread_id(), progress, logs, backend=backend, resource=resource)
    session.loop()
    return session.exit_code()


class ChatSession:
    """The read-run-print loop: one thread at a time, one event loop for every turn."""

    def __init__(
        self, team: Any, thread_id: str, progress: str, logs: Any, *, backend: Any = None, resource: str | None = None
    ) -> None:
        self.team = team
        self.resource = resource
        """Whose long-term memory every turn uses (``--resource``)."""
        self.thread_id = thread_id
        self.progress = progress
        self.logs = logs
        self.backend = backend
        """The store's journal, where a turn that waits for a person suspends (say how to answer it)."""
        self.workspace: dict[str, Any] | None = None
        """The workspace the last turn of this session ended with (its result's)."""
        self.statuses: list[str] = []
        """How each turn of the session ended."""

    def exit_code(self) -> int:
        """1 when a turn failed, else 3 when one ran out of budget, else 0: piped messages
        (``chat < messages.txt > answers.txt``) tell a script whether every turn was answered."""
        if "failed" in self.statuses:
            return 1
        return 3 if "budget_exhausted" in self.statuses else 0

    def loop(self) -> None:
        thread = self.team.store.threads.get(self.thread_id)
        turns = f", {thread.turns} turn(s) so far" if thread is not None else ""
        header = (  # the thread id is typed (--thread): no control sequence reaches the terminal
            f"{self.team.name}: thread {isolate(self.thread_id)}{turns} (store {self.team.store.display}). "
            f"{COMMANDS_HELP}; Ctrl-C cancels a turn."
        )
        click.echo(inert(header), err=True)
        with asyncio.Runner() as runner:
            while True:
                try:
                    line = read_message()
                except EOFError:
                    click.echo("", err=True)
                    return
                except KeyboardInterrupt:  # at the prompt: drop the line, keep the session
                    click.echo("^C (Ctrl-D or /exit leaves)", err=True)
                    continue
                text = line.strip()
                if not text:
                    continue
                if text.startswith("/"):
                    if not self.command(text):
                        return
                    continue
                self.turn(runner, text)

    def command(self, text: str) -> bool:
        """Run a chat command; ``False`` ends the session."""
        name = text.split()[0].lower()
        if name in ("/exit", "/quit"):
            return False
        if name == "/new":
            self.thread_id = new_thread_id()
            self.workspace = None
            click.echo(f"new thread {self.thread_id}", err=True)
        elif name == "/workspace":
            click.echo(inert(self.workspace_text()), err=True)  # values a model wrote
        elif name == "/threads":
            from teamrun.cli.threads_cmd import format_threads

            found = self.team.store.threads.list(team=self.team.name, limit=20)
            click.echo(format_threads(found) if found else "no threads yet", err=True)
            click.echo(inert(f"(this chat: {isolate(self.thread_id)}; continue another with --thread ID)"), err=True)
        else:
            click.echo(inert(f"unknown command {name}; {COMMANDS_HELP}"), err=True)
        return True

    def workspace_text(self) -> str:
        """The workspace as ``/workspace`` shows it: the last turn's, else the one the thread keeps."""
        spec = self.team.config.workspace
        if spec is None:
            return f"team {self.team.name} has no workspace"
        shown = self.workspace
        if shown is None and spec.persist == "thread":
            from teamrun.engine.workspace.carry import THREAD_META_KEY, kept_snapshot

            thread = self.team.store.threads.get(self.thread_id)
            shown = kept_snapshot(thread.meta.get(THREAD_META_KEY)) if thread is not None else None
        if shown is None:
            return "no turn has written the workspace yet" + (
                "" if spec.persist == "thread" else " (persist: run: each turn starts from the initial values)"
            )
        lines = [f"workspace of thread {self.thread_id}, version {shown.get('version', 0)}:"]
        for name, entry in (shown.get("entries") or {}).items():
            by = ", ".join(entry.get("written_by") or ()) or "nobody yet"
            value = json.dumps(entry.get("value"), ensure_ascii=False)
            lines.append(f"  {name} (version {entry.get('version', 0)}, written by {by}): {value}")
        return "\n".join(lines)

    def turn(self, runner: asyncio.Runner, text: str) -> None:
        view = _progress_view(self.progress, self.logs)
        subscribers = [view] if view is not None else []
        hidden = [  # each said once: in the view, not as a log line too (as `teamrun execute` does)
            *(["run_warning"] if getattr(view, "shows_warnings", False) else []),
            *(["llm_cost_unknown"] if getattr(view, "says_unknown_cost", False) else []),  # in the turn's summary
        ]
        with hidden_log_events(*hidden) if hidden else contextlib.nullcontext():
            result = runner.run(
                _run_with_interrupt(self.team, text, subscribers, self.thread_id, journal=True, resource=self.resource)
            )
        self.statuses.append(result.status)
        if result.status == "cancelled":
            click.echo("(turn cancelled; the thread is as it was)", err=True)
            return
        if result.workspace is not None and result.status in ("done", "budget_exhausted"):  # a turn the thread keeps
            self.workspace = result.workspace
        if result.final_text:
            said = f"{result.answered_by or self.team.config.supervisor}: {result.final_text}"
            click.echo(for_terminal(said, sys.stdout))  # control characters inert on a terminal
        if result.status == "waiting" and self.backend is not None:
            from teamrun.cli.answer_cmd import waiting_lines

            for line in waiting_lines(self.backend, result.run_id, getattr(self.backend, "location", None)):
                _say(self.logs, "warning", "run_waiting", line, run_id=result.run_id)
            return
        if result.status != "done":
            _say(
                self.logs,
                "error",
                "turn_not_done",
                f"teamrun: turn {result.status}"
                + (f" ({result.stopped_by})" if result.stopped_by else "")
                + (f": {result.error}" if result.error else ""),
            )
