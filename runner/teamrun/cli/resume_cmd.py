"""``teamrun resume RUN_ID``, and the journal of ``teamrun execute`` (``--journal``, ``--resume``)."""

from __future__ import annotations

import os
import shlex
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click

from teamrun.cli.options import RUN_PROGRESS_MODES, api_base_option, progress_option
from teamrun.errors import UsageError, UserError

HELP = """Continue a run that crashed, was killed, was cancelled or waits for a person.

The run's input, team file, --var values, --model and endpoint (--api-base)
come from the store.
Model calls and tool results the run finished are replayed from its journal
(not paid again; they still count toward the run's limits); the rest runs
live. A tool that is not idempotent and was interrupted while it ran is only
run again when you confirm (a prompt on a terminal, or --yes).

\b
Examples:
  teamrun runs list                       find the run
  teamrun resume 3f2a9c1b7d4e
  teamrun resume 3f2a9c1b7d4e --yes --approve all   # in a script
  teamrun execute team.yaml --resume 3f2a9c1b7d4e  # the same, naming the team file

A waiting run continues detached: items still unanswered keep it waiting
(exit 4); `teamrun answer` records an answer and continues it in one step.

Exit codes: as `teamrun execute`.
"""


@dataclass
class JournalChoice:
    """What ``execute`` asked for: whether to journal, where the store is, which run to resume."""

    journal: bool | None
    """``--journal`` / ``--no-journal``; ``None``: on when a store is configured."""
    store: str | None
    resume: str | None = None
    yes: bool = False
    thread: str | None = None

    def enabled(self, environ: Mapping[str, str] | None = None) -> bool:
        """On when asked, else when a store is configured (``--store``, ``$TEAMRUN_STORE``, ``--thread``)."""
        from teamrun.store.location import STORE_ENV

        env = os.environ if environ is None else environ
        if self.resume is not None:
            if self.journal is False:
                raise UsageError("--resume replays the run's journal: it cannot be combined with --no-journal")
            return True
        if self.journal is not None:
            return self.journal
        return self.store is not None or bool(env.get(STORE_ENV)) or self.thread is not None


def open_backend(store: str | None) -> Any:
    """The store's journal (opening, creating or upgrading the store); ``location`` is ``store`` as given."""
    from teamrun.store import open_store
    from teamrun.store.journal import StoreJournal

    return StoreJournal(open_store(store), location=store)


def open_existing_backend(store: str | None, run_id: str) -> Any:
    """:func:`open_backend` for a command about ``run_id`` (resume, answer, approve, deny): a SQLite file that
    does not exist (a mistyped --store) is refused, as ``teamrun runs show`` refuses it, not created."""
    from teamrun.store.location import missing_store_file

    if (missing := missing_store_file(store)) is not None:
        raise UsageError(
            f"no run {run_id!r} in the store at {missing}: there is no store at that path (nothing was journaled "
            "there; a mistyped --store?)"
        )
    return open_backend(store)


def store_option(location: str | None) -> str:
    """`` --store LOCATION`` for a command to paste (empty for the default store): a file path made absolute,
    quoted for the shell."""
    if location is None:
        return ""
    from teamrun.store.location import is_url

    shown = location if is_url(location) else str(Path(location).expanduser().resolve())
    return f" --store {shlex.quote(shown)}"


def resume_command(run_id: str, location: str | None, *, yes: bool = False) -> str:
    """The ``teamrun resume`` command that continues ``run_id`` in the store at ``location``."""
    return f"teamrun resume {shlex.quote(run_id)}{store_option(location)}" + (" --yes" if yes else "")


def resumed_journal(backend: Any, run_id: str, *, yes: bool) -> Any:
    """The journal continuing ``run_id``; an interrupted non-idempotent tool is confirmed first."""
    from teamrun.engine.durability.resume import ResumeNeedsConfirmation, open_resume

    confirm_with = resume_command(run_id, getattr(backend, "location", None), yes=True)
    try:
        return open_resume(backend, run_id, confirmed=yes, confirm_with=confirm_with)
    except ResumeNeedsConfirmation as exc:
        if not (sys.stdin.isatty() and sys.stderr.isatty()):
            raise
        click.echo(str(exc).split("\nResuming runs them again.")[0], err=True)
        if not click.confirm("Run them again?", default=False, err=True):
            raise UsageError(f"resume of run {run_id} stopped: not confirmed") from None
        return open_resume(backend, run_id, confirmed=True)


