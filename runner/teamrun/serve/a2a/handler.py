"""A served team as an A2A agent: a2a-sdk's ``RequestHandler`` over the server's runs.

The SDK's own ``DefaultRequestHandler`` keeps tasks in its ``TaskStore`` and runs
an ``AgentExecutor`` per task in this process; our runs are durable (journaled in
the store), outlive the process, and may wait for people between processes. So
this handler implements the SDK's ``RequestHandler`` interface over
:class:`~teamrun.serve.runs.RunRegistry` and the store instead: a task *is* a
run (task id = run id), started, read and cancelled exactly as the runs API
does it. The SDK still does the protocol: JSON-RPC parsing, v1.0 and v0.3
method names, errors, SSE framing (:mod:`teamrun.serve.a2a.routes`).
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import uuid
from collections import Counter, OrderedDict
from collections.abc import AsyncGenerator, Mapping
from typing import TYPE_CHECKING, Any

from a2a.server.request_handlers.request_handler import RequestHandler
from a2a.types import (
    ContentTypeNotSupportedError,
    ExtendedAgentCardNotConfiguredError,
    InternalError,
    InvalidParamsError,
    ListTasksResponse,
    Message,
    PushNotificationNotSupportedError,
    Role,
    TaskArtifactUpdateEvent,
    TaskNotCancelableError,
    TaskNotFoundError,
    TaskState,
    TaskStatusUpdateEvent,
    UnsupportedOperationError,
)
from a2a.utils.errors import A2AError
from google.protobuf import json_format  # type: ignore[import-untyped]

from teamrun.logs import get_logger
from teamrun.serve.a2a.tasks import RunView, artifact_of, status_of, task_of
from teamrun.serve.answers import AnswerNotTaken, AnswerService, PendingAnswer, item_view, settled_reason
from teamrun.serve.runs import RunHandle, RunRegistry, ServerBusy, ShuttingDown, stored_record
from teamrun.serve.served import Served

if TYPE_CHECKING:
    from a2a.server.context import ServerCallContext
    from a2a.server.events.event_queue import Event
    from a2a.types import (
        AgentCard,
        CancelTaskRequest,
        DeleteTaskPushNotificationConfigRequest,
        GetExtendedAgentCardRequest,
        GetTaskPushNotificationConfigRequest,
        GetTaskRequest,
        ListTaskPushNotificationConfigsRequest,
        ListTaskPushNotificationConfigsResponse,
        ListTasksRequest,
        SendMessageRequest,
        SubscribeToTaskRequest,
        Task,
        TaskPushNotificationConfig,
    )

    from teamrun.store.records import JournaledRun

__all__ = ["TeamAgent"]

_log = get_logger(__name__)

FOLLOW_WAKE_S = 10.0
"""Seconds a stream waits for a run's next event before it looks again (SSE pings keep the connection open)."""
STORE_POLL_S = 1.0
"""Seconds between reads of the store while following a task another replica runs (``--lease``)."""
CANCEL_WAIT_S = 30.0
"""Seconds ``CancelTask`` waits for the cancelled run to settle before it answers with the task as it is."""
_CANCELLED_WAITING = "cancelled by request (A2A CancelTask) while waiting for a person"
LIST_FROM_STORE = 500
"""``ListTasks`` with a store: how many of the team's newest runs it reads from the store."""
MAX_CONTEXT_CHARS = 200
"""Longest ``contextId`` a client may choose (it names the run's thread when the server has a store)."""
_PROGRESS_KINDS = {"delegation_start", "person_asked", "run_continued"}
_APPROVE = {"approve", "approved", "yes", "y", "true", "ok"}
_DENY = {"deny", "denied", "no", "n", "false", "reject"}


