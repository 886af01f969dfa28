"""Delegated tasks under contract: ids, attempts, follow-ups, and how the delegating agent judged them.

A delegation becomes a tracked task when its call names a ``task_id``, an
``expected_output`` or ``follow_up_of``. Each task keeps its attempts (the
first one and its follow-ups, at most ``delegation.max_follow_ups`` of
those), the execution status of its latest attempt (``ok``, ``error``...),
and apart from that its business status: ``open`` while the delegating agent
has not decided, ``needs_follow_up`` while a follow-up runs, and at the end
of the agent's run ``accepted`` (its latest attempt succeeded) or
``abandoned`` (it did not, or the agent cancelled it).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

BusinessStatus = Literal["open", "needs_follow_up", "accepted", "abandoned"]


@dataclass
class TaskRecord:
    """One tracked task of one delegating agent."""

    task_id: str
    agent: str
    parent: str
    task: str
    expected_output: str | None = None
    attempts: int = 0
    status: str = "running"
    """Execution status of the latest attempt: ``running``, then a delegation status."""
    review: BusinessStatus = "open"
    """Business status: what the delegating agent made of it."""
    last_response: str = ""

    def as_dict(self) -> dict[str, Any]:
        return {
            "task_id": self.task_id,
            "agent": self.agent,
            "parent": self.parent,
            "task": self.task,
            "expected_output": self.expected_output,
            "attempts": self.attempts,
            "status": self.status,
            "review": self.review,
        }


class TaskRefused(ValueError):
    """A task request that cannot go ahead; the message is for the model."""


@dataclass
class TaskLedger:
    """The tracked tasks of one delegating agent invocation."""

    owner: str
    max_follow_ups: int
    tasks: dict[str, TaskRecord] = field(default_factory=dict)
    _numbers: dict[str, int] = field(default_factory=dict)

    def open(
        self, agent: str, task: str, *, task_id: str | None, expected_output: str | None, follow_up_of: str | None
    ) -> tuple[TaskRecord, bool]:
        """The record this attempt belongs to, and whether it is a follow-up. Raises :class:`TaskRefused`.

        The attempt is counted and marked running here, in the same step as the checks (a follow-up of a
        running task is refused), so concurrent requests cannot all pass them; :meth:`withdraw` takes back
        an attempt refused afterwards."""
        if follow_up_of is not None:
            record = self.tasks.get(follow_up_of)
            if record is None:
                known = ", ".join(self.tasks) or "none yet"
                raise TaskRefused(f"there is no task '{follow_up_of}' to follow up (tasks: {known})")
            if record.agent != agent:
                raise TaskRefused(
                    f"task '{follow_up_of}' belongs to {record.agent}; follow it up with {record.agent}, not {agent}"
                )
            if record.attempts - 1 >= self.max_follow_ups:
                raise TaskRefused(
                    f"task '{follow_up_of}' already had {self.max_follow_ups} follow-up(s) "
                    f"(delegation.max_follow_ups); use its result as it is or leave it out"
                )
            if record.status == "running":
                raise TaskRefused(f"task '{follow_up_of}' is still running; wait for its result first")
            if expected_output:
                record.expected_output = expected_output
            record.review = "needs_follow_up"
            self._attempt(record)
            return record, True
        if task_id is not None and task_id in self.tasks:
            raise TaskRefused(f"task id '{task_id}' is taken; to continue it pass follow_up_of: '{task_id}'")
        if task_id is None:
            number = self._numbers.get(agent, 0) + 1
            while f"{agent}-{number}" in self.tasks:
                number += 1
            self._numbers[agent] = number
            task_id = f"{agent}-{number}"
        record = TaskRecord(task_id, agent, self.owner, task, expected_output)
        self.tasks[task_id] = record
        self._attempt(record)
        return record, False

    def _attempt(self, record: TaskRecord) -> None:
        record.attempts += 1
        record.status = "running"

    def withdraw(self, record: TaskRecord, status: str, response: str) -> None:
        """An attempt refused after :meth:`open` (a limit, an ``on_start`` hook): it does not count."""
        record.attempts -= 1
        self.settle(record, status, response)

    def settle(self, record: TaskRecord, status: str, response: str) -> None:
        record.status = status
        record.last_response = response
        if record.review == "needs_follow_up":
            record.review = "open"

    def close(self) -> None:
        """The delegating agent answered: its open tasks are accepted or abandoned."""
        for record in self.tasks.values():
            if record.review in ("open", "needs_follow_up"):
                record.review = "accepted" if record.status == "ok" else "abandoned"

    def summary(self) -> str:
        """The compact ledger shown to the delegating agent each turn (empty without tasks)."""
        if not self.tasks:
            return ""
        lines = ["## Your tasks", "id | agent | status | attempts | review"]
        lines += [f"{r.task_id} | {r.agent} | {r.status} | {r.attempts} | {r.review}" for r in self.tasks.values()]
        lines.append(f"Follow a task up with `follow_up_of: <id>` (at most {self.max_follow_ups} per task).")
        return "\n".join(lines)


__all__ = ["BusinessStatus", "TaskLedger", "TaskRecord", "TaskRefused"]
