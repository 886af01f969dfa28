"""A run seen as an A2A task: :class:`RunView` (what the server knows of a run, masked) → a2a-sdk's ``Task``.

A task is a run: the task id *is* the run id, so ``/v1/runs/{id}`` and A2A's
``GetTask`` read the same thing. This module only converts; where a run is
found (this process, the store) is :mod:`teamrun.serve.a2a.handler`'s job.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from a2a.types import Artifact, Message, Part, Task, TaskStatus

__all__ = ["ANSWER_ARTIFACT", "TERMINAL", "RunView", "artifact_of", "input_required_text", "status_of", "task_of"]

ANSWER_ARTIFACT = "answer"
"""The id (and name) of a task's one artifact: the run's final answer."""

TERMINAL = frozenset({"done", "budget_exhausted", "failed", "cancelled", "refused", "interrupted"})
"""Run statuses that end a task (no message continues it)."""


@dataclass(frozen=True)
class RunView:
    """A run as a task shows it; every text already masked with the team's secrets."""

    run_id: str
    team: str
    status: str
    """A run status (``running``, ``waiting``, ``done``, ``budget_exhausted``, ``failed``, ``cancelled``), or
    ``refused`` (the request could not run) or ``interrupted`` (the process running it stopped)."""
    context_id: str
    input: str
    final_text: str | None = None
    error: str | None = None
    cancel_reason: str | None = None
    created: float = 0.0
    pending: Sequence[dict[str, Any]] = field(default_factory=tuple)
    """The items the run waits for (``status: waiting``), oldest first, as ``GET /v1/pending`` lists them."""
    usage: dict[str, int] | None = None
    cost: float | None = None
    updated: float | None = None
    """When the run reached its status (it ended or suspended; an ``interrupted`` run: when it last showed life,
    its heartbeat): the status's timestamp. ``None`` (a task working now): the time of the read."""

    @property
    def terminal(self) -> bool:
        return self.status in TERMINAL


def _parts(text: str, data: Any = None) -> list[Part]:
    from a2a.types import Part
    from google.protobuf import json_format, struct_pb2  # type: ignore[import-untyped]

    parts = [Part(text=text)]
    if data is not None:
        value = json_format.ParseDict(data, struct_pb2.Value())
        parts.append(Part(data=value, media_type="application/json"))
    return parts


def input_required_text(items: Sequence[dict[str, Any]]) -> str:
    """What an ``input-required`` status says: each question, and how to answer it."""
    if not items:
        return "The team waits for a person (its question is being recorded): read the task again in a moment."
    lines = ["The team waits for a person:"]
    for item in items:
        said = f"- {item['id']} ({item.get('agent') or 'an agent'} asks"
        choices = item.get("choices")
        if item.get("kind") == "approval":
            said = f"- {item['id']} ({item.get('agent') or 'an agent'} asks to run tool {item.get('tool')!r}"
            choices = ["approve", "deny"]
        if choices:
            said += "; one of: " + " | ".join(str(c) for c in choices)
        if item.get("answer_schema"):
            said += "; a JSON answer matching " + json.dumps(item["answer_schema"], ensure_ascii=False)
        lines.append(said + "): " + str(item.get("question") or ""))
    first = items[0]["id"]
    lines.append(
        f"Reply on this task: the message's text answers {first}"
        + (' (to answer another item, set metadata {"item": "<id>"})' if len(items) > 1 else "")
        + "."
    )
    return "\n".join(lines)


def _status_message(view: RunView) -> tuple[int, str | None, Any]:
    from a2a.types import TaskState

    status = view.status
    if status == "running":
        return TaskState.TASK_STATE_WORKING, None, None
    if status == "waiting":
        return TaskState.TASK_STATE_INPUT_REQUIRED, input_required_text(view.pending), list(view.pending)
    if status == "done":
        return TaskState.TASK_STATE_COMPLETED, None, None
    if status == "budget_exhausted":
        return (
            TaskState.TASK_STATE_COMPLETED,
            "A limit of the run ran out: the answer is what the team had by then (teamrun status budget_exhausted).",
            None,
        )
    if status == "cancelled":
        return TaskState.TASK_STATE_CANCELED, f"cancelled ({view.cancel_reason or 'interrupted'})", None
    if status == "refused":
        return TaskState.TASK_STATE_REJECTED, view.error or "the request was refused", None
    if status == "interrupted":
        return (
            TaskState.TASK_STATE_FAILED,
            "interrupted: the process running it stopped before it ended (`teamrun resume RUN` continues it)",
            None,
        )
    return TaskState.TASK_STATE_FAILED, f"the run failed: {view.error or 'unknown error'}", None


def _agent_message(view: RunView, text: str, data: Any = None) -> Message:
    from a2a.types import Message, Role

    return Message(
        message_id=f"{view.run_id}-{view.status}",
        role=Role.ROLE_AGENT,
        task_id=view.run_id,
        context_id=view.context_id,
        parts=_parts(text, data),
    )


def status_of(view: RunView) -> TaskStatus:
    """The task's status: its state, and a message saying why when there is something to say."""
    from a2a.types import TaskStatus

    state, text, data = _status_message(view)
    status = TaskStatus(state=state)  # type: ignore[arg-type]
    if view.updated is not None and view.status != "running":
        status.timestamp.FromNanoseconds(round(view.updated * 1e9))
    else:
        status.timestamp.GetCurrentTime()
    if text is not None:
        status.message.CopyFrom(_agent_message(view, text, data))
    return status


def artifact_of(view: RunView) -> Artifact | None:
    """The run's final answer as the task's artifact (``None`` before it has one)."""
    from a2a.types import Artifact

    if view.status not in ("done", "budget_exhausted") or not view.final_text:
        return None
    return Artifact(
        artifact_id=ANSWER_ARTIFACT,
        name=ANSWER_ARTIFACT,
        description=f"The final answer of team {view.team}",
        parts=_parts(view.final_text),
    )


def task_of(view: RunView, history_length: int | None = None) -> Task:
    """The A2A task of a run: id = run id, its status, its answer artifact, the input as history."""
    from a2a.types import Message, Role, Task
    from google.protobuf import json_format, struct_pb2

    task = Task(id=view.run_id, context_id=view.context_id, status=status_of(view))
    artifact = artifact_of(view)
    if artifact is not None:
        task.artifacts.append(artifact)
    history = [
        Message(
            message_id=f"{view.run_id}-input",
            role=Role.ROLE_USER,
            task_id=view.run_id,
            context_id=view.context_id,
            parts=_parts(view.input),
        )
    ]
    if task.status.HasField("message"):
        history.append(task.status.message)
    if history_length is not None:
        history = history[-history_length:] if history_length > 0 else []
    task.history.extend(history)
    meta: dict[str, Any] = {"run_id": view.run_id, "team": view.team, "status": view.status}
    if view.usage is not None:
        meta["usage"] = view.usage
    if view.cost is not None:
        meta["cost"] = view.cost
    task.metadata.CopyFrom(json_format.ParseDict({"teamrun": meta}, struct_pb2.Struct()))
    return task