class TeamAgent(RequestHandler):
    """One served team's A2A agent: every message starts or answers a run of ``entry.team``."""

    def __init__(
        self,
        entry: Served,
        registry: RunRegistry,
        answers: AnswerService | None,
    ) -> None:
        self.entry = entry
        self.registry = registry
        self.answers = answers
        self._contexts: OrderedDict[str, str] = OrderedDict()
        """Without a store: the ``contextId`` of each run started here (with one, it is the run's thread)."""

    @property
    def team(self) -> str:
        return self.entry.team.name

    # -- messages ---------------------------------------------------------------------------------

    async def on_message_send(self, params: SendMessageRequest, context: ServerCallContext) -> Task | Message:
        length = _history_length(params.configuration)
        run_id, _ = await self._send(params)
        handle = self.registry.get(run_id)
        if handle is not None and not params.configuration.return_immediately:
            if self.answers is not None:  # follows the continuation an answer given meanwhile starts
                await self.answers.until_settled(run_id)
            else:
                await _settled(handle)
        return await self._task(run_id, length)

    async def on_message_send_stream(
        self, params: SendMessageRequest, context: ServerCallContext
    ) -> AsyncGenerator[Event]:
        run_id, start_at = await self._send(params)
        handle = self.registry.get(run_id)
        if handle is not None and not handle.finished:  # as it is now: before any await lets it run on
            yield task_of(self._handle_view(handle, ()))
        else:
            yield await self._task(run_id)
        async for event in self._follow(run_id, start_at):
            yield event

    async def _send(self, params: SendMessageRequest) -> tuple[str, int]:
        """Start a run for a new task, or answer the question a waiting task asks; its id, and the first of its
        events a stream should report."""
        if not params.HasField("message"):
            raise InvalidParamsError("params.message is required: the message to the team")
        message = params.message
        if message.task_id:
            run_id = await self._answer(message)
            handle = self.registry.get(run_id)
            return run_id, handle.event_count if handle is not None else 0
        text = _input_text(message)
        context_id = message.context_id or f"ctx-{uuid.uuid4().hex[:16]}"
        if len(context_id) > MAX_CONTEXT_CHARS:
            raise InvalidParamsError(f"contextId is {len(context_id)} characters; at most {MAX_CONTEXT_CHARS}")
        thread = context_id if self.registry.store is not None else None
        resource = _resource(message)
        try:
            handle = self.registry.start(
                self.entry.team, text, redactor=self.entry.redactor, thread=thread, resource=resource
            )
        except (ServerBusy, ShuttingDown) as exc:
            raise self._refused(exc) from None
        if thread is None:
            self._contexts[handle.id] = context_id
            while len(self._contexts) > self.registry.keep_finished + self.registry.max_concurrent:
                self._contexts.popitem(last=False)
        return handle.id, 0

    async def _answer(self, message: Message) -> str:
        """Answer the pending item a waiting task asks with ``message``, through the answer service
        (:mod:`teamrun.serve.answers`); the run continues (here, if it can)."""
        run_id = message.task_id
        view = await self._view(run_id)
        if view is None:
            raise TaskNotFoundError(f"no task '{run_id}' of agent '{self.team}'")
        if message.context_id and self.entry.redactor.text(message.context_id) != view.context_id:  # view: masked
            raise InvalidParamsError(
                f"task {run_id} belongs to context '{view.context_id}', not '{message.context_id}'"
            )
        if view.status != "waiting":
            if view.terminal:
                raise UnsupportedOperationError(
                    f"task {run_id} is over ({view.status}): it takes no more messages; send a message without "
                    "taskId to start a new task (with the same contextId to continue the conversation)"
                )
            raise UnsupportedOperationError(
                f"task {run_id} is working: it takes a message only when it asks for one (state input-required)"
            )
        answers = self.answers
        assert answers is not None  # a run waits only in a server with a store
        wanted = _metadata(message).get("item")
        items = list(view.pending)
        if not items:
            raise UnsupportedOperationError(f"task {run_id} has no question waiting yet; read it again in a moment")
        listing = ", ".join(str(i["id"]) for i in items)
        if wanted is not None and not isinstance(wanted, str):  # protobuf made a number of it: 5 arrives as 5.0
            shown = int(wanted) if isinstance(wanted, float) and wanted.is_integer() else wanted
            raise InvalidParamsError(
                f"metadata.item names an item by its id, a string (one of: {listing}), not {json.dumps(shown)[:100]}"
            )
        chosen = next((i for i in items if i["id"] == wanted), None) if wanted is not None else items[0]
        if chosen is None:
            asked = await asyncio.to_thread(answers.items.get, run_id, str(wanted))
            if asked is not None and asked.status != "pending":  # answered before (or expired): as a race loser
                raise UnsupportedOperationError(
                    f"{settled_reason(run_id, asked, what='task')}; the task waits for: {listing}"
                )
            raise InvalidParamsError(f"task {run_id} waits for no item '{wanted}'; it waits for: {listing}")
        item = await asyncio.to_thread(answers.items.get, run_id, chosen["id"])
        if item is None or item.status != "pending":
            said = f"item {chosen['id']} of task {run_id} was answered meanwhile"
            raise UnsupportedOperationError(settled_reason(run_id, item, what="task") if item is not None else said)
        try:
            await answers.answer(item, _answer_body(item.kind, message), by="a2a")
        except AnswerNotTaken as exc:
            raise self._not_taken(exc, run_id) from None
        return run_id

    def _not_taken(self, exc: AnswerNotTaken, run_id: str) -> A2AError:
        """An answer the service did not take, as the A2A error it is answered with."""
        if exc.slot is not None:
            return self._refused(exc.slot, f"the answer would continue task {run_id} here; nothing was recorded")
        if exc.because in ("settled", "cancelled") and exc.item is not None:
            return UnsupportedOperationError(settled_reason(run_id, exc.item, what="task"))
        if exc.because == "invalid_text":
            return InvalidParamsError(str(exc))
        item_id = exc.item.item_id if exc.item is not None else "?"
        return InvalidParamsError(f"{item_id}: {exc}")

    def _refused(self, exc: ServerBusy | ShuttingDown, said: str = "") -> InternalError:
        """A run refused for want of a slot (``too_many_runs``) or while the server stops (``shutting_down``)."""
        said = f"; {said}" if said else ""
        if isinstance(exc, ShuttingDown):
            return InternalError(f"{exc}{said}", data={"reason": "shutting_down"})
        wait = self.registry.retry_after_s
        return InternalError(
            f"{exc}{said}; retry after {wait} s", data={"reason": "too_many_runs", "retry_after_s": wait}
        )

    # -- tasks ------------------------------------------------------------------------------------

    async def on_get_task(self, params: GetTaskRequest, context: ServerCallContext) -> Task | None:
        length = params.history_length if params.HasField("history_length") else None
        if length is not None and length < 0:
            raise InvalidParamsError("historyLength must be 0 or more")
        if not params.id:
            raise InvalidParamsError("params.id is required: the task's id")
        return await self._task(params.id, length)

    async def on_cancel_task(self, params: CancelTaskRequest, context: ServerCallContext) -> Task | None:
        if not params.id:
            raise InvalidParamsError("params.id is required: the task's id")
        answer = await self.registry.request_cancel(
            params.id,
            teams=(self.team,),
            reason="cancelled by request (A2A CancelTask)",
            waiting_reason=_CANCELLED_WAITING,
        )
        if answer.outcome == "not_found":
            raise TaskNotFoundError(f"no task '{params.id}' of agent '{self.team}'")
        if answer.outcome == "over":
            view = await self._view(params.id)  # as GetTask says it (a refused task is "refused")
            raise TaskNotCancelableError(f"task {params.id} is already over ({view.status if view else answer.status})")
        if answer.outcome == "elsewhere":
            raise TaskNotCancelableError(
                f"task {params.id} runs in another process on the same store (another server, or a teamrun command "
                "continuing it); cancel it there"
            )
        if answer.outcome == "waiting":
            raise TaskNotCancelableError(f"task {params.id} waits for a person: answer it to continue it")
        if answer.outcome == "cancelling" and answer.handle is not None and answer.stored is None:  # it runs here
            await answer.handle.ended(CANCEL_WAIT_S)
        elif answer.outcome == "cancelling":  # forwarded to the replica that runs it: its end shows in the store
            from teamrun.serve.replicas import until_not_running

            await until_not_running(self.registry, params.id, within_s=CANCEL_WAIT_S, poll_s=STORE_POLL_S / 4)
        return await self._task(params.id)

    async def on_subscribe_to_task(
        self, params: SubscribeToTaskRequest, context: ServerCallContext
    ) -> AsyncGenerator[Event]:
        if not params.id:
            raise InvalidParamsError("params.id is required: the task's id")
        view = await self._view(params.id)
        if view is None:
            raise TaskNotFoundError(f"no task '{params.id}' of agent '{self.team}'")
        if view.terminal:
            raise UnsupportedOperationError(f"task {params.id} is over ({view.status}): read it with GetTask")
        handle = self.registry.get(params.id)
        start_at = handle.event_count if handle is not None else 0
        if view.status == "running" and (handle is None or handle.finished):  # its events are that server's
            if not self.registry.replicated:
                raise UnsupportedOperationError(
                    f"task {params.id} runs in another server; subscribe there, or read it here with GetTask"
                )
            yield task_of(view)  # it runs on another replica: followed through the store to its end
            while view is not None and view.status == "running":
                await asyncio.sleep(STORE_POLL_S)  # a poll of the store: the run's replica writes its record there
                view = await self._view(params.id)
            async for event in self._follow(params.id, start_at):
                yield event
            return
        yield task_of(view)
        async for event in self._follow(params.id, start_at):
            yield event

    async def on_list_tasks(self, params: ListTasksRequest, context: ServerCallContext) -> ListTasksResponse:
        """The tasks of this agent (newest first), by ``contextId`` and state: those this server holds in memory
        and, with a store, the newest :data:`LIST_FROM_STORE` of the store (every worker's and process's runs
        of this team, e.g. under ``--workers``), as the store has them where this server holds no fresher view."""
        size = params.page_size or 50
        if size < 0 or size > 100:
            raise InvalidParamsError("pageSize must be 1 to 100")
        if params.page_token:
            raise InvalidParamsError("pageToken: this agent answers one page (the newest tasks it holds)")
        views = {h.id: self._handle_view(h, ()) for h in reversed(self.registry.held()) if h.team == self.team}
        if self.registry.store is not None:
            from teamrun.store.journal import StoreJournal

            journal = StoreJournal(self.registry.store)
            stored = await asyncio.to_thread(journal.list_runs, limit=LIST_FROM_STORE, team=self.team)
            for run in stored:
                views.setdefault(run.run_id, self._stored_view(run, ()))
        found: list[Task] = []
        for view in sorted(views.values(), key=lambda v: v.created, reverse=True):
            task = task_of(view, params.history_length or None)
            if params.context_id and task.context_id != self.entry.redactor.text(params.context_id):
                continue
            if params.status and task.status.state != params.status:
                continue
            found.append(task)
        shown = found[:size]
        if not params.include_artifacts:
            for task in shown:
                del task.artifacts[:]
        return ListTasksResponse(tasks=shown, page_size=size, total_size=len(found))

    # -- not offered --------------------------------------------------------------------------------

    async def on_create_task_push_notification_config(
        self, params: TaskPushNotificationConfig, context: ServerCallContext
    ) -> TaskPushNotificationConfig:
        raise PushNotificationNotSupportedError("push notifications are not offered: stream, or poll GetTask")

    async def on_get_task_push_notification_config(
        self, params: GetTaskPushNotificationConfigRequest, context: ServerCallContext
    ) -> TaskPushNotificationConfig:
        raise PushNotificationNotSupportedError("push notifications are not offered: stream, or poll GetTask")

    async def on_list_task_push_notification_configs(
        self, params: ListTaskPushNotificationConfigsRequest, context: ServerCallContext
    ) -> ListTaskPushNotificationConfigsResponse:
        raise PushNotificationNotSupportedError("push notifications are not offered: stream, or poll GetTask")

    async def on_delete_task_push_notification_config(
        self, params: DeleteTaskPushNotificationConfigRequest, context: ServerCallContext
    ) -> None:
        raise PushNotificationNotSupportedError("push notifications are not offered: stream, or poll GetTask")

    async def on_get_extended_agent_card(
        self, params: GetExtendedAgentCardRequest, context: ServerCallContext
    ) -> AgentCard:
        raise ExtendedAgentCardNotConfiguredError("this agent has one card, the public one")

    # -- runs as tasks ----------------------------------------------------------------------------

    async def _task(self, run_id: str, history_length: int | None = None) -> Task:
        view = await self._view(run_id)
        if view is None:
            raise TaskNotFoundError(f"no task '{run_id}' of agent '{self.team}'")
        return task_of(view, history_length)

    async def _view(self, run_id: str) -> RunView | None:
        """The run ``run_id`` of this team, as ``GET /v1/runs/{id}`` finds it: held here, else in the store."""
        found = await self.registry.find(run_id)
        handle, stored = found.handle, found.stored
        if handle is not None and handle.team != self.team:
            return None
        if found.held and handle is not None:
            waits = handle.state == "waiting" and self.registry.store is not None
            return self._handle_view(handle, await self._pending(run_id) if waits else ())
        if stored is None or stored.team != self.team:
            return None
        pending = await self._pending(run_id) if stored.shown_status() == "waiting" else ()
        view = self._stored_view(stored, pending)
        if view.status == "interrupted" and self.registry.replicated and self.registry.store is not None:
            from teamrun.serve.replicas import as_replicas_show  # handed over, not yet taken: it runs on

            shown = await as_replicas_show(self.registry.store, {"id": run_id, "status": view.status})
            view = dataclasses.replace(view, status=str(shown["status"]))
        if view.status == "cancelled" and self.registry.replicated and stored.cancel_reason:
            # the words of the replica that cancelled it (kept in its record)
            view = dataclasses.replace(view, cancel_reason=self.entry.redactor.text(stored.cancel_reason))
        return view

    async def _pending(self, run_id: str) -> list[dict[str, Any]]:
        if self.answers is None:
            return []
        items = await asyncio.to_thread(self.answers.items.items, run_id, status="pending")
        shown: list[dict[str, Any]] = [self.entry.redactor.value(item_view(item)) for item in items]
        return shown

    def _handle_view(self, handle: RunHandle, pending: Any) -> RunView:
        record = handle.record()  # masked
        result = handle.result
        status = "refused" if handle.refused else record["status"]
        context_id = handle.redactor.text(handle.thread or self._contexts.get(handle.id) or handle.id)
        error = record["error"]
        if handle.refused_thread:  # the engine's words are the CLI's (--thread) and name the other team
            error = (
                f"contextId '{context_id}' is a conversation of another agent of this server: send the message "
                "again with another contextId (or none: a new conversation starts)"
            )
        elif handle.refused_resource:  # the engine's words say --thread; the other resource is never named
            error = (
                f"contextId '{context_id}' is a conversation of another resource: send the message again with "
                "another contextId (or none: a new conversation starts)"
            )
        return RunView(
            run_id=handle.id,
            team=handle.team,
            status=status,
            context_id=context_id,
            input=handle.redactor.text(handle.input),
            final_text=record["final_text"],
            error=error,
            cancel_reason=record["cancel_reason"],
            created=handle.created,
            pending=tuple(pending),
            usage=result.usage.as_dict() if result is not None else None,
            cost=result.cost if result is not None else None,
            updated=handle.ended_at,
        )

    def _stored_view(self, stored: JournaledRun, pending: Any) -> RunView:
        redactor = self.entry.redactor
        record = redactor.value(stored_record(stored))
        return RunView(
            run_id=stored.run_id,
            team=stored.team,
            status=record["status"],
            context_id=redactor.text(stored.thread_id or stored.run_id),
            input=redactor.text(stored.input),
            final_text=record["final_text"],
            error=record["error"],
            cancel_reason=record["error"] if record["status"] == "cancelled" else None,
            created=stored.started_at,
            pending=tuple(pending),
            usage=record["usage"],
            cost=record["cost"],
            updated=stored.ended_at or stored.heartbeat_at,  # interrupted: no end, its last heartbeat
        )

    async def _follow(self, run_id: str, start_at: int) -> AsyncGenerator[Event]:
        """The run's progress (a working status per delegation or question) from event ``start_at`` until it
        settles, then its answer artifact and its last status (completed, input-required, failed, canceled)."""
        handle = self.registry.get(run_id)
        if handle is not None:
            told = _Announced()
            for index in range(min(start_at, handle.event_count)):  # what the task told before this stream
                told.new(handle.event(index))
            index = start_at
            while True:
                while index < handle.event_count:
                    line = handle.event(index)
                    index += 1
                    said = _progress(line)
                    if said is not None and told.new(line) and not handle.finished:
                        yield self._working(handle, said)
                if handle.finished:
                    break
                await handle.changed(FOLLOW_WAKE_S)
        view = await self._view(run_id)
        if view is None:
            return
        artifact = artifact_of(view)
        if artifact is not None:
            yield TaskArtifactUpdateEvent(
                task_id=run_id, context_id=view.context_id, artifact=artifact, last_chunk=True
            )
        yield TaskStatusUpdateEvent(task_id=run_id, context_id=view.context_id, status=status_of(view))

    def _working(self, handle: RunHandle, said: str) -> TaskStatusUpdateEvent:
        from a2a.types import Part, TaskStatus

        context_id = handle.redactor.text(handle.thread or self._contexts.get(handle.id) or handle.id)
        status = TaskStatus(state=TaskState.TASK_STATE_WORKING)
        status.timestamp.GetCurrentTime()
        status.message.CopyFrom(
            Message(
                message_id=f"{handle.id}-{uuid.uuid4().hex[:8]}",
                role=Role.ROLE_AGENT,
                task_id=handle.id,
                context_id=context_id,
                parts=[Part(text=said)],
            )
        )
        return TaskStatusUpdateEvent(task_id=handle.id, context_id=context_id, status=status)