def new_journal(
    backend: Any,
    *,
    team: Any,
    team_file: str,
    task: str,
    vars: dict[str, str],
    model: str | None,
    thread: str | None = None,
) -> Any:
    from teamrun.engine.durability.journal import RunJournal
    from teamrun.engine.result import new_run_id
    from teamrun.store.records import JournaledRun

    record = JournaledRun(
        run_id=new_run_id(),
        team=team.name,
        team_file=str(Path(team_file).resolve()),
        input=task,
        vars=dict(vars),
        model=model,
        api_base=getattr(team, "api_base", None),
        thread_id=thread,
    )
    return RunJournal(backend, record)


@click.command(help=HELP, short_help="Continue a crashed, killed or cancelled run.")
@click.argument("run_id")
@click.option(
    "--store",
    metavar="PATH|URL",
    help="The store holding the run (default: $TEAMRUN_STORE, else ~/.local/share/teamrun/teamrun.db).",
)
@click.option(
    "--yes",
    "-y",
    is_flag=True,
    help="Run again, without asking, tools that are not idempotent and were interrupted while they ran.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the whole result as JSON instead of the answer.")
@click.option("--approve", metavar="all|none|TOOL,...", help="Answer approval prompts up front (for scripts and CI).")
@progress_option(RUN_PROGRESS_MODES, "How to show progress on stderr (as `teamrun execute`).")
@api_base_option
@click.pass_context
def resume(
    ctx: click.Context,
    run_id: str,
    store: str | None,
    yes: bool,
    as_json: bool,
    approve: str | None,
    progress: str,
    api_base: str | None = None,
) -> int:
    # `teamrun execute` as the CLI group serves it: execute_cmd imports this module's journal helpers,
    # so importing it here would close an import circle.
    group = ctx.find_root().command
    execute = group.get_command(ctx, "execute") if isinstance(group, click.Group) else None
    assert execute is not None, "resume runs inside the teamrun command group"
    backend = open_existing_backend(store, run_id)
    record = backend.get_run(run_id, unmasked=True)
    if record is None:
        raise UsageError(
            f"no run {run_id!r} in the store {backend.store.display}; "
            f"`teamrun runs list{store_option(store)}` shows the runs it holds"
        )
    if not record.team_file:
        raise UsageError(f"run {run_id} was not journaled (it has no team file on record): it cannot be resumed")
    if not Path(record.team_file).is_file():
        raise UsageError(
            f"run {run_id}'s team file {record.team_file} is gone; restore it, or name another with "
            f"`teamrun execute TEAM_FILE --resume {run_id}`"
        )
    try:
        result: int = ctx.invoke(  # the run's vars, model, endpoint and thread: execute's stored_settings
            execute,
            team_file=record.team_file,
            input_text=None,
            input_file=None,
            variables=(),
            model=None,
            api_base=api_base,
            as_json=as_json,
            approve=approve,
            progress=progress,
            store_location=store,
            thread_id=None,
            resume=run_id,
            yes=yes,
        )
    except UserError:  # it could not start (its team file no longer loads...): a waiting run it claimed waits again
        _unclaim(backend, run_id)
        raise
    return result


def _unclaim(backend: Any, run_id: str) -> None:
    """The waiting run this process claimed to continue, and could not start (a usage or team-file error),
    back to ``waiting``: not left ``running`` with this process's pid (shown ``interrupted`` once it exits).
    Its recorded answers stay, for the next ``teamrun resume``."""
    from teamrun.engine.durability.pending import CLAIMED_HERE

    run = backend.get_run(run_id)
    if run_id in CLAIMED_HERE and run is not None and run.status == "running" and run.pid == os.getpid():
        backend.store.runs.set_status(run_id, "waiting")
        CLAIMED_HERE.discard(run_id)
