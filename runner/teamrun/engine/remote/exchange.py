"""The conversation with one remote task: the prompt sent, its updates taken, a person's answers, until it completes.

:class:`Exchange` speaks to the agent through a :class:`~teamrun.engine.remote.client.RemoteClient` and tells its
:class:`Side` (the delegation: events, journal, the person) what happens; the task as its updates describe it is
a :class:`~teamrun.engine.remote.updates.TaskView`. It holds no run context (tested with a fake client and side).

- The prompt is one user message (``SendStreamingMessage`` when the client streams, else ``SendMessage``; a task
  still working when its updates end is looked at with ``GetTask`` every :attr:`Exchange.poll_s`).
- ``input-required``: the side asks a person; the answer goes back as the next message with the task's ids (its
  round journaled first). The first update after it that repeats the task as it was answered — same state, same
  question, as an agent that starts its reply with the task it stored does — is skipped without keeping it.
- ``completed`` ends the exchange; ``failed``, ``rejected``, ``canceled``, ``auth-required``, an answer without
  a task or a message, or an update for another task fail it (:meth:`Side.fail`).
- A task an earlier attempt started is picked up with ``GetTask`` (followed with ``SubscribeToTask`` while it
  works); one the agent no longer knows, or that teamrun cancelled, is sent anew with a warning.
- :meth:`Exchange.cancel` asks the agent to cancel the task, journaled first, bounded by :data:`CANCEL_WAIT_S`;
  not when the journal refuses that entry because the run goes on in another process now (a replica took it over,
  or this one handed it over as it stops): the task is left working for that process to pick up.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncGenerator
from contextlib import aclosing
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from teamrun.engine.durability.remote_entries import RemoteStarted
from teamrun.engine.remote.client import RemoteClient
from teamrun.engine.remote.updates import INTERRUPTED, TERMINAL, Taken, TaskView, UpdateRefused, state_name
from teamrun.errors import RemoteAgentError

if TYPE_CHECKING:
    from a2a.types.a2a_pb2 import StreamResponse, Task

__all__ = ["CANCEL_WAIT_S", "POLL_S", "Exchange", "Side"]

POLL_S = 0.5
"""How often a task that works is looked at with ``GetTask`` when its updates are not streamed."""
CANCEL_WAIT_S = 10.0
"""Most seconds a cancelled delegation waits for the remote agent to take the ``CancelTask``."""

Updates = AsyncGenerator["StreamResponse", None]


class Side(Protocol):
    """What the exchange tells the delegation, and asks of it."""

    @property
    def who(self) -> str:
        """The agent in a message: ``remote agent 'NAME' (URL)``."""
        ...

    def fail(self, what: str) -> RemoteAgentError:
        """The error of a delegation whose agent ``what`` (``ended its task failed``...)."""
        ...

    def warn(self, text: str) -> None: ...

    async def took(self, taken: Taken, view: TaskView, reattached: bool) -> None:
        """An update was taken (an event)."""
        ...

    async def started(self, view: TaskView, messages: int) -> None:
        """The task's ids are known and it has (or is about to have) ``messages`` user messages (journaled)."""
        ...

    async def ask(self, question: str, round: int) -> str:
        """A person's answer to the task's ``question`` (``""``: it asked none), round ``round``."""
        ...

    async def cancelling(self, task_id: str, sent: int) -> bool:
        """The task is about to be cancelled (journaled first: a resume sends the work anew); ``False``: it is not
        to be, the run goes on in another process (a replica that took it over), which picks the task up."""
        ...

    def cancelled(self, task_id: str, outcome: str) -> None:
        """The cancel was sent (``outcome``: confirmed or not)."""
        ...