class _Announced:
    """Which of a run's delegations a stream has told already, so a continuation's replay is not told as new.

    A run continued after an answer runs again from its start through its journal: the delegations it finished
    start again (``delegation_start``, a new span id) and are replayed. A delegation is known by who delegated
    what to whom (its agent path, worker, task and step) and by how many times that happened in one stretch of
    the run (between two ``run_continued`` events): the n-th such delegation of a stretch is new only when no
    earlier stretch had n of them.
    """

    def __init__(self) -> None:
        self._before: Counter[tuple[Any, ...]] = Counter()
        self._now: Counter[tuple[Any, ...]] = Counter()

    def new(self, line: Mapping[str, Any]) -> bool:
        """Take the run's event ``line``; whether it is news (a delegation not told before, or any other)."""
        kind = line.get("kind")
        if kind == "run_continued":
            self._before |= self._now
            self._now = Counter()
            return True
        if kind != "delegation_start":
            return True
        data = line.get("data") or {}
        key = (tuple(line.get("agent_path") or ()), data.get("worker"), data.get("task"), data.get("step"))
        self._now[key] += 1
        return self._now[key] > self._before[key]


async def _settled(handle: RunHandle) -> None:
    """Until the run is no longer running (over, or waiting for people)."""
    while not handle.finished:
        await handle.changed(FOLLOW_WAKE_S)


