"""A remote A2A agent in process, for the remote worker's in-process tests: a2a-sdk's protocol messages, no server.

:class:`FakeAgent` is what a2a-sdk's client hands teamrun (:class:`~teamrun.engine.remote.client.RemoteClient`),
answering each message sent with the next list of updates of its script, and ``GetTask`` with the next task;
past its script it fails the test. :class:`FakeSide` stands for the delegation around an
:class:`~teamrun.engine.remote.exchange.Exchange` (events, journal, a person's answers). The builders make the
updates (:func:`task`, :func:`status`, :func:`artifact`, :func:`reply`).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable, Mapping
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from typing import Any

from a2a.types.a2a_pb2 import (
    Artifact,
    CancelTaskRequest,
    GetTaskRequest,
    Message,
    Part,
    Role,
    SendMessageRequest,
    StreamResponse,
    SubscribeToTaskRequest,
    Task,
    TaskArtifactUpdateEvent,
    TaskState,
    TaskStatus,
    TaskStatusUpdateEvent,
)
from google.protobuf.struct_pb2 import Struct

from teamrun.config.models import RemoteAgent
from teamrun.engine.remote.client import RemoteClient
from teamrun.engine.remote.updates import Taken, TaskView
from teamrun.errors import RemoteAgentError

__all__ = ["FakeAgent", "FakeSide", "artifact", "reply", "snapshot", "status", "task"]


def _state(name: str) -> TaskState.ValueType:
    return TaskState.Value("TASK_STATE_" + name.upper().replace("-", "_"))


def _metadata(usage: Mapping[str, Any] | None) -> dict[str, Any]:
    if usage is None:
        return {}
    data = Struct()
    data.update({"usage": dict(usage)})
    return {"metadata": data}


def _said(text: str | None) -> dict[str, Any]:
    return {} if text is None else {"message": Message(role=Role.ROLE_AGENT, parts=[Part(text=text)])}


def task(
    task_id: str,
    state: str,
    *,
    said: str | None = None,
    artifacts: Iterable[str] = (),
    usage: Mapping[str, Any] | None = None,
) -> Task:
    """A whole task: its state, what its status message says (a question...), its artifacts' texts."""
    return Task(
        id=task_id,
        context_id="ctx-1",
        status=TaskStatus(state=_state(state), **_said(said)),
        artifacts=[Artifact(artifact_id=f"a{i}", parts=[Part(text=t)]) for i, t in enumerate(artifacts)],
        **_metadata(usage),
    )


def snapshot(task_id: str, state: str, **kwargs: Any) -> StreamResponse:
    """The whole task as an update."""
    return StreamResponse(task=task(task_id, state, **kwargs))


def status(
    task_id: str, state: str, said: str | None = None, *, usage: Mapping[str, Any] | None = None
) -> StreamResponse:
    """A status update."""
    status = TaskStatus(state=_state(state), **_said(said))
    event = TaskStatusUpdateEvent(task_id=task_id, context_id="ctx-1", status=status, **_metadata(usage))
    return StreamResponse(status_update=event)


def artifact(task_id: str, text: str, *, artifact_id: str = "answer", append: bool = False) -> StreamResponse:
    """An artifact chunk."""
    chunk = Artifact(artifact_id=artifact_id, parts=[Part(text=text)])
    event = TaskArtifactUpdateEvent(task_id=task_id, context_id="ctx-1", artifact=chunk, append=append)
    return StreamResponse(artifact_update=event)


def reply(text: str, *, usage: Mapping[str, Any] | None = None) -> StreamResponse:
    """A direct message reply (no task)."""
    return StreamResponse(message=Message(role=Role.ROLE_AGENT, parts=[Part(text=text)], **_metadata(usage)))


@dataclass
class FakeAgent:
    """An agent answering each message sent with the next list of ``replies``, each ``GetTask`` with the next of
    ``tasks`` (an exception is raised), ``SubscribeToTask`` with ``subscribed``."""

    replies: list[list[StreamResponse]] = field(default_factory=list)
    tasks: list[Task | Exception] = field(default_factory=list)
    subscribed: list[StreamResponse] = field(default_factory=list)
    streaming: bool = True
    sent: list[Message] = field(default_factory=list)
    asked_for: list[str] = field(default_factory=list)
    """The task ids of each ``GetTask``."""
    cancels: list[str] = field(default_factory=list)

    @property
    def texts(self) -> list[str]:
        """The text of each message sent."""
        return ["".join(part.text for part in message.parts) for message in self.sent]

    async def send_message(self, request: SendMessageRequest) -> AsyncIterator[StreamResponse]:
        self.sent.append(request.message)
        assert self.replies, f"a message past the script: {self.texts[-1]!r}"
        for update in self.replies.pop(0):
            yield update

    async def get_task(self, request: GetTaskRequest) -> Task:
        self.asked_for.append(request.id)
        assert self.tasks, f"a GetTask past the script ({request.id})"
        answer = self.tasks.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    async def subscribe(self, request: SubscribeToTaskRequest) -> AsyncIterator[StreamResponse]:
        for update in self.subscribed:
            yield update

    async def cancel_task(self, request: CancelTaskRequest) -> Task:
        self.cancels.append(request.id)
        return task(request.id, "canceled")

    async def connect(
        self, stack: AsyncExitStack, spec: RemoteAgent, token: str | None, cards: Any, fail: Any
    ) -> tuple[RemoteClient, bool]:
        """An :class:`~teamrun.engine.remote.client.OpenClient` that hands out this agent."""
        return self, self.streaming


@dataclass
class FakeSide:
    """The delegation around an exchange: records what it is told, answers its questions from ``answers``."""

    answers: list[str] = field(default_factory=list)
    who: str = "remote agent 'researcher' (http://agent.test)"
    updates: list[tuple[str, str, str]] = field(default_factory=list)
    """Each update taken: (kind, the task's state after it, its text)."""
    journaled: list[tuple[str, int]] = field(default_factory=list)
    """Each ``remote_start``: (task id, messages)."""
    asked: list[tuple[str, int]] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    cancelled_tasks: list[tuple[str, str]] = field(default_factory=list)
    order: list[str] = field(default_factory=list)
    moved: bool = False
    """The journal refuses the cancel's entry: the run goes on in another process (a replica took it over)."""

    def fail(self, what: str) -> RemoteAgentError:
        return RemoteAgentError(f"{self.who} {what}")

    def warn(self, text: str) -> None:
        self.warnings.append(text)

    async def took(self, taken: Taken, view: TaskView, reattached: bool) -> None:
        self.updates.append((taken.kind, view.state, taken.text))

    async def started(self, view: TaskView, messages: int) -> None:
        self.journaled.append((view.task_id, messages))

    async def ask(self, question: str, round: int) -> str:
        self.asked.append((question, round))
        assert self.answers, f"asked past the script: {question!r} (round {round})"
        return self.answers.pop(0)

    async def cancelling(self, task_id: str, sent: int) -> bool:
        self.order.append(f"journal cancel of {task_id}")
        return not self.moved

    def cancelled(self, task_id: str, outcome: str) -> None:
        self.order.append(f"cancelled {task_id}: {outcome}")
