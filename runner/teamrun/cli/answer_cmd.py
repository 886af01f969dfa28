"""``teamrun answer|approve|deny RUN ITEM``: answer what a waiting run waits for, and continue it.

Also where ``execute`` chooses who answers the agents' questions (:func:`people_desk`) and what a
suspended run prints (:func:`waiting_lines`).
"""

from __future__ import annotations

import datetime as _dt
import re
import shlex
import sys
import time
from typing import Any

import click

from teamrun.cli.options import RUN_PROGRESS_MODES, api_base_option, check_api_base, progress_option
from teamrun.errors import UsageError, UserError
from teamrun.observe.bidi import inert

EXIT_WAITING = 4
"""A run suspended, waiting for a person (``execute``, ``resume``, ``answer``)."""
_POLL_S = 0.2
"""How often ``answer`` looks whether the process continuing the run is done with it."""

ANSWER_HELP = """Answer a question a waiting run asked, and continue the run.

The answer is recorded in the store (once: a second answer to the same item
is refused), then the run continues from its journal in this process: calls
it finished are not made again. It runs until it is done, or until it waits
for a person again (exit 4: answer its next item the same way). VALUE must
be one of the question's choices and fit its answer_schema (read as JSON;
plain text is a string). The run continues at the model endpoint it was
started with (--api-base gives another).

\b
Examples:
  teamrun runs list                          waiting runs and their questions
  teamrun answer 3f2a9c1b7d4e q1 eu-west-1
  teamrun answer 3f2a9c1b7d4e q2 '{"seats": 3}' --by alice
  teamrun answer 3f2a9c1b7d4e q3 yes --no-resume   # only record it

Exit codes: as `teamrun execute` (4: the run waits for another answer).
"""

APPROVE_HELP = """Approve a tool call a waiting run waits for, and continue the run.

The call runs when the run continues, as if approved at a terminal; the run
continues at the model endpoint it was started with (--api-base gives another).

\b
Examples:
  teamrun runs list                          waiting runs and their items
  teamrun approve 3f2a9c1b7d4e a1
  teamrun deny 3f2a9c1b7d4e a1 --note "use the staging database"
"""

DENY_HELP = """Deny a tool call a waiting run waits for, and continue the run.

The call does not run: the agent gets the denial (with --note, the reason)
as the tool's result, and continues without it, at the model endpoint the run
was started with (--api-base gives another).

\b
Examples:
  teamrun runs list                          waiting runs and their items
  teamrun deny 3f2a9c1b7d4e a1 --note "use the staging database"
  teamrun approve 3f2a9c1b7d4e a1
"""

_STORE_HELP = "The store holding the run (default: $TEAMRUN_STORE, else ~/.local/share/teamrun/teamrun.db)."


# -- who answers, in execute --------------------------------------------------------------------
def _on_terminal() -> bool:
    try:
        return sys.stdin.isatty() and sys.stderr.isatty()
    except (AttributeError, ValueError):
        return False


def has_people(team: Any) -> bool:
    """Whether the team declares a ``person:`` tool."""
    return any(tool.person is not None for tool in (team.config.tools or {}).values())


def people_desk(team: Any, backend: Any, policy: Any, *, detach: bool) -> Any:
    """Set ``team.desk`` (and the approver, when the run may suspend); returns the journal backend.

    On a terminal (without ``--detach``) questions are asked there. Otherwise a journaled run suspends:
    questions and approvals become pending items in the store. A run that is not journaled cannot suspend:
    a question then fails with a hint (the agent goes on without the answer) and approvals are denied.
    """
    from teamrun.tools.people import TerminalDesk

    terminal = _on_terminal() and not detach
    if terminal:
        team.desk = TerminalDesk()
        return backend
    if backend is None:
        return backend  # nobody can be asked: questions fail with a hint, approvals are denied
    from teamrun.engine.durability.pending import SuspendingDesk
    from teamrun.store.pending import PendingRepository
    from teamrun.tools.approval import PolicyApprover
    from teamrun.tools.people import DeskApprover

    team.desk = SuspendingDesk(PendingRepository(backend.store))
    approver = DeskApprover(team.desk)
    team.approver = PolicyApprover(policy, otherwise=approver) if policy is not None else approver
    return backend


class RunClaimed(UsageError):
    """Another process claimed the waiting run first (it continues it)."""


class RunCancelledMeanwhile(RunClaimed):
    """The waiting run was cancelled (by a server, an A2A client) between this process's look and its claim."""