def _progress(line: Mapping[str, Any]) -> str | None:
    """A run event (masked) as a line of progress, or ``None`` for one not worth a status update."""
    kind = line.get("kind")
    if kind not in _PROGRESS_KINDS:
        return None
    data = line.get("data") or {}
    agent = "/".join(str(a) for a in line.get("agent_path") or ()) or "the team"
    if kind == "delegation_start":
        task = str(data.get("task") or "")
        return f"{agent} asked {data.get('worker')}: {task[:300]}"
    if kind == "person_asked":
        return f"{agent} asks a person ({data.get('item')}): {str(data.get('question') or '')[:300]}"
    return "the run continues with the answer"


def _history_length(configuration: Any) -> int | None:
    if configuration.HasField("history_length"):
        if configuration.history_length < 0:
            raise InvalidParamsError("configuration.historyLength must be 0 or more")
        return int(configuration.history_length)
    return None


_TEAMRUN_METADATA = frozenset({"resource"})
"""The keys of a message's ``metadata.teamrun``."""


def _resource(message: Message) -> str | None:
    """The run's resource, from the message's metadata ``{"teamrun": {"resource": "<id>"}}`` (docs/memory.md),
    checked as the CLI's ``--resource`` is; ``None`` when the message names none."""
    from teamrun.store.memory import MemoryRefused, check_resource_id

    ours = _metadata(message).get("teamrun")
    if ours is None:
        return None
    if not isinstance(ours, dict):
        raise InvalidParamsError('metadata.teamrun is an object, e.g. {"resource": "customer-42"}')
    unknown = sorted(set(ours) - _TEAMRUN_METADATA)
    if unknown:  # a misspelt key would silently run without the resource (POST /v1/runs refuses extras too)
        raise InvalidParamsError(
            f"metadata.teamrun.{unknown[0]}: not a key teamrun knows; "
            f"the keys are: {', '.join(sorted(_TEAMRUN_METADATA))}"
        )
    given = ours.get("resource")
    if given is None:
        return None
    try:
        return check_resource_id(given)
    except MemoryRefused as exc:
        raise InvalidParamsError(f"metadata.teamrun.resource: {exc}") from None


