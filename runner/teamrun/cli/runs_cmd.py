"""``teamrun runs list|show``: the runs a store holds, with status and cost."""

from __future__ import annotations

import datetime as _dt
import json
from typing import Any

import click

from teamrun.errors import UsageError
from teamrun.money import format_usd
from teamrun.observe.bidi import inert

HELP = """List and show the runs a store holds: status, cost, tokens, and how to resume them.

A run killed without a chance to say so (SIGKILL, a power cut) still says
`running` in the store; it is shown as `interrupted` once its process is gone
(same host) or its heartbeat stopped (another host). `teamrun resume RUN_ID`
continues it.

\b
Examples:
  teamrun runs list
  teamrun runs list --json --limit 200
  teamrun runs show 3f2a9c1b7d4e
"""

_STORE_HELP = "The store (default: $TEAMRUN_STORE, else ~/.local/share/teamrun/teamrun.db)."


@click.group(help=HELP, short_help="List and show the runs a store holds.")
def runs() -> None:
    pass


def resume_command(run_id: str, store: str | None) -> str:
    from teamrun.cli.resume_cmd import resume_command as command

    return command(run_id, store)


def store_option(store: str | None) -> str:
    from teamrun.cli.resume_cmd import store_option as option

    return option(store)


def _backend(store: str | None) -> Any:
    from teamrun.cli.resume_cmd import open_backend

    return open_backend(store)


def _when(stamp: float | None) -> str:
    if not stamp:
        return "-"
    return _dt.datetime.fromtimestamp(stamp, _dt.UTC).strftime("%Y-%m-%d %H:%M:%S")


def _view(run: Any) -> dict[str, Any]:
    """What ``runs list --json`` and ``runs show --json`` print of one run."""
    return {
        "run_id": run.run_id,
        "team": run.team,
        "status": run.shown_status(),
        "stored_status": run.status,
        **run.spending(),
        "input": run.input,
        "final_text": run.final_text,
        "error": run.error,
        "started_at": _when(run.started_at),
        "ended_at": _when(run.ended_at) if run.ended_at else None,
        "attempts": run.attempts,
        "replayed_calls": run.replayed_calls,
        "team_file": run.team_file or None,
        "thread_id": run.thread_id,
        "pid": run.pid or None,
        "host": run.host or None,
    }


def _short(text: str, width: int) -> str:
    from teamrun.observe.bidi import cell

    return cell(text, width)


def _cost_said(view: dict[str, Any]) -> str:
    """A stored run's cost: "unknown" or "at least $X" when some calls reported no usage."""
    if view["cost"] is not None:
        return format_usd(view["cost"])
    counted = float(view["counted"]["cost"])
    return f"at least {format_usd(counted)}" if counted else "unknown"


def _tokens_said(view: dict[str, Any]) -> str:
    """A stored run's tokens: "unknown" or "at least N" when some calls reported no usage, never a pretended 0."""
    if view["usage"] is not None:
        return str(view["usage"].get("total_tokens", 0))
    total = int(view["counted"]["usage"].get("total_tokens", 0))
    return f"at least {total}" if total else "unknown"


