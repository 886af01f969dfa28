"""One delegation to a remote (``a2a:``) worker: the task as an A2A message, its updates as our events.

The delegator runs a remote worker as it runs a local one (slot, budgets, hooks, events, cancel):
:func:`teamrun.engine.turn.agent_loop.run_agent` hands an ``a2a:`` agent's frame to :func:`run_remote`
instead of a model loop. A2A protocol v1.0 over JSON-RPC, spoken by a2a-sdk's client (imported when a
remote worker runs):

- the card is the one the run read when it started (``<url>/.well-known/agent-card.json``, or the card URL
  given; read now if it could not be then, and kept for the run's other delegations), the prompt sent as one
  user message (``SendStreamingMessage`` when the card says it streams and ``a2a.stream`` is true, else
  ``SendMessage``, polling ``GetTask`` while the task works);
- each task, status update and artifact chunk is a ``remote_update`` event in the worker's agent span;
- ``input-required``: the status message is asked of a person as a pending item (on a terminal, or the run
  suspends for ``teamrun answer``); the answer goes back as the next message with the task's ids;
- ``completed``: the artifacts are the answer (text parts as they are, data parts as JSON); ``failed``,
  ``rejected``, ``canceled``, ``auth-required``, an error reply, a connection that fails or data that does
  not parse: :class:`~teamrun.errors.RemoteAgentError` naming the agent and its URL (the delegator makes
  it the worker's ``error`` result);
- tokens and cost are counted when the agent reports them in ``metadata.usage`` of the task, a status
  update or a message (``prompt_tokens``/``input_tokens``, ``completion_tokens``/``output_tokens``,
  ``cost_usd``/``cost``), else the result says ``usage_known: false``;
- cancelled (Ctrl-C, the run's or the worker's time-out, ``cancel_task``, a served run cancelled): the
  remote task gets ``CancelTask``, except when the run suspends for a person (the task waits for the answer);
- journaled: ``remote_start`` (the task's ids) as soon as they are known, ``remote`` (the answer) when it
  completes. A resumed run answers a finished task from the journal (nothing is sent); for a started one it
  asks ``GetTask`` and picks the task up again (``SubscribeToTask`` while it works); a task the agent no
  longer knows is sent again (a warning says so).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import math
import uuid
from collections.abc import AsyncGenerator
from contextlib import AsyncExitStack, aclosing
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from teamrun.config.models import RemoteAgent
from teamrun.engine.delegation.records import WorkerOutcome
from teamrun.engine.remote.cards import (
    DEFAULT_REMOTE_TIMEOUT_S,
    CardProblem,
    bearer_token,
    card_key,
    card_location,
    plain_text,
    require_a2a,
)
from teamrun.engine.runtime import AgentFrame, RunContext
from teamrun.errors import RemoteAgentError, RunError, UserError
from teamrun.llm.types import Usage
from teamrun.logs import get_logger
from teamrun.store.records import EntryKey, JournalEntry
from teamrun.tools.people import AskSite, PendingItem, answer_text

if TYPE_CHECKING:
    from a2a.client import Client
    from a2a.types.a2a_pb2 import StreamResponse, Task

__all__ = ["POLL_S", "run_remote"]

_log = get_logger(__name__)
POLL_S = 0.5
"""How often a task that works is looked at with ``GetTask`` when its updates are not streamed."""
MAX_ANSWER_CHARS = 100_000
"""Most characters of a remote answer (artifacts, or a message reply) kept: the rest is dropped as it arrives,
with a note in the answer and a run warning (a local worker's answer is bounded by its model; a remote one
would otherwise go whole into the supervisor's next model call)."""
CANCEL_WAIT_S = 10.0
"""Most seconds a cancelled delegation waits for the remote agent to take the ``CancelTask``."""
_TERMINAL = frozenset({"completed", "failed", "canceled", "rejected"})
_INTERRUPTED = frozenset({"input-required", "auth-required"})


def _state(value: int) -> str:
    from a2a.types.a2a_pb2 import TaskState

    return str(TaskState.Name(value)).removeprefix("TASK_STATE_").lower().replace("_", "-")


async def run_remote(ctx: RunContext, frame: AgentFrame, task: str) -> WorkerOutcome:
    """Run the remote agent of ``frame`` on ``task`` (in the worker's agent span) to its outcome."""
    spec = ctx.agent(frame.name).a2a
    assert spec is not None
    with frame.agent_span(ctx, model=f"a2a:{spec.url}", task=task) as span:
        # not known until the agent reports it (an error, a cancel or a wait too): never a pretended 0
        span.end.update(usage_known=False, usage={}, cost=None)
        frame.ledger.usage_known = False
        outcome = await _RemoteTask(ctx, frame, spec, task).run()
        if outcome.usage_known:
            del span.end["usage_known"], span.end["usage"], span.end["cost"]
            frame.ledger.usage_known = True
        return outcome


@dataclass
class _RemoteTask:
    """One remote task as this delegation sees it: its ids, state, artifacts and reported usage."""

    ctx: RunContext
    frame: AgentFrame
    spec: RemoteAgent
    prompt: str
    task_id: str = ""
    context_id: str = ""
    state: str = ""
    status_text: str = ""
    artifacts: dict[str, list[str]] = field(default_factory=dict)
    usage: dict[str, Any] | None = None
    sent: int = 0
    """User messages the remote task has had (the current question's round, for its pending item)."""
    started_written: bool = False
    reattached: bool = False
    kept: int = 0
    """Characters of answer kept so far (at most :data:`MAX_ANSWER_CHARS`)."""
    cut: bool = False

    @property
    def name(self) -> str:
        return self.frame.name

    @property
    def fingerprint(self) -> str:
        return hashlib.sha256(json.dumps(["a2a", self.spec.url, self.prompt]).encode()).hexdigest()

    def _key(self, kind: str) -> EntryKey:
        return EntryKey(self.frame.key, 1, kind)  # type: ignore[arg-type]

    def _fail(self, what: str) -> RemoteAgentError:
        return RemoteAgentError(f"remote agent '{self.name}' ({self.spec.url}) {what}")

    # -- the delegation ------------------------------------------------------------------------
    async def run(self) -> WorkerOutcome:
        earlier = self._journaled("remote")
        if earlier is not None:  # finished by an earlier attempt: not sent again
            return self._outcome_from(earlier)
        start = self._journaled("remote_start")
        require_a2a()
        token = bearer_token(self.name, self.spec.auth.bearer_env if self.spec.auth else None)
        if token:
            self.ctx.bus.keep_secrets({token})
            if self.ctx.journal is not None:
                self.ctx.journal.keep_secrets({token})
        try:
            async with AsyncExitStack() as stack:
                client, streaming = await self._connect(stack, token)
                try:
                    await self._drive(client, streaming, start)
                except asyncio.CancelledError:
                    if self.task_id and self.state not in _TERMINAL and not self.ctx.activity.stuck.is_set():
                        await self._cancel(client)
                    raise
                except Exception:  # a time-out, a broken update...: the task is not left working for nobody
                    if self.task_id and self.state not in _TERMINAL:
                        await self._cancel(client)
                    raise
        except (RemoteAgentError, UserError, RunError):
            raise
        except CardProblem as exc:  # pragma: no cover - a RemoteAgentError, caught above
            raise self._fail(str(exc)) from exc
        except Exception as exc:
            raise self._fail(_described(exc, self.spec.timeout_s or DEFAULT_REMOTE_TIMEOUT_S)) from exc
        text = self._answer()
        usage, cost, known = self._usage()
        if known:
            self.frame.ledger.charge_model(usage, cost, step=False)
        if self.ctx.journal is not None:
            await self.ctx.journal.write_now(
                JournalEntry(
                    self._key("remote"),
                    self.fingerprint,
                    {
                        "text": text,
                        "task_id": self.task_id,
                        "usage": self.usage,
                    },
                )
            )
        return WorkerOutcome(text, "ok", usage, cost, (), usage_known=known)

    async def _connect(self, stack: AsyncExitStack, token: str | None) -> tuple[Client, bool]:
        import httpx
        from a2a.client import A2ACardResolver, ClientConfig, ClientFactory

        timeout = self.spec.timeout_s or DEFAULT_REMOTE_TIMEOUT_S
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        home = _origin(self.spec.url)

        async def same_origin(request: httpx.Request) -> None:  # the token never leaves a2a.url's origin
            if "authorization" in request.headers and _origin(str(request.url)) != home:
                raise self._fail(_foreign(str(request.url)))

        http = await stack.enter_async_context(
            httpx.AsyncClient(headers=headers, timeout=timeout, event_hooks={"request": [same_origin]})
        )
        base, path = card_location(self.spec.url)
        key = card_key(self.spec)
        card = self.ctx.cards.get(key)  # read when the run started: not fetched again per delegation
        if card is None:  # not read then (the agent was down...): read now, once for the rest of the run
            try:
                card = await A2ACardResolver(http, base, path).get_agent_card()
            except RemoteAgentError:
                raise
            except Exception as exc:
                raise self._fail(f"cannot read its agent card at {base}{path}: {_described(exc, timeout)}") from exc
            self.ctx.cards[key] = card
        if token:
            for interface in card.supported_interfaces:
                if interface.protocol_binding.upper() == "JSONRPC" and _origin(interface.url) != home:
                    raise self._fail(_foreign(interface.url))
        streaming = bool(self.spec.stream and card.capabilities.streaming)
        try:
            # without streaming: SendMessage returns at once (return_immediately), then GetTask every POLL_S
            config = ClientConfig(httpx_client=http, streaming=streaming, polling=not streaming)
            client = ClientFactory(config).create(card)
        except ValueError as exc:  # no interface this client speaks (JSON-RPC)
            raise self._fail(f"offers no interface teamrun can use (A2A 1.0 over JSON-RPC): {exc}") from exc
        stack.push_async_callback(client.close)
        return client, streaming

    async def _drive(self, client: Client, streaming: bool, start: JournalEntry | None) -> None:
        updates: AsyncGenerator[StreamResponse, None] | None = None
        if start is not None:
            task_id, sent = str(start.payload.get("task_id", "")), int(start.payload.get("messages", 1))
            if start.payload.get("cancelled"):  # teamrun cancelled it (Ctrl-C...): the work is to be done anew
                self.ctx.warn(
                    self.frame,
                    f"remote agent '{self.name}' ({self.spec.url}): task {start.payload['cancelled']} was cancelled "
                    "when the run was interrupted; the task is sent again",
                )
                self.sent = sent
            else:
                updates = await self._reattach(client, streaming, task_id, sent)
            if updates is None:
                # sent again as a new task: its rounds go on from the forgotten task's, so a question it asks is
                # a new pending item (never answered with what a person said to the forgotten task's question)
                self.sent = sent
        if updates is None:
            updates = self._send(client, self.prompt)
        answered = False
        while True:
            async with aclosing(updates) as stream:
                async for update in stream:
                    kind = await self._take(update)
                    if answered and kind == "task" and self.state in _INTERRUPTED:
                        continue  # the task as it was when the answer arrived: the question just answered
                    answered = False
                    if self.state in _TERMINAL or self.state in _INTERRUPTED:
                        break
            if self.state == "completed":
                return
            if self.state == "input-required":
                answer = await self._ask()
                await self._journal_start(self.sent + 1)  # the message about to be sent, before it is
                self.state = "working"  # the answer is on its way: the task goes on until it says otherwise
                updates, answered = self._send(client, answer), True
                continue
            if self.state in ("failed", "rejected", "canceled"):
                said = f": {self.status_text}" if self.status_text else ""
                raise self._fail(f"ended its task {self.state}{said}")
            if self.state == "auth-required":
                raise self._fail("asks for authentication teamrun cannot give (auth-required)")
            if not self.task_id:
                raise self._fail("answered without a task or a message")
            updates = self._poll(client)  # a task still working after SendMessage (or a stream that ended)

    async def _send(self, client: Client, text: str) -> AsyncGenerator[StreamResponse, None]:
        from a2a.types.a2a_pb2 import Message, Part, Role, SendMessageRequest

        message = Message(
            message_id=str(uuid.uuid4()),
            role=Role.ROLE_USER,
            parts=[Part(text=text)],
            task_id=self.task_id or None,
            context_id=self.context_id or None,
        )
        self.sent += 1
        async for update in client.send_message(SendMessageRequest(message=message)):
            yield update

    async def _poll(self, client: Client) -> AsyncGenerator[StreamResponse, None]:
        from a2a.types.a2a_pb2 import GetTaskRequest, StreamResponse

        while True:
            await asyncio.sleep(POLL_S)
            yield StreamResponse(task=await client.get_task(GetTaskRequest(id=self.task_id)))

    async def _reattach(
        self, client: Client, streaming: bool, task_id: str, sent: int
    ) -> AsyncGenerator[StreamResponse, None] | None:
        """The task an earlier attempt started (and sent ``sent`` messages), picked up again; ``None`` when the
        agent no longer knows it."""
        from a2a.types.a2a_pb2 import GetTaskRequest

        try:
            task = await client.get_task(GetTaskRequest(id=task_id))
        except Exception as exc:  # TaskNotFoundError, or an agent that forgot its tasks (restarted)
            self.ctx.warn(
                self.frame,
                f"remote agent '{self.name}' ({self.spec.url}) no longer knows task {task_id} an earlier attempt "
                f"started ({type(exc).__name__}); the task is sent again",
            )
            return None
        self.reattached, self.started_written = True, True
        self.sent = sent
        return self._picked_up(client, streaming, task)

    async def _picked_up(self, client: Client, streaming: bool, task: Task) -> AsyncGenerator[StreamResponse, None]:
        from a2a.types.a2a_pb2 import StreamResponse, SubscribeToTaskRequest

        yield StreamResponse(task=task)
        if _state(task.status.state) in _TERMINAL or _state(task.status.state) in _INTERRUPTED:
            return
        if streaming:
            async for update in client.subscribe(SubscribeToTaskRequest(id=task.id)):
                yield update

    # -- what comes back ---------------------------------------------------------------------------
    async def _take(self, update: StreamResponse) -> str:
        """One update: the task's state, ids, artifacts and usage as they now are; a ``remote_update`` event."""
        from google.protobuf.json_format import MessageToDict  # type: ignore[import-untyped]

        kind = update.WhichOneof("payload")
        text = ""
        if kind == "task":
            task = update.task
            self._ids(task.id, task.context_id)
            self.state = _state(task.status.state)
            self.kept = 0
            self.artifacts = {a.artifact_id or str(i): self._fit(_parts(a.parts)) for i, a in enumerate(task.artifacts)}
            text = self.status_text = _message_text(task.status.message) if task.status.HasField("message") else ""
            self._usage_from(MessageToDict(task.metadata) if task.HasField("metadata") else {})
        elif kind == "status_update":
            status = update.status_update
            self._ids(status.task_id, status.context_id)
            self.state = _state(status.status.state)
            if status.status.HasField("message"):
                text = self.status_text = _message_text(status.status.message)
            self._usage_from(MessageToDict(status.metadata) if status.HasField("metadata") else {})
        elif kind == "artifact_update":
            chunk = update.artifact_update
            self._ids(chunk.task_id, chunk.context_id)
            key = chunk.artifact.artifact_id or str(len(self.artifacts))
            parts = self._fit(_parts(chunk.artifact.parts))
            self.artifacts[key] = [*self.artifacts.get(key, []), *parts] if chunk.append else parts
            text = "".join(parts)
        elif kind == "message":  # a direct reply: the agent answered without a task
            message = update.message
            self._ids(message.task_id, message.context_id)
            self.state = "completed"
            self.kept = 0
            self.artifacts = {"message": self._fit(_parts(message.parts))}
            text = "".join(self.artifacts["message"])
            self._usage_from(MessageToDict(message.metadata) if message.HasField("metadata") else {})
        else:
            raise self._fail(f"sent an update teamrun does not understand ({kind})")
        if self.task_id and not self.started_written:
            self.started_written = True
            await self._journal_start(self.sent)
        self.frame.emit(
            self.ctx,
            "remote_update",
            url=self.spec.url,
            task_id=self.task_id,
            state=self.state,
            update=(kind or "").removesuffix("_update"),
            text=text,
            chars=len(text),
            reattached=self.reattached,
        )
        return kind or ""

    async def _journal_start(self, messages: int) -> None:
        """``remote_start`` number ``messages``: the task's ids, and that it has had that many messages."""
        if self.ctx.journal is not None and self.task_id:
            entry = JournalEntry(
                EntryKey(self.frame.key, messages, "remote_start"),
                self.fingerprint,
                {"task_id": self.task_id, "context_id": self.context_id, "url": self.spec.url, "messages": messages},
            )
            await self.ctx.journal.write_now(entry)

    def _ids(self, task_id: str, context_id: str) -> None:
        if task_id and self.task_id and task_id != self.task_id:  # never another task's state or answer
            raise self._fail(
                f"sent an update for task {_shown(task_id)} while its task is {_shown(self.task_id)} (a broken or "
                "hostile agent): the delegation does not take it as an answer"
            )
        self.task_id = task_id or self.task_id
        self.context_id = context_id or self.context_id

    def _usage_from(self, metadata: dict[str, Any]) -> None:
        usage = metadata.get("usage")
        if isinstance(usage, dict):
            self.usage = usage

    def _fit(self, parts: list[str]) -> list[str]:
        """``parts`` as far as they fit in :data:`MAX_ANSWER_CHARS` with what was kept before."""
        kept: list[str] = []
        for part in parts:
            room = MAX_ANSWER_CHARS - self.kept
            if len(part) > room:
                if not self.cut:
                    self.cut = True
                    self.ctx.warn(
                        self.frame,
                        f"remote agent '{self.name}' ({self.spec.url}) answered more than {MAX_ANSWER_CHARS} "
                        "characters; the rest of its answer is dropped",
                    )
                if room > 0:
                    kept.append(part[:room])
                    self.kept += room
                break
            kept.append(part)
            self.kept += len(part)
        return kept

    def _answer(self) -> str:
        texts = ["".join(parts).strip() for parts in self.artifacts.values()]
        answer = "\n\n".join(t for t in texts if t) or self.status_text
        if self.cut:
            answer += f"\n\n[the remote answer was cut at {MAX_ANSWER_CHARS} characters]"
        return answer

    def _usage(self) -> tuple[Usage, float, bool]:
        usage, cost, known = _usage_of(self.usage)
        if self.usage and not known:
            self.ctx.warn(
                self.frame,
                f"remote agent '{self.name}' ({self.spec.url}) reported usage teamrun cannot count "
                "(negative, not a number, not finite or absurdly large); its tokens and cost are unknown",
            )
        return usage, cost, known

    # -- a person -----------------------------------------------------------------------------------
    async def _ask(self) -> str:
        """The remote task's question, asked of a person as a pending item named by this invocation and round."""
        ctx, frame = self.ctx, self.frame
        site = AskSite(
            ctx.journal.run_id if ctx.journal else ctx.result.run_id,
            frame.key,
            self.sent,
            0,
            frame.name,
            ctx.desk,
            ctx.activity.parked_call,
            lambda kind, **data: frame.emit(ctx, kind, **data),
        )
        question = self.status_text or f"The remote agent {self.name} needs more input to go on."
        item = PendingItem(kind="question", question=question, tool=f"a2a:{self.name}")
        return answer_text(item, await ctx.desk.ask(item, site))

    async def _cancel(self, client: Client) -> None:
        """Ask the remote agent to cancel the task (bounded: a run going down does not wait long)."""
        from a2a.types.a2a_pb2 import CancelTaskRequest

        if self.ctx.journal is not None:  # first: a resume sends the task anew rather than pick up a cancelled one
            entry = JournalEntry(
                EntryKey(self.frame.key, self.sent + 1, "remote_start"),
                self.fingerprint,
                {"task_id": "", "cancelled": self.task_id, "url": self.spec.url, "messages": self.sent},
            )
            try:
                await asyncio.wait_for(self.ctx.journal.write_now(entry), CANCEL_WAIT_S)
            except Exception as exc:  # the run goes down anyway; a resume then finds the task canceled
                _log.info("remote_cancel_not_journaled", agent=self.name, error=type(exc).__name__)
        asked = asyncio.ensure_future(client.cancel_task(CancelTaskRequest(id=self.task_id)))
        try:
            await asyncio.wait_for(asyncio.shield(asked), CANCEL_WAIT_S)
            outcome = "canceled"
        except BaseException as exc:
            outcome = f"cancel not confirmed ({type(exc).__name__})"
            if not asked.done():
                asked.cancel()
        _log.info("remote_task_cancelled", agent=self.name, task_id=self.task_id, outcome=outcome)
        self.frame.emit(
            self.ctx,
            "remote_update",
            url=self.spec.url,
            task_id=self.task_id,
            state="canceled",
            update="cancel",
            text=outcome,
            chars=len(outcome),
        )

    # -- the journal ----------------------------------------------------------------------------------
    def _journaled(self, kind: str) -> JournalEntry | None:
        """The earlier attempts' ``remote`` entry, or their latest ``remote_start`` (most messages sent)."""
        journal = self.ctx.journal
        if journal is None or not journal.replay:
            return None
        found = [
            entry
            for key, entry in journal.replay.entries.items()
            if key.invocation == self.frame.key and key.kind == kind and entry.request_hash == self.fingerprint
        ]
        return max(found, key=lambda entry: entry.key.index, default=None)

    def _outcome_from(self, entry: JournalEntry) -> WorkerOutcome:
        payload = entry.payload
        usage_payload = payload.get("usage")
        self.usage = dict(usage_payload) if isinstance(usage_payload, dict) else None
        usage, cost, known = self._usage()
        if known:
            self.frame.ledger.charge_model(usage, cost, step=False)
        text = str(payload.get("text", ""))
        self.frame.emit(
            self.ctx,
            "remote_update",
            url=self.spec.url,
            task_id=str(payload.get("task_id", "")),
            state="completed",
            update="journal",
            text=text,
            chars=len(text),
            reattached=True,
        )
        return WorkerOutcome(text, "ok", usage, cost, (), usage_known=known)


MAX_REPORTED_TOKENS = 10**12
MAX_REPORTED_COST_USD = 10.0**9
"""Reported figures above these are not believed (unknown usage, a run warning)."""


class _Unusable(ValueError):
    pass


def _usage_of(reported: dict[str, Any] | None) -> tuple[Usage, float, bool]:
    """Tokens and cost from ``metadata.usage``; ``known`` is false when the agent reported none, or a figure
    that is negative, not a number, not finite or absurdly large (never turned into a known 0)."""
    if not reported:
        return Usage(), 0.0, False

    def number(most: float, *names: str) -> float:
        for name in names:
            if name not in reported or reported[name] is None:
                continue
            value = reported[name]
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise _Unusable(name)
            if not math.isfinite(value) or value < 0 or value > most:
                raise _Unusable(name)
            return float(value)
        return 0.0

    try:
        usage = Usage(
            int(number(MAX_REPORTED_TOKENS, "prompt_tokens", "input_tokens")),
            int(number(MAX_REPORTED_TOKENS, "completion_tokens", "output_tokens")),
            int(number(MAX_REPORTED_TOKENS, "requests")) or 1,
        )
        return usage, number(MAX_REPORTED_COST_USD, "cost_usd", "cost"), True
    except _Unusable:
        return Usage(), 0.0, False


def _parts(parts: Any) -> list[str]:
    """Each part as text: a text part as it is, a data part as JSON on a line of its own (a file part: its
    name or URL, said as such)."""
    from google.protobuf.json_format import MessageToDict

    out: list[str] = []
    for part in parts:
        if part.HasField("text"):
            out.append(plain_text(part.text))
        elif part.HasField("data"):
            out.append("\n" + plain_text(json.dumps(_whole(MessageToDict(part.data)), ensure_ascii=False)) + "\n")
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


def _shown(text: str) -> str:
    """A remote id in a message: at most 80 characters, no control characters."""
    text = "".join(c if c.isprintable() else "?" for c in text)
    return text if len(text) <= 80 else text[:79] + "…"


def _origin(url: str) -> tuple[str, str, int | None]:
    """A URL's origin: scheme, host and port (the scheme's default port when none is given)."""
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    try:
        port = parts.port
    except ValueError:
        port = None
    return scheme, (parts.hostname or "").lower(), port or {"http": 80, "https": 443}.get(scheme)


def _foreign(url: str) -> str:
    return (
        f"names an interface on another origin ({url}) than a2a.url's: teamrun does not send the bearer token "
        "there; point a2a.url at that agent itself if it is to be trusted with the token"
    )


def _described(exc: BaseException, timeout: float) -> str:
    """What went wrong, in words (not a traceback)."""
    import httpx

    name = type(exc).__name__
    text = plain_text(" ".join(str(exc).split()))
    if len(text) > 300:
        text = text[:297] + "..."
    if isinstance(exc, httpx.ConnectError) or "ConnectError" in text or "connection attempts failed" in text:
        return f"cannot be reached (is it running?): {text or name}"
    if isinstance(exc, httpx.TimeoutException | TimeoutError) or "Timeout" in name:
        return f"did not answer within {timeout:g}s (a2a.timeout_s): {text or name}"
    return f"answered with an error ({name}): {text}" if text else f"failed ({name})"