def _metadata(message: Message) -> dict[str, Any]:
    found: dict[str, Any] = json_format.MessageToDict(message.metadata) if message.HasField("metadata") else {}
    return found


def _data_value(part: Any) -> Any:
    """A data part's JSON value; protobuf holds every number as a double, so whole numbers become ints again."""

    def plain(value: Any) -> Any:
        if isinstance(value, float) and value.is_integer() and abs(value) < 2**53:
            return int(value)
        if isinstance(value, list):
            return [plain(item) for item in value]
        if isinstance(value, dict):
            return {key: plain(item) for key, item in value.items()}
        return value

    return plain(json_format.MessageToDict(part.data))


def _input_text(message: Message) -> str:
    """The run's input: the message's text parts (a data part as JSON), in order; files are refused."""
    if message.role not in (Role.ROLE_USER, Role.ROLE_UNSPECIFIED):
        raise InvalidParamsError("message.role: a message to the agent is ROLE_USER")
    pieces: list[str] = []
    for index, part in enumerate(message.parts):
        which = part.WhichOneof("content")
        if which == "text":
            pieces.append(part.text)
        elif which == "data":
            pieces.append(json.dumps(_data_value(part), ensure_ascii=False))
        else:
            raise ContentTypeNotSupportedError(
                f"message.parts.{index}: a {which or 'empty'} part; this agent takes text and data parts only"
            )
    text = "\n".join(pieces)
    if not text.strip():
        raise InvalidParamsError("message.parts: the message has no text (it is the team's input)")
    return text


