"""``GET /v1/runs/{id}/workspace``: a run's shared workspace now, and the writes that made it.

The answer has the run's entries (each one's value, version, the agent whose
write changed it last, every agent that changed it) and its writes in order, from
the run's ``workspace_write`` events: who, which entry, applied or refused and why,
the entry's version before and after, and the workspace's version when the write
arrived (``workspace_version``). ``?since=N`` keeps only the writes that came
after the workspace reached version N (a client polling with the ``version`` of
its last answer gets each write once). While the run is in progress, ``version``
is the one its writes announced: a change is applied before its event comes out
(the event waits for the journal's commit), and a client must not skip its write.
Every value is masked like the rest of the run's answers.

Where the entries come from: a run in progress, its workspace itself (this
process runs it: with ``--workers N`` the request is forwarded to the worker that
owns the run, :mod:`teamrun.serve.routing`); a finished run, its result; a run
known only from the store (an earlier server's, one whose worker is gone, one the
CLI ran or resumed with ``--store``), the workspace and the writes its journal keeps
(read through the journal's typed :class:`~teamrun.engine.durability.replay.Replay`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from teamrun.engine.durability.replay import Replay
from teamrun.engine.workspace.live import live_workspace
from teamrun.engine.workspace.state import WorkspaceState
from teamrun.serve.runs import RunHandle
from teamrun.serve.served import Served

if TYPE_CHECKING:
    from teamrun.config.models import Workspace
    from teamrun.store import Store

__all__ = ["held_workspace", "stored_workspace", "workspace_answer", "writes_of"]


def writes_of(records: Iterable[Mapping[str, Any]], *, started_at: int = 0) -> list[dict[str, Any]]:
    """The ``workspace_write`` events among a run's event lines, as the answer's ``writes`` (in order).

    ``started_at``: the workspace's version when the run began (a thread's kept workspace, else 0).
    """
    found: list[dict[str, Any]] = []
    reached = started_at
    for record in records:
        data = record.get("data") or {}
        if record.get("kind") == "board_op":  # a board's change takes the workspace's next version too
            after = data.get("version_after")
            if data.get("status") == "applied" and isinstance(after, int) and after > reached:
                reached = after
            continue
        if record.get("kind") != "workspace_write":
            continue
        path = [str(p) for p in record.get("agent_path") or ()]
        write: dict[str, Any] = {
            "seq": len(found) + 1,
            "entry": data.get("entry"),
            "writer": path[-1] if path else None,
            "agent_path": path,
            "rule": data.get("rule"),
            "status": data.get("status"),
            "reason": data.get("reason"),
            "version_before": data.get("version_before"),
            "version_after": data.get("version_after"),
            "workspace_version": reached,
            "message": data.get("message", ""),
            "replayed": bool(data.get("replayed", False)),
            "step": data.get("step"),
            "ts": record.get("ts"),
        }
        if data.get("step") and not path:  # a workflow step's `write:`
            write["writer"] = "workflow"
        if "value_after" in data and data.get("status") == "applied":  # with content only; a refusal has none
            write["value"] = data["value_after"]
        after = data.get("version_after")
        if data.get("status") == "applied" and isinstance(after, int) and after > reached:
            reached = after
        found.append(write)
    return found


def workspace_answer(
    *,
    run_id: str,
    team: str,
    status: str,
    spec: Workspace,
    snapshot: Mapping[str, Any],
    writes: Sequence[Mapping[str, Any]],
    since: int | None,
    source: str,
) -> dict[str, Any]:
    """The answer of ``GET /v1/runs/{id}/workspace`` (not masked yet): entries from ``snapshot``
    (:meth:`~teamrun.engine.workspace.state.WorkspaceState.snapshot`), ``writes`` from :func:`writes_of`."""
    last_writer: dict[str, str] = {}
    for write in writes:
        if write.get("status") == "applied" and write.get("version_after") != write.get("version_before"):
            last_writer[str(write.get("entry"))] = str(write.get("writer"))
    entries: dict[str, Any] = {}
    shown = snapshot.get("entries") or {}
    for name, entry_spec in spec.entries.items():
        entry = shown.get(name) or {}
        written_by = list(entry.get("written_by") or [])
        entries[name] = {
            "value": entry.get("value"),
            "version": int(entry.get("version") or 0),
            "writer": last_writer.get(name) or (written_by[-1] if written_by else None),
            "written_by": written_by,
            "merge": None if entry_spec.kind == "board" else entry_spec.merge,  # a board has no merge rule
            "kind": entry_spec.kind,
        }
    kept = [w for w in writes if since is None or int(w.get("workspace_version") or 0) >= since]
    answer: dict[str, Any] = {
        "object": "teamrun.workspace",
        "run_id": run_id,
        "team": team,
        "status": status,
        "version": _version(status, snapshot, writes),
        "since": since,
        "entries": entries,
        "writes": kept,
        "source": source,
    }
    carried = snapshot.get("carried_over")
    if isinstance(carried, Mapping):
        answer["carried_over"] = dict(carried)
    return answer


def _version(status: str, snapshot: Mapping[str, Any], writes: Sequence[Mapping[str, Any]]) -> int:
    """The answer's version: the snapshot's, but while the run is in progress no more than its writes announced (a
    write applied whose event is not out yet would otherwise be skipped by the client's next ``?since=``)."""
    version = int(snapshot.get("version") or 0)
    if status != "running":
        return version
    announced = 0
    for write in writes:
        after = write.get("version_after") if write.get("status") == "applied" else None
        for seen in (write.get("workspace_version"), after):
            if isinstance(seen, int) and seen > announced:
                announced = seen
    return min(version, announced)


def journaled_changes(replay: Replay) -> list[dict[str, Any]]:
    """The workspace and board changes a run's journal keeps, as event lines for :func:`writes_of` (every
    attempt's, whichever process ran it: a server, ``teamrun execute --store``, ``teamrun resume``)."""
    lines: list[dict[str, Any]] = []
    for invocation, record in replay.changes():
        if record.kind is None or record.event is None:
            continue
        step = bool(record.event.get("step"))  # a workflow step's write: the workflow's, no agent's
        lines.append({"kind": record.kind, "data": dict(record.event), "agent_path": [] if step else _path(invocation)})
    return lines


def _path(invocation: str) -> list[str]:
    """The agent path of a journal invocation key (``lead/researcher@1.0`` → ``["lead", "researcher"]``); an
    engine's own place (``@working-memory``, a board's ``#tasks``) names none of its own."""
    parts = [part.split("@", 1)[0].split("#", 1)[0] for part in re.split("[/>]", invocation)]
    return [part for part in parts if part]


def held_workspace(handle: RunHandle, spec: Workspace, since: int | None) -> dict[str, Any]:
    """The workspace of a run this process holds (masked with its redactor)."""
    live = live_workspace(handle.id)
    result = handle.result
    if result is not None and result.workspace is not None:  # over: its result keeps the final workspace
        snapshot: Mapping[str, Any] = result.workspace
        carried = result.workspace.get("carried_over")
        started_at = int(carried.get("version") or 0) if isinstance(carried, Mapping) else 0
    elif live is not None:  # in progress here
        snapshot, started_at = live.state.snapshot(), live.started_at
    else:  # not begun yet (or failed before its workspace was made): the initial values
        snapshot, started_at = WorkspaceState(spec).snapshot(), 0
    records = (handle.event(index) for index in range(handle.event_count))  # each masked as it is read
    answer = workspace_answer(
        run_id=handle.id,
        team=handle.team,
        status=handle.state,
        spec=spec,
        snapshot=snapshot,
        writes=writes_of(records, started_at=started_at),
        since=since,
        source="server",
    )
    masked: dict[str, Any] = handle.redactor.value(answer)
    return masked


def stored_workspace(
    store: Store, served: Mapping[str, Served], run_id: str, since: int | None
) -> dict[str, Any] | None:
    """The workspace of a run known only from the store (blocking), masked; ``None``: no such run here;
    ``{}``: its team has no workspace."""
    from teamrun.store.journal import StoreJournal

    with store.errors("read a run's workspace"):
        journal = StoreJournal(store)
        run = journal.get_run(run_id)
        if run is None or run.team not in served:  # the store's runs of teams served here only
            return None
        target = served[run.team]
        spec = target.team.config.workspace
        if spec is None:
            return {}
        replay = Replay(journal.load(run_id))
        state = WorkspaceState(spec)
        state.restore(replay.workspace_states())
    answer = workspace_answer(
        run_id=run_id,
        team=run.team,
        status=run.shown_status(),
        spec=spec,
        snapshot=state.snapshot(),
        writes=writes_of(journaled_changes(replay)),
        since=since,
        source="store",
    )
    masked: dict[str, Any] = target.redactor.value(answer)
    return masked
