"""A board: a workspace entry (``kind: board``) whose value is a list of tasks with leases, with no I/O.

Each task is ``{id, payload, status, posted_by, after, claimed_by, claims, result, completed_by}``;
``status`` is ``open`` (offered), ``claimed`` (one claimant holds a lease), ``done`` (completed once, with
its result) or ``failed`` (released or expired ``max_claims`` times: offered no more). A task whose
``after`` names tasks not yet done is not offered. Every operation that changes the board takes the
workspace's next version, like any write (:class:`~teamrun.engine.workspace.state.WorkspaceState`), so
the journal keeps the board's state after each one and a resume restores it. Lease deadlines are the
run's own (monotonic clock): a restored claim gets a fresh lease.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from teamrun.config.models import WorkspaceEntry
from teamrun.engine.workspace.state import WorkspaceState, finite, value_size

__all__ = ["Board", "BoardOp", "BoardOutcome", "BoardRefusal", "Veto", "board_entries"]

BoardOp = Literal["post", "claim", "complete", "release", "expire"]
BoardRefusal = Literal["permission", "schema", "size", "arguments", "busy", "lease", "closed", "empty", "limit", "hook"]
"""Why an operation was refused: the caller may not use the board, a payload its schema refuses, the board
would pass ``max_bytes``, bad arguments, the caller holds a lease already (``busy``), the caller holds no
lease on that task (``lease``), the board is closed (the peers ended), nothing to claim (``empty``), or
``limits.max_tasks`` leaves no claim, or a board hook (``on_claim``, ``on_complete``) refused it."""
Veto = Callable[[dict[str, Any], Any], "str | None"]
"""A board's hooks at one point: the refusal text for a task (and a result), or ``None`` to allow it."""


def board_entries(entries: Mapping[str, WorkspaceEntry]) -> list[str]:
    """The names of the workspace's boards, in the file's order."""
    return [name for name, spec in entries.items() if spec.kind == "board"]


@dataclass(frozen=True)
class BoardOutcome:
    """What one board operation did: applied or refused, and why."""

    board: str
    op: BoardOp
    agent: str
    applied: bool
    task_id: str | None
    version_before: int
    version_after: int
    reason: BoardRefusal | None = None
    message: str = ""
    task: dict[str, Any] | None = None
    """The task after the operation (for a claim: what the claimant works on)."""
    state: dict[str, Any] | None = None
    """The entry after an applied change (:meth:`EntryState.as_payload`), for the journal."""

    def for_model(self) -> dict[str, Any]:
        """The tool result the model reads."""
        status = {"post": "posted", "claim": "claimed", "complete": "completed", "release": "released"}
        shown: dict[str, Any] = {
            "status": status.get(self.op, self.op) if self.applied else "refused",
            "board": self.board,
        }
        if self.task is not None:
            shown["task"] = self.task
        elif self.task_id is not None:
            shown["task_id"] = self.task_id
        if self.reason is not None:
            shown["reason"] = self.reason
        shown["message"] = self.message
        return shown

    def event_fields(self) -> dict[str, Any]:
        return {
            "entry": self.board,
            "op": self.op,
            "task_id": self.task_id,
            "status": "applied" if self.applied else "refused",
            "reason": self.reason,
            "version_before": self.version_before,
            "version_after": self.version_after,
            "message": self.message,
        }