@runs.command("list", help="The newest runs first: id, status, team, start, cost, tokens, input.")
@click.option("--store", metavar="PATH|URL", help=_STORE_HELP)
@click.option("--limit", type=click.IntRange(min=1), default=50, show_default=True, help="Show at most this many.")
@click.option("--team", help="Only runs of this team (its name).")
@click.option("--json", "as_json", is_flag=True, help="One JSON array instead of a table.")
def list_runs(store: str | None, limit: int, team: str | None, as_json: bool) -> None:
    from teamrun.store.location import missing_store_file

    if (missing := missing_store_file(store)) is not None:  # a read creates no store (nor its folders)
        click.echo("[]" if as_json else "", nl=as_json)
        click.echo(f"no runs: there is no store at {missing} (nothing was journaled there)", err=True)
        return
    backend = _backend(store)
    found = [_view(run) for run in backend.list_runs(limit=limit, team=team)]
    _with_pending(backend, found)
    if as_json:
        click.echo(json.dumps(found, indent=2, ensure_ascii=False))
        return
    if not found:
        click.echo("no runs in the store", err=True)
        return
    rows = [["RUN", "STATUS", "TEAM", "STARTED (UTC)", "COST", "TOKENS", "INPUT"]]
    for run in found:
        tokens = _tokens_said(run)
        rows.append(
            [
                run["run_id"],
                run["status"],
                _short(run["team"], 24),
                run["started_at"],
                _cost_said(run),
                tokens,
                _short(run["input"], 40),
            ]
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]) - 1)]
    for row, shown in zip(rows, [None, *found], strict=True):
        click.echo("  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=False)) + "  " + row[-1])
        for item in (shown or {}).get("pending", ()):  # what a waiting run waits for
            click.echo(f"    {_short(item['line'], 110)}")


def _with_pending(backend: Any, views: list[dict[str, Any]]) -> None:
    """Add each waiting run's pending items (questions, approvals) to its view."""
    waiting = [view["run_id"] for view in views if view["status"] == "waiting"]
    if waiting:
        from teamrun.cli.answer_cmd import pending_views

        items = pending_views(backend, waiting)
        for view in views:
            if view["run_id"] in items:
                view["pending"] = items[view["run_id"]]


@runs.command("show", help="One run: status, cost, usage, attempts, what its journal holds, its answer.")
@click.argument("run_id")
@click.option("--store", metavar="PATH|URL", help=_STORE_HELP)
@click.option("--json", "as_json", is_flag=True, help="JSON instead of text.")
def show_run(run_id: str, store: str | None, as_json: bool) -> None:
    from teamrun.store.location import missing_store_file

    if (missing := missing_store_file(store)) is not None:
        raise UsageError(f"no run {run_id!r}: there is no store at {missing} (nothing was journaled there)")
    backend = _backend(store)
    run = backend.get_run(run_id)
    if run is None:
        raise UsageError(
            f"no run {run_id!r} in the store {backend.store.display}; "
            f"`teamrun runs list{store_option(store)}` shows the runs it holds"
        )
    view = {**_view(run), "journal": backend.counts(run_id)}
    _with_pending(backend, [view])
    if as_json:
        click.echo(json.dumps(view, indent=2, ensure_ascii=False))
        return
    usage = view["usage"] if view["usage"] is not None else view["counted"]["usage"]
    journal = view["journal"]
    lines = [
        f"run       {view['run_id']}  ({view['team']})",
        f"status    {view['status']}"
        + (f"  (stored: {view['stored_status']})" if view["status"] != view["stored_status"] else ""),
        f"started   {view['started_at']}" + (f"  ended {view['ended_at']}" if view["ended_at"] else ""),
        (
            f"cost      {format_usd(view['cost'])}  tokens {usage.get('total_tokens', 0)} "
            f"(in {usage.get('input_tokens', 0)}, out {usage.get('output_tokens', 0)}), "
            if view["usage"] is not None
            else f"cost      {_cost_said(view)}  tokens {_tokens_said(view)} (some calls reported no usage), "
        )
        + f"{usage.get('requests', 0)} model calls",
        f"attempts  {view['attempts']}"
        + (f", {view['replayed_calls']} calls replayed in the last" if view["replayed_calls"] else ""),
        f"journal   {journal.get('model', 0)} model replies, {journal.get('tool', 0)} tool results",
    ]
    if view["team_file"]:
        lines.append(f"team file {view['team_file']}")
    if view["error"]:
        lines.append(f"error     {view['error']}")
    lines.append(f"input     {_short(view['input'], 200)}")
    for item in view.get("pending", ()):
        lines.append(f"waits for {item['line']}")
    if view.get("pending"):
        from teamrun.cli.answer_cmd import answering_lines

        lines += answering_lines(view["run_id"], {item["kind"] for item in view["pending"]}, store)
    if view["final_text"]:
        lines += ["", view["final_text"]]
    if view["status"] in ("interrupted", "cancelled", "failed", "budget_exhausted") and view["team_file"]:
        lines += ["", f"resume it with `{resume_command(view['run_id'], store)}`"]
    click.echo(inert("\n".join(lines)))  # the answer, the error and the pending questions come from models