def claim_waiting(backend: Any, run_id: str) -> None:
    """Take the waiting run for this process (one conditional update); :class:`RunClaimed` when another did,
    :class:`RunCancelledMeanwhile` when a cancel came first (it was said as another process continuing it)."""
    from teamrun.engine.durability.pending import claim_run

    if claim_run(_items(backend), run_id):
        return
    now = backend.get_run(run_id)
    if now is not None and now.status == "cancelled":
        from teamrun.cli.resume_cmd import resume_command

        why = f" ({inert(now.error)})" if now.error else ""
        raise RunCancelledMeanwhile(
            f"run {run_id} was cancelled{why} as this process started to continue it; "
            f"`{resume_command(run_id, getattr(backend, 'location', None))}` continues it all the same"
        )
    raise RunClaimed(f"run {run_id} is being continued by another process")


# -- what a suspended run says -------------------------------------------------------------------
def _items(backend: Any) -> Any:
    from teamrun.store.pending import PendingRepository

    return PendingRepository(backend.store)


def _store_option(store: str | None) -> str:
    from teamrun.cli.resume_cmd import store_option

    return store_option(store)


def describe(item: Any) -> str:
    """One line for a pending item: id, who asks, the question, its choices."""
    choices = item.spec.get("choices")
    shown = f"  [{' | '.join(choices)}]" if choices else ""
    verb = "asks" if item.kind == "question" else "waits for approval:"
    return inert(f"{item.item_id}  {item.agent} {verb} {' '.join(item.question.split())}{shown}")  # a model's words


def waiting_lines(backend: Any, run_id: str, store: str | None) -> list[str]:
    """What ``execute`` prints when the run suspends: its pending items and the commands that answer them."""
    pending = _items(backend).items(run_id, status="pending")
    lines = [f"teamrun: run {run_id} is waiting for a person ({len(pending)} pending; exit {EXIT_WAITING}):"]
    lines += [f"  {describe(item)}" for item in pending]
    return lines + answering_lines(run_id, {item.kind for item in pending}, store)


def answering_lines(run_id: str, kinds: set[str], store: str | None) -> list[str]:
    """The commands that settle a run's pending items of these kinds: ``teamrun answer`` for a question,
    ``teamrun approve`` / ``deny`` for an approval (``answer`` refuses an approval)."""
    where = _store_option(store)
    run = shlex.quote(run_id)
    lines = []
    if "question" in kinds:
        lines.append(f"answer with `teamrun answer {run} ITEM VALUE{where}`")
    if "approval" in kinds:
        lines.append(f"approve with `teamrun approve {run} ITEM{where}` (or `teamrun deny {run} ITEM{where}`)")
    return lines


def pending_views(backend: Any, run_ids: list[str]) -> dict[str, list[dict[str, Any]]]:
    """The pending items of each of ``run_ids`` (``runs list`` / ``runs show``)."""
    found: dict[str, list[dict[str, Any]]] = {}
    for item in _items(backend).items(status="pending"):
        if item.run_id in run_ids:
            found.setdefault(item.run_id, []).append({**item.view(), "line": describe(item)})
    return found