@dataclass
class Board:
    """One board of the run's workspace: its tasks live in the workspace entry; leases' deadlines here."""

    workspace: WorkspaceState
    name: str
    writers: tuple[str, ...]
    """The agents that may post, claim, complete and release."""
    deadlines: dict[str, float] = field(default_factory=dict)
    """Each claimed task's lease deadline (the run's monotonic clock)."""
    closed: bool = False
    """Set when the peers ended: nothing is posted or claimed any more."""

    @property
    def spec(self) -> WorkspaceEntry:
        return self.workspace.spec.entries[self.name]

    @property
    def tasks(self) -> list[dict[str, Any]]:
        value = self.workspace.entries[self.name].value
        return value if isinstance(value, list) else []

    def task(self, task_id: str) -> dict[str, Any] | None:
        return next((t for t in self.tasks if t.get("id") == task_id), None)

    def counts(self) -> dict[str, int]:
        counts = {"open": 0, "claimed": 0, "done": 0, "failed": 0}
        for task in self.tasks:
            counts[str(task.get("status"))] = counts.get(str(task.get("status")), 0) + 1
        return counts

    def held_by(self, agent: str) -> dict[str, Any] | None:
        return next((t for t in self.tasks if t.get("status") == "claimed" and t.get("claimed_by") == agent), None)

    def claimable(self) -> list[dict[str, Any]]:
        """Open tasks whose ``after`` tasks are all done, in the order they were posted."""
        done = {t.get("id") for t in self.tasks if t.get("status") == "done"}
        return [t for t in self.tasks if t.get("status") == "open" and all(a in done for a in t.get("after") or ())]

    def rearm(self, now: float) -> None:
        """Give each claimed task (restored from a journal) a fresh lease from ``now``."""
        self.deadlines = {str(t["id"]): now + self.spec.lease_s for t in self.tasks if t.get("status") == "claimed"}

    # -- operations ---------------------------------------------------------------------------
    def post(
        self, agent: str, payload: Any, *, after: list[str] | None = None, by_engine: bool = False
    ) -> BoardOutcome:
        if not by_engine and agent not in self.writers:
            return self.refuse("post", agent, None, "permission", self._not_writer(agent))
        if self.closed:
            return self.refuse("post", agent, None, "closed", f"the board '{self.name}' is closed: the peers ended")
        known = {t.get("id") for t in self.tasks}
        unknown = [a for a in after or () if a not in known]
        if unknown:
            return self.refuse(
                "post", agent, None, "arguments", f"'after' names tasks the board does not have: {', '.join(unknown)}"
            )
        if not finite(payload):
            return self.refuse(
                "post", agent, None, "arguments", "a payload takes finite numbers only (not NaN or infinity)"
            )
        problem = self.workspace.schema_problem(self.name, payload)
        if problem is not None:
            return self.refuse(
                "post", agent, None, "schema", f"the payload does not satisfy the board's schema: {problem}"
            )
        task = {
            "id": f"t{len(self.tasks) + 1}",
            "payload": copy.deepcopy(payload),
            "status": "open",
            "posted_by": agent,
            "after": list(after or ()),
            "claimed_by": None,
            "claims": 0,
            "result": None,
            "completed_by": None,
        }
        tasks = [*copy.deepcopy(self.tasks), task]
        size = value_size(tasks)
        if size > self.spec.max_bytes:
            return self.refuse(
                "post",
                agent,
                None,
                "size",
                f"the board would grow to {size} bytes, past its max_bytes ({self.spec.max_bytes})",
            )
        return self._apply("post", agent, task["id"], tasks, f"posted task {task['id']}")

    def claim(self, agent: str, now: float, *, room: int | None = None, veto: Veto | None = None) -> BoardOutcome:
        """Take the first claimable task for ``agent`` (that ``veto`` allows) with a lease until ``now + lease_s``;
        ``room``: claims the run's ``max_tasks`` still allows (done and claimed tasks count)."""
        if agent not in self.writers:
            return self.refuse("claim", agent, None, "permission", self._not_writer(agent))
        held = self.held_by(agent)
        if held is not None:
            return self.refuse(
                "claim", agent, str(held["id"]), "busy", f"you hold task {held['id']}: complete or release it first"
            )
        if self.closed:
            return self.refuse("claim", agent, None, "closed", f"the board '{self.name}' is closed: the peers ended")
        offered = self.claimable()
        if not offered:
            return self.refuse("claim", agent, None, "empty", self._nothing_message())
        if room is not None and room <= 0:
            return self.refuse("claim", agent, None, "limit", "limits.max_tasks leaves no task to claim")
        refusal = ""
        if veto is not None:
            allowed = []
            for candidate in offered:
                said = veto(copy.deepcopy(candidate), None)
                if said is None:
                    allowed.append(candidate)
                    break
                refusal = said
            if not allowed:
                return self.refuse("claim", agent, str(offered[-1]["id"]), "hook", refusal)
            offered = allowed
        tasks = copy.deepcopy(self.tasks)
        task = next(t for t in tasks if t["id"] == offered[0]["id"])
        task.update(status="claimed", claimed_by=agent, claims=int(task.get("claims") or 0) + 1)
        self.deadlines[str(task["id"])] = now + self.spec.lease_s
        return self._apply(
            "claim", agent, str(task["id"]), tasks, f"you hold task {task['id']} for {self.spec.lease_s:g} s"
        )

    def complete(self, agent: str, task_id: str, result: Any, *, veto: Veto | None = None) -> BoardOutcome:
        if agent not in self.writers:
            return self.refuse("complete", agent, task_id, "permission", self._not_writer(agent))
        refused = self._lease_problem("complete", agent, task_id)
        if refused is not None:
            return refused
        if not finite(result):
            return self.refuse(
                "complete", agent, task_id, "arguments", "a result takes finite numbers only (not NaN or infinity)"
            )
        said = veto(copy.deepcopy(self.task(task_id) or {}), copy.deepcopy(result)) if veto is not None else None
        if said is not None:
            return self.refuse("complete", agent, task_id, "hook", said)
        tasks = copy.deepcopy(self.tasks)
        task = next(t for t in tasks if t["id"] == task_id)
        task.update(status="done", result=copy.deepcopy(result), completed_by=agent, claimed_by=None)
        size = value_size(tasks)
        if size > self.spec.max_bytes:
            return self.refuse(
                "complete",
                agent,
                task_id,
                "size",
                f"the result would grow the board to {size} bytes, past its max_bytes",
            )
        self.deadlines.pop(task_id, None)
        return self._apply("complete", agent, task_id, tasks, f"task {task_id} is done")

    def release(self, agent: str, task_id: str, reason: str = "", *, op: BoardOp = "release") -> BoardOutcome:
        """Return a claimed task to the board (``op="expire"``: its lease ran out, or its claimant ended)."""
        if op == "release":
            if agent not in self.writers:
                return self.refuse("release", agent, task_id, "permission", self._not_writer(agent))
            refused = self._lease_problem("release", agent, task_id)
            if refused is not None:
                return refused
        tasks = copy.deepcopy(self.tasks)
        task = next((t for t in tasks if t["id"] == task_id and t.get("status") == "claimed"), None)
        if task is None:
            return self.refuse(op, agent, task_id, "lease", f"task {task_id} is not claimed")
        holder = task.get("claimed_by")
        failed = int(task.get("claims") or 0) >= self.spec.max_claims
        task.update(status="failed" if failed else "open", claimed_by=None)
        if failed:
            task["result"] = f"failed: claimed {task['claims']} times without being completed ({reason or op})"
        self.deadlines.pop(task_id, None)
        said = f"task {task_id} of {holder} returned to the board" if not failed else f"task {task_id} failed"
        return self._apply(op, agent, task_id, tasks, f"{said}{f' ({reason})' if reason else ''}")

    # -- helpers ---------------------------------------------------------------------------------
    def _lease_problem(self, op: BoardOp, agent: str, task_id: str) -> BoardOutcome | None:
        task = self.task(task_id)
        if task is None:
            return self.refuse(op, agent, task_id, "arguments", f"the board has no task '{task_id}'")
        if task.get("status") != "claimed" or task.get("claimed_by") != agent:
            now = f"it is {task.get('status')}" + (f" by {task['claimed_by']}" if task.get("claimed_by") else "")
            return self.refuse(
                op, agent, task_id, "lease", f"you hold no lease on task {task_id} ({now}): claim a task first"
            )
        return None

    def _nothing_message(self) -> str:
        counts = self.counts()
        if counts["open"]:
            return f"no open task is ready: {counts['open']} wait for tasks not done yet"
        if counts["claimed"]:
            return f"no open task: {counts['claimed']} claimed by others"
        return "the board is empty"

    def _not_writer(self, agent: str) -> str:
        return f"{agent} may not use the board '{self.name}' (its users: {', '.join(self.writers) or 'nobody'})"

    def refuse(self, op: BoardOp, agent: str, task_id: str | None, reason: BoardRefusal, message: str) -> BoardOutcome:
        version = self.workspace.entries[self.name].version
        return BoardOutcome(self.name, op, agent, False, task_id, version, version, reason, message)

    def _apply(self, op: BoardOp, agent: str, task_id: str, tasks: list[dict[str, Any]], message: str) -> BoardOutcome:
        before = self.workspace.entries[self.name].version
        version, state = self.workspace.commit(self.name, agent, tasks)
        task = next(t for t in tasks if t["id"] == task_id)
        return BoardOutcome(
            self.name, op, agent, True, task_id, before, version, None, message, copy.deepcopy(task), state
        )