def _answer_body(kind: str, message: Message) -> Any:
    """A :class:`~teamrun.serve.answers.PendingAnswer` from a message answering an item of ``kind``."""
    data: Any = None
    texts: list[str] = []
    for index, part in enumerate(message.parts):
        which = part.WhichOneof("content")
        if which == "text":
            texts.append(part.text)
        elif which == "data":
            data = _data_value(part)
        else:
            raise ContentTypeNotSupportedError(
                f"message.parts.{index}: a {which or 'empty'} part; an answer is text or a data part"
            )
    text = "\n".join(texts).strip()
    if kind == "approval":
        if isinstance(data, dict) and isinstance(data.get("approve"), bool):
            note = data.get("note")
            extra = sorted(set(data) - {"approve", "note"})
            if (note is not None and not isinstance(note, str)) or extra:  # as POST /v1/runs/{id}/pending/{item}
                raise InvalidParamsError(
                    'an approval\'s data part is {"approve": true|false, "note": "..."}: '
                    + (f"unknown keys {', '.join(map(repr, extra))}" if extra else "note must be text")
                )
            return PendingAnswer(approve=data["approve"], note=note, by="a2a")
        word = text.lower()
        if word in _APPROVE or word in _DENY:
            return PendingAnswer(approve=word in _APPROVE, by="a2a")
        raise InvalidParamsError(
            'an approval is answered with the text "approve" or "deny" (or a data part {"approve": true|false, '
            '"note": "..."})'
        )
    if data is not None and not text:
        return PendingAnswer(answer=data, by="a2a")
    if not text:
        raise InvalidParamsError("message.parts: the answer is empty")
    return PendingAnswer(answer=text, by="a2a")