@dataclass
class Exchange:
    """The messages of one remote task and its updates, to its end."""

    client: RemoteClient
    streaming: bool
    side: Side
    view: TaskView = field(default_factory=TaskView)
    sent: int = 0
    """User messages the task has had (the round of its current question)."""
    started_written: bool = False
    reattached: bool = False
    poll_s: float = POLL_S

    async def run(self, prompt: str, started: RemoteStarted | None = None) -> None:
        """Send ``prompt`` (or pick up the task ``started`` by an earlier attempt) and follow it to completion."""
        updates = await self._resume(started) if started is not None else None
        if updates is None:
            updates = self._send(prompt)
        answered: tuple[str, str] | None = None
        while True:
            await self._follow(updates, answered)
            answered = None
            state = self.view.state
            if state == "completed":
                return
            if state == "input-required":
                question = self.view.status_text
                answer = await self.side.ask(question, self.sent)
                await self.side.started(self.view, self.sent + 1)  # the message about to be sent, before it is
                self.view.state = "working"  # the answer is on its way: the task goes on until it says otherwise
                updates, answered = self._send(answer), (state, question)
                continue
            self._refuse_ending()
            updates = self._poll()  # a task still working after SendMessage (or a stream that ended)

    async def cancel(self) -> None:
        """Ask the agent to cancel the task (bounded: a run going down does not wait long)."""
        from a2a.types.a2a_pb2 import CancelTaskRequest

        task_id = self.view.task_id
        if not await self.side.cancelling(task_id, self.sent):
            return  # the run goes on elsewhere: the task is that process's to pick up, working
        asked = asyncio.ensure_future(self.client.cancel_task(CancelTaskRequest(id=task_id)))
        try:
            await asyncio.wait_for(asyncio.shield(asked), CANCEL_WAIT_S)
            outcome = "canceled"
        except BaseException as exc:
            outcome = f"cancel not confirmed ({type(exc).__name__})"
            if not asked.done():
                asked.cancel()
        self.side.cancelled(task_id, outcome)

    @property
    def cancellable(self) -> bool:
        """The task is known and not over."""
        return bool(self.view.task_id) and self.view.state not in TERMINAL

    # -- updates -----------------------------------------------------------------------------------
    async def _follow(self, updates: Updates, answered: tuple[str, str] | None) -> None:
        """Take ``updates`` until the task ends or waits; after an answer (``answered``: the state and question
        answered), a first update that repeats them is the stored task as it was, not news: skipped."""
        first = True
        async with aclosing(updates) as stream:
            async for update in stream:
                if first and answered is not None and self.view.repeats(update, *answered):
                    first = False
                    continue
                first = False
                await self._take(update)
                if self.view.ended:
                    break

    async def _take(self, update: StreamResponse) -> None:
        try:
            taken = self.view.take(update)
        except UpdateRefused as exc:
            raise self.side.fail(str(exc)) from None
        if self.view.task_id and not self.started_written:
            self.started_written = True
            await self.side.started(self.view, self.sent)
        await self.side.took(taken, self.view, self.reattached)

    def _refuse_ending(self) -> None:
        """A task that ended otherwise than completed or asking: the delegation fails, saying how."""
        state = self.view.state
        if state in ("failed", "rejected", "canceled"):
            said = f": {self.view.status_text}" if self.view.status_text else ""
            raise self.side.fail(f"ended its task {state}{said}")
        if state == "auth-required":
            raise self.side.fail("asks for authentication teamrun cannot give (auth-required)")
        if not self.view.task_id:
            raise self.side.fail("answered without a task or a message")

    # -- what is sent ------------------------------------------------------------------------------
    async def _send(self, text: str) -> AsyncGenerator[StreamResponse, None]:
        from a2a.types.a2a_pb2 import Message, Part, Role, SendMessageRequest

        message = Message(
            message_id=str(uuid.uuid4()),
            role=Role.ROLE_USER,
            parts=[Part(text=text)],
            task_id=self.view.task_id or None,
            context_id=self.view.context_id or None,
        )
        self.sent += 1
        async for update in self.client.send_message(SendMessageRequest(message=message)):
            yield update

    async def _poll(self) -> AsyncGenerator[StreamResponse, None]:
        from a2a.types.a2a_pb2 import GetTaskRequest, StreamResponse

        while True:
            await asyncio.sleep(self.poll_s)
            yield StreamResponse(task=await self.client.get_task(GetTaskRequest(id=self.view.task_id)))

    # -- an earlier attempt's task --------------------------------------------------------------------
    async def _resume(self, started: RemoteStarted) -> Updates | None:
        """The updates of the task ``started`` picked up again; ``None``: it is to be sent anew."""
        self.sent = started.messages  # sent anew: its rounds go on from the earlier task's, so a question it
        # asks is a new pending item (never answered with what a person said to the earlier task's question)
        if started.cancelled:  # teamrun cancelled it (Ctrl-C...): the work is to be done anew
            self.side.warn(
                f"{self.side.who}: task {started.cancelled} was cancelled when the run was interrupted; "
                "the task is sent again"
            )
            return None
        from a2a.types.a2a_pb2 import GetTaskRequest

        try:
            task = await self.client.get_task(GetTaskRequest(id=started.task_id))
        except Exception as exc:  # TaskNotFoundError, or an agent that forgot its tasks (restarted)
            self.side.warn(
                f"{self.side.who} no longer knows task {started.task_id} an earlier attempt started "
                f"({type(exc).__name__}); the task is sent again"
            )
            return None
        self.reattached, self.started_written = True, True
        return self._picked_up(task)

    async def _picked_up(self, task: Task) -> AsyncGenerator[StreamResponse, None]:
        from a2a.types.a2a_pb2 import StreamResponse, SubscribeToTaskRequest

        yield StreamResponse(task=task)
        state = state_name(task.status.state)
        if state in TERMINAL or state in INTERRUPTED or not self.streaming:
            return
        async for update in self.client.subscribe(SubscribeToTaskRequest(id=task.id)):
            yield update
