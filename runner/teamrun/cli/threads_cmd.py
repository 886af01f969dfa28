"""``teamrun threads list|show|delete``: the conversations kept in the store."""

from __future__ import annotations

import json
from typing import Any

import click

from teamrun.errors import UsageError
from teamrun.observe.bidi import inert

HELP = """List, show and delete threads: the conversations of `teamrun chat` and
`teamrun execute --thread ID`, kept in the store (default: $TEAMRUN_STORE, else
~/.local/share/teamrun/teamrun.db; --store PATH|URL to choose).

\b
Examples:
  teamrun threads list
  teamrun threads list --team support-triage --json
  teamrun threads show support-42
  teamrun threads delete support-42
"""

_STORE_HELP = (
    "The store: a SQLite file or a SQLAlchemy URL (default: $TEAMRUN_STORE, else ~/.local/share/teamrun/teamrun.db)."
)


def _store(location: str | None) -> Any:
    from teamrun.store import open_store

    return open_store(location)


@click.group(help=HELP, short_help="List, show and delete conversation threads.")
def threads() -> None:
    pass


@threads.command(
    "list",
    short_help="The threads in the store, most recently updated first.",
    help="""\
The threads in the store, most recently updated first: id, team, turns, who
answers the next turn, last update.

\b
Examples:
  teamrun threads list
  teamrun threads list --team support-triage --json
  teamrun threads list --store postgresql+psycopg://db/teamrun
""",
)
@click.option("--store", "store_location", metavar="PATH|URL", help=_STORE_HELP)
@click.option("--team", metavar="NAME", help="Only threads of this team (its `name:`).")
@click.option("--limit", type=click.IntRange(min=1), default=50, show_default=True, help="At most this many.")
@click.option("--json", "as_json", is_flag=True, help="One JSON array instead of a table.")
def list_(store_location: str | None, team: str | None, limit: int, as_json: bool) -> None:
    from teamrun.store.location import missing_store_file

    if (missing := missing_store_file(store_location)) is not None:  # a read creates no store (nor its folders)
        click.echo("[]" if as_json else "", nl=as_json)
        click.echo(f"no threads: there is no store at {missing} (no thread was kept there)", err=True)
        return
    with _store(store_location) as store, store.errors("list threads"):
        found = store.threads.list(team=team, limit=limit)
    if as_json:
        click.echo(json.dumps([t.as_dict() for t in found], indent=2, ensure_ascii=False))
        return
    if not found:
        click.echo("no threads" + (f" of team {team}" if team else ""), err=True)
        return
    click.echo(format_threads(found))


def format_threads(found: list[Any]) -> str:
    """A table of threads: id, team, turns, who answers next, last update."""
    from teamrun.observe.bidi import cell

    rows = [("THREAD", "TEAM", "TURNS", "NEXT", "UPDATED")]
    rows += [
        (
            cell(t.id, 200),
            cell(t.team, 60),
            str(t.turns),
            t.current_agent or "-",
            t.updated_at.strftime("%Y-%m-%d %H:%M"),
        )
        for t in found
    ]
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return inert("\n".join("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in rows))


@threads.command(
    short_help="A thread's turns: each message and who answered it.",
    help="""\
A thread's turns: each user message and the answer, with the agent that gave
it. --memory adds workers' own memory (`memory: thread`).

\b
Examples:
  teamrun threads show support-42
  teamrun threads show support-42 --memory --json
""",
)
@click.argument("thread_id")
@click.option("--store", "store_location", metavar="PATH|URL", help=_STORE_HELP)
@click.option("--memory", is_flag=True, help="Also the workers' memory in this thread.")
@click.option("--json", "as_json", is_flag=True, help="The thread and its messages as JSON.")
def show(thread_id: str, store_location: str | None, memory: bool, as_json: bool) -> None:
    from teamrun.store.location import missing_store_file

    if (missing := missing_store_file(store_location)) is not None:
        raise UsageError(f"no thread {thread_id!r}: there is no store at {missing} (no thread was kept there)")
    with _store(store_location) as store, store.errors(f"read thread {thread_id!r}"):
        record = store.threads.get(thread_id)
        if record is None:
            raise UsageError(f"no thread {thread_id!r} in the store {store.display} (see: teamrun threads list)")
        messages = store.threads.shown_messages(thread_id, scope=None if memory else "")  # secret answers masked
    if as_json:
        click.echo(
            json.dumps({**record.as_dict(), "messages": [m.as_dict() for m in messages]}, indent=2, ensure_ascii=False)
        )
        return
    click.echo(
        inert(
            f"thread {record.id} (team {record.team}, {record.turns} turn(s); "
            f"next turn: {record.current_agent or 'the supervisor'})"
        )
    )
    for message in messages:
        who = "user" if message.role == "user" else (message.agent or message.role)
        where = f"[{message.scope}] " if message.scope else ""
        text = message.content if isinstance(message.content, str) else json.dumps(message.content)
        click.echo(inert(f"\n{where}#{message.turn} {who}:\n{text}"))


@threads.command(
    short_help="Delete a thread and everything kept with it.",
    help="""\
Delete a thread and everything kept with it (its turns, the workers' memory
in it, and its messages indexed for the recall of earlier threads). There is
no undo; the next `--thread ID` with that id starts afresh. Other runs that
quoted its messages keep them in their journals (and kept events): `teamrun
memory forget --resource ID` removes those too.

\b
Examples:
  teamrun threads delete support-42
  teamrun threads delete support-42 --store .teamrun/threads.db
""",
)
@click.argument("thread_id")
@click.option("--store", "store_location", metavar="PATH|URL", help=_STORE_HELP)
def delete(thread_id: str, store_location: str | None) -> None:
    with _store(store_location) as store:
        with store.errors(f"delete thread {thread_id!r}"):
            deleted = store.threads.delete(thread_id)
        if not deleted:
            raise UsageError(f"no thread {thread_id!r} in the store {store.display} (see: teamrun threads list)")
    click.echo(f"deleted thread {thread_id}", err=True)
