"""A remote task as one delegation sees it, built from the updates its agent sends: ids, state, question, answer.

No I/O: :class:`TaskView` takes one a2a-sdk ``StreamResponse`` at a time (a whole task, a status update, an
artifact chunk, a direct message reply) and keeps what it says. Text parts are kept as they are, data parts as
JSON on a line of their own, file parts as their name or URL; at most :data:`MAX_ANSWER_CHARS` of answer are kept.
An update for another task than the delegation's is refused (:class:`UpdateRefused`): never another task's state
or answer.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from teamrun.engine.remote.cards import plain_text

if TYPE_CHECKING:
    from a2a.types.a2a_pb2 import Message, StreamResponse

__all__ = ["INTERRUPTED", "MAX_ANSWER_CHARS", "TERMINAL", "Taken", "TaskView", "UpdateRefused", "shown", "state_name"]

MAX_ANSWER_CHARS = 100_000
"""Most characters of a remote answer (artifacts, or a message reply) kept: the rest is dropped as it arrives,
with a note in the answer and a run warning (a local worker's answer is bounded by its model; a remote one
would otherwise go whole into the supervisor's next model call)."""
TERMINAL = frozenset({"completed", "failed", "canceled", "rejected"})
"""States a task never leaves."""
INTERRUPTED = frozenset({"input-required", "auth-required"})
"""States in which a task waits for the one who sent it."""


class UpdateRefused(Exception):
    """An update the delegation does not take: another task's, or one it does not understand (said in words)."""


def state_name(value: int) -> str:
    """A ``TaskState`` as the A2A spec spells it (``TASK_STATE_INPUT_REQUIRED`` → ``input-required``)."""
    from a2a.types.a2a_pb2 import TaskState

    return str(TaskState.Name(value)).removeprefix("TASK_STATE_").lower().replace("_", "-")


def shown(text: str) -> str:
    """A remote id in a message: at most 80 characters, no control characters."""
    text = "".join(c if c.isprintable() else "?" for c in text)
    return text if len(text) <= 80 else text[:79] + "…"


@dataclass(frozen=True)
class Taken:
    """What one update was: its kind (``task``, ``status_update``, ``artifact_update``, ``message``), its text."""

    kind: str
    text: str
    cut: bool = False
    """This update took the answer past :data:`MAX_ANSWER_CHARS` (said once per task)."""


@dataclass
class TaskView:
    """The remote task as the updates so far describe it."""

    task_id: str = ""
    context_id: str = ""
    state: str = ""
    status_text: str = ""
    """The latest status message's text (a question when the task asks one)."""
    artifacts: dict[str, list[str]] = field(default_factory=dict)
    usage: dict[str, Any] | None = None
    """``metadata.usage`` as last reported (see :mod:`teamrun.engine.remote.usage`)."""
    kept: int = 0
    """Characters of answer kept so far (at most :data:`MAX_ANSWER_CHARS`)."""
    cut: bool = False

    @property
    def ended(self) -> bool:
        """The task is over or waits for us: the updates of this exchange are done."""
        return self.state in TERMINAL or self.state in INTERRUPTED

    def take(self, update: StreamResponse) -> Taken:
        """Keep what ``update`` says; :class:`UpdateRefused` for another task's or one not understood."""
        kind = update.WhichOneof("payload") or ""
        was_cut = self.cut
        if kind == "task":
            text = self._task(update)
        elif kind == "status_update":
            text = self._status(update)
        elif kind == "artifact_update":
            text = self._artifact(update)
        elif kind == "message":
            text = self._message(update.message)
        else:
            raise UpdateRefused(f"sent an update teamrun does not understand ({kind})")
        return Taken(kind, text, self.cut and not was_cut)

    def repeats(self, update: StreamResponse, state: str, question: str) -> bool:
        """``update`` is the whole task still in ``state`` with ``question``: the state just answered, as an agent
        that starts its reply with the task it has stored sends it (the JavaScript SDK's ``requestContext.task``)."""
        if update.WhichOneof("payload") != "task":
            return False
        task = update.task
        if task.id and self.task_id and task.id != self.task_id:
            return False
        asked = _message_text(task.status.message) if task.status.HasField("message") else ""
        return state_name(task.status.state) == state and asked == question

    def answer(self) -> str:
        """The task's answer: its artifacts (or a message reply), else its last status message."""
        texts = ["".join(parts).strip() for parts in self.artifacts.values()]
        answer = "\n\n".join(t for t in texts if t) or self.status_text
        if self.cut:
            answer += f"\n\n[the remote answer was cut at {MAX_ANSWER_CHARS} characters]"
        return answer

    # -- each kind of update ---------------------------------------------------------------------
    def _task(self, update: StreamResponse) -> str:
        task = update.task
        self._ids(task.id, task.context_id)
        self.state = state_name(task.status.state)
        self.kept = 0
        self.artifacts = {a.artifact_id or str(i): self._fit(_parts(a.parts)) for i, a in enumerate(task.artifacts)}
        self.status_text = _message_text(task.status.message) if task.status.HasField("message") else ""
        self._usage_from(task.metadata if task.HasField("metadata") else None)
        return self.status_text

    def _status(self, update: StreamResponse) -> str:
        status = update.status_update
        self._ids(status.task_id, status.context_id)
        self.state = state_name(status.status.state)
        text = ""
        if status.status.HasField("message"):
            text = self.status_text = _message_text(status.status.message)
        self._usage_from(status.metadata if status.HasField("metadata") else None)
        return text

    def _artifact(self, update: StreamResponse) -> str:
        chunk = update.artifact_update
        self._ids(chunk.task_id, chunk.context_id)
        key = chunk.artifact.artifact_id or str(len(self.artifacts))
        parts = self._fit(_parts(chunk.artifact.parts))
        self.artifacts[key] = [*self.artifacts.get(key, []), *parts] if chunk.append else parts
        return "".join(parts)

    def _message(self, message: Message) -> str:
        """A direct reply: the agent answered without a task."""
        self._ids(message.task_id, message.context_id)
        self.state = "completed"
        self.kept = 0
        self.artifacts = {"message": self._fit(_parts(message.parts))}
        self._usage_from(message.metadata if message.HasField("metadata") else None)
        return "".join(self.artifacts["message"])

    def _ids(self, task_id: str, context_id: str) -> None:
        if task_id and self.task_id and task_id != self.task_id:
            raise UpdateRefused(
                f"sent an update for task {shown(task_id)} while its task is {shown(self.task_id)} (a broken or "
                "hostile agent): the delegation does not take it as an answer"
            )
        self.task_id = task_id or self.task_id
        self.context_id = context_id or self.context_id

    def _usage_from(self, metadata: Any) -> None:
        if metadata is None:
            return
        from google.protobuf.json_format import MessageToDict  # type: ignore[import-untyped]

        usage = MessageToDict(metadata).get("usage")
        if isinstance(usage, dict):
            self.usage = usage

    def _fit(self, parts: Iterable[str]) -> list[str]:
        """``parts`` as far as they fit in :data:`MAX_ANSWER_CHARS` with what was kept before."""
        kept: list[str] = []
        for part in parts:
            room = MAX_ANSWER_CHARS - self.kept
            if len(part) > room:
                self.cut = True
                if room > 0:
                    kept.append(part[:room])
                    self.kept += room
                break
            kept.append(part)
            self.kept += len(part)
        return kept


def _parts(parts: Any) -> list[str]:
    """Each part as text: a text part as it is, a data part as JSON on a line of its own (a file part: its
    name or URL, said as such)."""
    from google.protobuf.json_format import MessageToDict

    out: list[str] = []
    for part in parts:
        if part.HasField("text"):
            out.append(plain_text(part.text))
        elif part.HasField("data"):
            data = _whole(MessageToDict(part.data))  # a protobuf Struct: its keys have no order of their own
            out.append("\n" + plain_text(json.dumps(data, ensure_ascii=False, sort_keys=True)) + "\n")
        elif part.HasField("url"):
            out.append(plain_text(f"\n[file: {part.filename or part.url}] <{part.url}>\n"))
        elif part.HasField("raw"):
            raw = f"\n[file: {part.filename or 'unnamed'}, {len(part.raw)} bytes, {part.media_type}]\n"
            out.append(plain_text(raw))
    return out


def _whole(value: Any) -> Any:
    """JSON numbers protobuf turned into floats (``7`` → ``7.0``) back to whole numbers."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {k: _whole(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_whole(v) for v in value]
    return value


def _message_text(message: Any) -> str:
    return "".join(_parts(message.parts)).strip()