# -- the commands --------------------------------------------------------------------------------
def _when(stamp: float | None) -> str:
    return _dt.datetime.fromtimestamp(stamp or 0, _dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _item(backend: Any, store: str | None, run_id: str, item_id: str, kind: str) -> Any:
    """The pending item to answer; a clear error for an unknown run or item, the wrong kind, a settled item."""
    from teamrun.tools.people import check_text

    check_text(run_id, "the run id")
    check_text(item_id, "the item id")
    if backend.get_run(run_id) is None:
        raise UsageError(
            f"no run {run_id!r} in the store {backend.store.display}; "
            f"`teamrun runs list{_store_option(store)}` shows the runs it holds"
        )
    items = _items(backend)
    item = items.get(run_id, item_id)
    if item is None:
        known = items.items(run_id)
        listing = ", ".join(f"{i.item_id} ({i.status})" for i in known) or "none"
        raise UsageError(f"run {run_id} has no item {item_id!r}; its items: {listing}")
    if item.kind != kind:
        command = "answer" if item.kind == "question" else "approve` or `teamrun deny"
        what = "a question" if item.kind == "question" else "an approval"
        raise UsageError(f"item {item_id} of run {run_id} is {what}: use `teamrun {command}`")
    if item.status != "pending":
        raise UsageError(_settled(run_id, item) + _not_taken(backend, store, run_id, item))
    return item


def _not_taken(backend: Any, store: str | None, run_id: str, item: Any) -> str:
    """For an item answered that its run has not taken (the continuation failed: a team-file error, a crash):
    how to continue the run with it; else nothing."""
    if item.status != "answered" or item.used:
        return ""
    run = backend.get_run(run_id)
    if run is None or run.shown_status() in ("running", "done", "cancelled"):
        return ""
    from teamrun.cli.resume_cmd import resume_command

    return f"; the run has not taken the answer yet: continue it with `{resume_command(run_id, store)}`"


def _settled(run_id: str, item: Any) -> str:
    from teamrun.store.pending import CANCELLED_BY

    if item.status == "expired" and item.answered_by == CANCELLED_BY:
        return (
            f"run {run_id} was cancelled at {_when(item.answered_at)} while it waited for people: "
            f"item {item.item_id} takes no answer any more"
        )
    if item.status == "expired":
        return f"item {item.item_id} of run {run_id} expired at {_when(item.answered_at)}: nobody answered in time"
    return (
        f"item {item.item_id} of run {run_id} was already answered by {inert(str(item.answered_by))} "
        f"at {_when(item.answered_at)}"  # who answered: text from anyone with the store or the server
    )


def _record(backend: Any, run_id: str, item: Any, value: Any, by: str | None) -> str:
    from teamrun.engine.durability.pending import default_person
    from teamrun.tools.people import check_text

    check_text(value)
    check_text(by, "--by")
    who = by or default_person()
    if not _items(backend).answer(run_id, item.item_id, value, by=who):
        now = _items(backend).get(run_id, item.item_id)
        raise UsageError(_settled(run_id, now if now is not None else item))
    return who


def _continue(
    ctx: click.Context,
    backend: Any,
    store: str | None,
    run_id: str,
    item_id: str,
    *,
    as_json: bool,
    approve: str | None,
    progress: str,
    api_base: str | None = None,
) -> int:
    """Continue the run here, unless another process does: then wait until it took the answer.

    Two processes answering different items of one run at once both find it waiting: one takes the run (its
    claim, then the run's lock); the other is refused either one (:class:`RunClaimed`, ``RunBusy``), looks
    again and waits for the first to take its answer, or continues the run itself once it waits again.
    """
    from teamrun.cli.resume_cmd import resume
    from teamrun.engine.durability.resume import RunBusy

    items = _items(backend)
    said = False
    again = 3  # a continuation that suspends with nothing left to ask raced another one: look again
    while True:
        run = backend.get_run(run_id)
        status = run.shown_status()
        if status == "waiting" and items.unused_answers(run_id):
            try:
                result: int = ctx.invoke(
                    resume,
                    run_id=run_id,
                    store=store,
                    yes=False,
                    as_json=as_json,
                    approve=approve,
                    progress=progress,
                    api_base=api_base,
                )
            except (RunClaimed, RunBusy):
                continue  # another answering process took it between our look and our claim: wait for it
            except UserError as exc:  # the run could not continue (its team file no longer loads...): said last
                from teamrun.cli.resume_cmd import resume_command

                exc.args = (
                    f"{exc}\nteamrun: the answer is recorded; once this is fixed, continue run {run_id} with "
                    f"`{resume_command(run_id, store)}`",
                )
                raise
            if result == EXIT_WAITING and again > 0 and not items.items(run_id, status="pending"):
                again -= 1
                continue
            return result
        if status == "running":
            taken = items.get(run_id, item_id)
            if taken is not None and taken.used:
                click.echo(f"teamrun: run {run_id} (pid {run.pid} on {run.host}) took the answer and goes on", err=True)
                return 0
            if not said:
                click.echo(
                    f"teamrun: run {run_id} is being continued by pid {run.pid} on {run.host}; "
                    "waiting until it takes the answer",
                    err=True,
                )
                said = True
            time.sleep(_POLL_S)
            continue
        if status == "waiting":
            click.echo(f"teamrun: run {run_id} took the answer and waits for a person again", err=True)
            for line in waiting_lines(backend, run_id, store)[1:]:
                click.echo(line, err=True)
            return EXIT_WAITING
        if run.status in ("done",):
            click.echo(f"teamrun: run {run_id} was continued by another process: {run.status}", err=True)
            return 0
        from teamrun.cli.resume_cmd import resume_command

        click.echo(
            f"teamrun: the answer is recorded; run {run_id} is {status}: continue it with "
            f"`{resume_command(run_id, store)}`",
            err=True,
        )
        return 0


_COMMON = [
    click.option("--store", metavar="PATH|URL", help=_STORE_HELP),
    click.option(
        "--by", metavar="NAME", help="Who answers, as events and `teamrun runs` show it (default: USER@HOST)."
    ),
    click.option("--no-resume", "no_resume", is_flag=True, help="Only record the answer; do not continue the run."),
    click.option("--json", "as_json", is_flag=True, help="Print the continued run's result as JSON."),
    click.option(
        "--approve", metavar="all|none|TOOL,...", help="Answer approval prompts of the continued run up front."
    ),
    progress_option(RUN_PROGRESS_MODES, "How to show the continued run's progress on stderr (as `teamrun execute`)."),
    api_base_option,  # the continued run's endpoint (default: the one the run was started with)
]


def _common(fn: Any) -> Any:
    for option in reversed(_COMMON):
        fn = option(fn)
    return fn


def _finish(
    ctx: click.Context,
    backend: Any,
    store: str | None,
    run_id: str,
    item: Any,
    who: str,
    shown: str,
    no_resume: bool,
    as_json: bool,
    approve: str | None,
    progress: str,
    api_base: str | None,
) -> int:
    click.echo(f"teamrun: {item.item_id} of run {run_id} {shown} by {who}", err=True)
    if no_resume:
        return 0
    item_id = item.item_id
    return _continue(
        ctx, backend, store, run_id, item_id, as_json=as_json, approve=approve, progress=progress, api_base=api_base
    )


_NEGATIVE_NUMBER = re.compile(r"-\.?\d")
"""How a negative number starts (``-5``, ``-0.5``, ``-.5``, ``-1e3``): never an option's name."""


class _AnswerCommand(click.Command):
    """``teamrun answer``: a VALUE that is a negative number (``teamrun answer RUN q2 -5``) is the answer, not
    an unknown option ``-5``. It is moved after a ``--`` at the end (VALUE is the last argument); a mistyped
    option (``--bogus``) is still refused, and a number given as an option's value (``--by -5``) stays its value."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if "--" not in args:
            valued = {name for p in self.params if isinstance(p, click.Option) and not p.is_flag for name in p.opts}
            for i, arg in enumerate(args):
                if _NEGATIVE_NUMBER.match(arg) and (i == 0 or args[i - 1] not in valued):
                    args = [*args[:i], *args[i + 1 :], "--", arg]
                    break
        return super().parse_args(ctx, args)


@click.command(cls=_AnswerCommand, help=ANSWER_HELP, short_help="Answer a waiting run's question and continue it.")
@click.argument("run_id")
@click.argument("item_id", metavar="ITEM")
@click.argument("value")
@_common
@click.pass_context
def answer(
    ctx: click.Context,
    run_id: str,
    item_id: str,
    value: str,
    store: str | None,
    by: str | None,
    no_resume: bool,
    as_json: bool,
    approve: str | None,
    progress: str,
    api_base: str | None = None,
) -> int:
    from teamrun.cli.resume_cmd import open_existing_backend
    from teamrun.tools.people import PendingItem, masked, read_answer, shown_value

    check_api_base(api_base)  # refused before the answer is recorded
    backend = open_existing_backend(store, run_id)  # a mistyped --store is refused, not created
    item = _item(backend, store, run_id, item_id, "question")
    asked = PendingItem.from_spec("question", item.question, item.spec)
    parsed = read_answer(asked, value)
    who = _record(backend, run_id, item, parsed, by)
    return _finish(
        ctx,
        backend,
        store,
        run_id,
        item,
        who,
        f"answered ({shown_value(masked(asked, parsed))})",
        no_resume,
        as_json,
        approve,
        progress,
        api_base,
    )


def _decide(
    ctx: click.Context,
    approved: bool,
    run_id: str,
    item_id: str,
    note: str | None,
    store: str | None,
    by: str | None,
    no_resume: bool,
    as_json: bool,
    approve: str | None,
    progress: str,
    api_base: str | None = None,
) -> int:
    from teamrun.cli.resume_cmd import open_existing_backend
    from teamrun.tools.people import check_text

    check_api_base(api_base)  # refused before the decision is recorded
    backend = open_existing_backend(store, run_id)  # a mistyped --store is refused, not created
    item = _item(backend, store, run_id, item_id, "approval")
    check_text(note, "--note")
    who = _record(backend, run_id, item, {"approved": approved, "note": note}, by)
    return _finish(
        ctx,
        backend,
        store,
        run_id,
        item,
        who,
        "approved" if approved else "denied",
        no_resume,
        as_json,
        approve,
        progress,
        api_base,
    )


def _decision_command(approved: bool, help_text: str, short_help: str, note_help: str) -> click.Command:
    """``teamrun approve`` or ``teamrun deny``: one command but for the decision it records."""

    @click.command(help=help_text, short_help=short_help)
    @click.argument("run_id")
    @click.argument("item_id", metavar="ITEM")
    @click.option("--note", help=note_help)
    @_common
    @click.pass_context
    def decide(ctx: click.Context, /, run_id: str, item_id: str, note: str | None, **common: Any) -> int:
        return _decide(ctx, approved, run_id, item_id, note, **common)

    return decide


approve_item = _decision_command(
    True, APPROVE_HELP, "Approve a waiting run's tool call and continue it.", "A note for the agent."
)
deny_item = _decision_command(
    False, DENY_HELP, "Deny a waiting run's tool call and continue it.", "Why, for the agent (it reads it)."
)
