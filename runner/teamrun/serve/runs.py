"""The runs a server holds: each one a :meth:`Team.run` task, its events, and its result.

Every way in (the OpenAI-compatible endpoint, the native runs API) starts a run
through :class:`RunRegistry.start`, so the concurrency limit, cancellation and
graceful shutdown apply to all of them alike. A run lives in memory until the
server stops (the oldest finished ones are dropped past
:attr:`RunRegistry.keep_finished`); with a store, every run is also journaled
there under the server's run id, so its record outlives the server.
"""

from __future__ import annotations

import asyncio
import threading
import time
import uuid
from collections import OrderedDict, deque
from collections.abc import AsyncIterator, Awaitable, Callable, Container, Iterable, Iterator, Mapping
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from teamrun.config.models import Limits
from teamrun.defaults import DEFAULT_MAX_STEPS
from teamrun.errors import TeamrunError, UsageError
from teamrun.events import Event, LlmIO, MemoryRecall, MemorySave, WorkspaceWrite
from teamrun.logs import get_logger
from teamrun.observe.trace_file import event_record
from teamrun.secrets import Redactor
from teamrun.serve.approvals import DEFAULT_APPROVAL_TIMEOUT_S, HttpApprover, OnTimeout, PendingApproval
from teamrun.serve.metrics import ServerMetrics

if TYPE_CHECKING:
    from teamrun.config.models import TeamConfig
    from teamrun.engine.durability.journal import RunJournal
    from teamrun.engine.result import RunResult
    from teamrun.engine.team import Team
    from teamrun.store import Store
    from teamrun.store.records import JournaledRun
    from teamrun.tools.approval import Approver
    from teamrun.tools.people import PersonDesk

__all__ = [
    "AlreadyDecided",
    "BudgetTooHigh",
    "FoundRun",
    "NoThreads",
    "RunHandle",
    "RunRegistry",
    "ServerBusy",
    "ShuttingDown",
    "check_budgets",
    "continued_since",
    "line_record",
    "reconciled",
    "store_people",
    "stored_record",
]

_log = get_logger(__name__)

RunState = Literal["running", "done", "failed", "budget_exhausted", "cancelled", "waiting"]


class ServerBusy(TeamrunError):
    """Every run slot is taken (answered 429 with ``Retry-After``)."""


class ShuttingDown(TeamrunError):
    """The server is stopping and starts no new run (answered 503)."""


class NoThreads(TeamrunError):
    """A request named a thread, and the server has no store (answered 400)."""


class AlreadyDecided(TeamrunError):
    """An approval answered twice, or after its timeout (answered 409)."""


class BudgetTooHigh(TeamrunError):
    """A request asked for a limit higher than the one in force (answered 422)."""

    def __init__(self, message: str, in_force: Mapping[str, float]) -> None:
        super().__init__(message)
        self.in_force = dict(in_force)
        """The limits refused, each with the value in force."""


_DEFAULT_LIMITS: dict[str, float] = {"max_steps": DEFAULT_MAX_STEPS}
"""The limits teamrun applies when a team file sets none (the others are unlimited then)."""


def check_budgets(config: TeamConfig, budgets: Limits | None) -> None:
    """Raise :class:`BudgetTooHigh` unless each of a request's ``budgets`` lowers the limit in force.

    The limit in force is the team file's ``limits:`` value, else teamrun's default
    (``max_steps``: :data:`~teamrun.defaults.DEFAULT_MAX_STEPS`); a limit with neither is unlimited.
    """
    asked = budgets.model_dump(exclude_none=True) if budgets is not None else {}
    current = config.limits or Limits()
    refused: dict[str, float] = {}
    said: list[str] = []
    for key, value in asked.items():
        in_force = getattr(current, key)
        source = "the team's limits"
        if in_force is None and key in _DEFAULT_LIMITS:
            in_force, source = _DEFAULT_LIMITS[key], "teamrun's default (the team file sets none)"
        if in_force is not None and value > in_force:
            refused[key] = in_force
            said.append(f"budgets.{key} ({value}) is higher than the limit in force: {key} {in_force}, {source}")
    if said:
        raise BudgetTooHigh("; ".join(said) + "; a request may only lower the limits in force", refused)


def line_record(line: Event | dict[str, Any], run_id: str, *, content: bool = False) -> dict[str, Any]:
    """One of a run's event lines as a JSON-ready dict, secrets not masked yet (any thread: events are frozen).

    Without ``content`` (the server's ``--trace-content``) a workspace write's value is left out, as a trace
    file leaves it out: ``GET /v1/runs/{id}/workspace`` answers the values; so are a memory recall's query and
    facts and a saved fact (docs/memory.md).
    """
    if not isinstance(line, Event):
        return line
    data = None
    if isinstance(line, WorkspaceWrite) and not content:
        data = {k: v for k, v in line.data.items() if k != "value_after"}
    elif isinstance(line, MemoryRecall | MemorySave) and not content:
        data = {k: v for k, v in line.data.items() if k not in _MEMORY_CONTENT}
    record = event_record(line, data)
    record["run_id"] = run_id
    return record


_MEMORY_CONTENT = frozenset({"query", "facts", "fact"})
"""The memory events' content fields (served only with ``--trace-content``)."""


@dataclass
class RunHandle:
    """One run the server started: its task, its events so far, and (once over) its result."""

    id: str
    team: str
    input: str
    redactor: Redactor
    cancel: asyncio.Event = field(default_factory=asyncio.Event)
    result: RunResult | None = None
    created: float = field(default_factory=time.time)
    task: asyncio.Task[None] | None = None
    thread: str | None = None
    """The thread this run is a turn of (``None``: a run of its own)."""
    resource: str | None = None
    """Whose long-term memory the run recalls and saves (``None``: none; a continued run keeps its journal's)."""
    error: str | None = None
    """Why the run could not run at all (the team's model could not be prepared, its thread refused...)."""
    refused: bool = False
    """The run could not start because of the request (a thread of another team...): :attr:`error` says why."""
    refused_thread: bool = False
    """Refused because its thread holds another team's conversation (an A2A task says so in its own words)."""
    refused_resource: bool = False
    """Refused because its thread belongs to another resource (an A2A task says so in its own words)."""
    cancel_reason: str | None = None
    ended_at: float | None = None
    """When the run last stopped running (it ended, or suspended waiting for people); ``None`` while it runs."""
    content: bool = False
    """Keep ``llm_io`` events (model calls' messages) among the run's events."""
    approvals: dict[str, PendingApproval] = field(default_factory=dict)
    """Tool calls that asked for approval, by approval id."""
    failure: str | None = None
    """Why the server failed the run (an approval nobody answered, under ``--approval-timeout-outcome fail``)."""
    owned: asyncio.Event = field(default_factory=asyncio.Event)
    """Set once the run holds its lease (replicas on one store, serve/replicas.py)."""
    moved: bool = False
    """Another replica executes the run now (it took the run's lease): the store's record is its truth."""
    needs_confirmation: bool = False
    """Continued here, the run could not go on without a person's say (a tool that is not idempotent may have run
    halfway where it ran before): it waits in the store, ``interrupted``, for ``teamrun resume RUN_ID --yes``."""
    lost_at: int | None = None
    """How many events the run had here when this replica learned another one took it (its writes refused, or
    its lease gone): the events after them (its cancellation here) are this process's alone, never sent; the
    store numbers the other replica's events from there. ``None``: it did not move."""
    attempt: int | None = None
    """The store's attempt number of the run's latest stretch here (1 for a first run; each continuation, here or
    by another process, adds one): a stored record of a later attempt was continued elsewhere since. ``None``:
    not known (no store, or it never started here)."""
    _lines: list[Event | dict[str, Any]] = field(default_factory=list)
    """Every event so far: the engine's as they came, the server's own lines (:meth:`note`) as dicts. Only the
    first :attr:`_masked` are JSON-ready dicts with secrets masked yet (see :meth:`event`)."""
    confirmed: int | None = None
    """A replica's run: how many of its events this replica had when its lease was last found still its own (a
    renewal); while the run runs, or once it moved, its streams here send no later event, so a replica that lost
    the run without knowing it yet (paused, cut off) sends none of the events it made meanwhile. ``None``: no lease
    (one server): every event is sent as it comes."""
    followers: int = 0
    """SSE streams of the run open in this process (a replica saves a followed run's events on every heartbeat)."""
    _masked: int = 0
    _readers: int = 0
    """Readers waiting in :meth:`changed` (nothing to wake without one)."""
    _changed: asyncio.Event = field(default_factory=asyncio.Event)
    _done: asyncio.Event = field(default_factory=asyncio.Event)
    _loop: asyncio.AbstractEventLoop | None = None
    _loop_thread: int = 0

    @property
    def state(self) -> RunState:
        if self.result is not None:
            return self.result.status
        if self.error is not None:
            return "failed"
        return "running"

    @property
    def finished(self) -> bool:
        return self.state != "running"

    def record(self) -> dict[str, Any]:
        """What ``GET /v1/runs/{id}`` answers (secrets masked)."""
        result = self.result.as_dict() if self.result is not None else None
        shown: dict[str, Any] = {
            "id": self.id,
            "object": "teamrun.run",
            "team": self.team,
            "status": self.state,
            "created": int(self.created),
            "thread": self.thread,
            "final_text": self.result.final_text if self.result is not None else None,
            "error": self.error or (self.result.error if self.result is not None else None),
            # a cancel that came as the run was ending (forwarded by another replica) is no reason for another end
            "cancel_reason": self.cancel_reason if self.state in ("running", "cancelled") else None,
            "approvals": [a.as_dict() for a in self.approvals.values()],
            "result": result,
            "events": True,  # held here: replayed and followed from memory (``GET /v1/runs`` says so too)
        }
        masked: dict[str, Any] = self.redactor.value(shown)
        return masked

    # -- events ---------------------------------------------------------------------------------

    def lose(self) -> None:
        """Another replica executes the run now: the events from here on are not sent (see :attr:`lost_at`).
        Safe from another thread (a write's, as it is refused)."""
        if self.lost_at is None:
            self.lost_at = len(self._lines)

    @property
    def event_count(self) -> int:
        """How many events the run has had so far."""
        return len(self._lines)

    def event(self, index: int) -> dict[str, Any]:
        """Event number ``index`` as a JSON-ready dict, secrets masked.

        Lines are built and masked on first read, not as they arrive: that is
        most of the cost of keeping events, and a chat completion never reads them.
        """
        lines = self._lines
        while self._masked <= index:
            lines[self._masked] = self.redactor.value(line_record(lines[self._masked], self.id, content=self.content))
            self._masked += 1
        shown = lines[index]
        assert isinstance(shown, dict)
        return shown

    def __call__(self, event: Event) -> None:
        """The run's event-bus subscriber: :meth:`on_event`."""
        self.on_event(event)

    def keep_secrets(self, values: Iterable[str]) -> None:
        """Mask these values too in this run's events and record (a secret answer); the team's redactor, which
        its other runs share, is left as it is."""
        self.redactor = self.redactor.derived(values, declared=True)

    def on_event(self, event: Event) -> None:
        """The run's event-bus subscriber (called on the loop, or from a tool's thread)."""
        if isinstance(event, LlmIO) and not self.content:
            return
        if self._loop is not None and threading.get_ident() != self._loop_thread:
            self._loop.call_soon_threadsafe(self._push, event)
        else:
            self._push(event)

    def note(self, kind: str, data: dict[str, Any]) -> None:
        """Add a line of the server's own (not an engine event: ``approval_request``...) to the run's events."""
        self._push({"kind": kind, "run_id": self.id, "ts": round(time.time(), 6), "data": data})

    def answer(self, approval_id: str, approve: bool) -> PendingApproval | None:
        """Answer a pending approval; ``None`` if there is no such approval. Raises :class:`AlreadyDecided`."""
        pending = self.approvals.get(approval_id)
        if pending is None:
            return None
        if pending.answer.done():
            raise AlreadyDecided(f"approval '{approval_id}' was already decided ({pending.outcome})")
        pending.answer.set_result(approve)
        return pending

    def _push(self, line: Event | dict[str, Any]) -> None:
        self._lines.append(line)
        if self._readers:
            self._wake()

    def _wake(self) -> None:
        changed, self._changed = self._changed, asyncio.Event()
        changed.set()

    def confirm(self, count: int) -> None:
        """The run's lease was found still this replica's: its first ``count`` events may be sent
        (:attr:`confirmed`)."""
        if self.confirmed is None or count > self.confirmed:
            self.confirmed = count
            self._wake()

    @property
    def sendable(self) -> int:
        """How many of the run's events its streams here may send now (:attr:`confirmed`, :attr:`lost_at`)."""
        upto = len(self._lines)
        if self.confirmed is not None and (self.lost_at is not None or not self.finished):
            upto = min(upto, self.confirmed)
        if self.lost_at is not None:
            upto = min(upto, self.lost_at)
        return upto

    def wake_readers(self) -> None:
        """Wake the streams waiting for the run's next event (each checks whether it should end: the server
        stops, serve/replicas.py)."""
        self._wake()

    async def changed(self, timeout: float) -> bool:
        """Wait until a new event arrives or the run ends; ``False`` if ``timeout`` seconds pass first."""
        self._readers += 1
        try:
            async with asyncio.timeout(timeout):  # not wait_for: that wraps the wait in a task of its own
                await self._changed.wait()
        except TimeoutError:
            return False
        finally:
            self._readers -= 1
        return True

    async def wait(self) -> None:
        """Until the run is over (woken once, not by every event)."""
        await self._done.wait()

    async def ended(self, timeout: float) -> bool:
        """Wait until the run is over; ``False`` if ``timeout`` seconds pass first."""
        try:
            async with asyncio.timeout(timeout):
                await self._done.wait()
        except TimeoutError:
            return False
        return True


def stored_record(run: JournaledRun, *, events: bool = False) -> dict[str, Any]:
    """What ``GET /v1/runs/{id}`` answers for a run known only from the store (unmasked: the caller masks).

    Such a run ran before this server started (or was dropped from memory, or ran in
    another worker): its outcome is kept, its approvals are not; ``events``: the store
    keeps its events (``GET /v1/runs/{id}/events`` answers them).
    """
    return {
        "id": run.run_id,
        "object": "teamrun.run",
        "team": run.team,
        "status": run.shown_status(),
        "created": int(run.started_at),
        "thread": run.thread_id,
        "final_text": run.final_text,
        "error": run.error,
        "cancel_reason": run.cancel_reason,
        "approvals": [],
        "result": None,
        **run.spending(),
        "source": "store",
        "events": events,
    }


@dataclass(frozen=True)
class FoundRun:
    """A run as the server answers for it (:meth:`RunRegistry.find`): the one it holds, or the store's record."""

    handle: RunHandle | None
    stored: JournaledRun | None
    """The store's record when it was read (``None`` for a run running here, or without a store)."""

    @property
    def held(self) -> bool:
        """The handle is the truth (it runs here, or the store agrees with it); else the store's record is (always
        for a run another replica took over: its handle here is stale)."""
        handle, stored = self.handle, self.stored
        if handle is not None and handle.moved and stored is not None:
            return False
        return handle is not None and (stored is None or not continued_since(handle, stored))


def continued_since(handle: RunHandle, stored: JournaledRun) -> bool:
    """Whether another process continued ``handle``'s run since it stopped here (``teamrun answer``, ``resume``,
    another server): the store says another status, or a later attempt (one that may have stopped as this one
    did, waiting again)."""
    later = handle.attempt is not None and stored.attempts != handle.attempt
    return later or stored.shown_status() != handle.state


def reconciled(handle: RunHandle) -> bool:
    """Whether what ``handle`` says of its run must be checked against the store: it ran and stopped here (over,
    or waiting), so another process (``teamrun answer``, ``resume``, another server) may have continued it since;
    or another replica took it over (it may still be stopping here); or it could not continue here without a
    person's say (``teamrun resume --yes`` may continue it elsewhere)."""
    return handle.moved or (handle.finished and (handle.result is not None or handle.needs_confirmation))


@dataclass(frozen=True)
class CancelAnswer:
    """What a request to cancel a run came to (:meth:`RunRegistry.request_cancel`)."""

    outcome: Literal["cancelling", "ended", "over", "elsewhere", "waiting", "not_found"]
    """``cancelling``: it runs here and is told to stop; ``ended``: it waited for people and the store ended it;
    ``over``: nothing to cancel; ``elsewhere``: another server process on the same store runs it; ``waiting``:
    it waits for people and there is no store to end it in; ``not_found``: no such run of the teams asked."""
    handle: RunHandle | None = None
    stored: JournaledRun | None = None
    """The store's record as the decision left it (read when the run was not running here)."""
    status: str = ""
    """The run's status as decided (``over``: the status it is over with)."""


class RunRegistry:
    """The server's runs: starts them within the concurrency limit, finds, cancels and stops them."""

    def __init__(
        self,
        *,
        max_concurrent: int = 20,
        keep_finished: int = 1000,
        retry_after_s: int = 1,
        approval_timeout_s: float = DEFAULT_APPROVAL_TIMEOUT_S,
        approval_on_timeout: OnTimeout = "deny",
        store: Store | None = None,
        content: bool = False,
    ) -> None:
        self.max_concurrent = max_concurrent
        self.content = content
        """Runs keep their ``llm_io`` events (see :attr:`RunHandle.content`)."""
        self.store = store
        """Where threads are kept; ``None``: no threads, each request is one run."""
        self.approval_timeout_s = approval_timeout_s
        self.approval_on_timeout: OnTimeout = approval_on_timeout
        self.metrics = ServerMetrics()
        self.keep_finished = keep_finished
        self.retry_after_s = retry_after_s
        self.closing = False
        self.id_prefix = "run_"
        """Run ids start with this (a worker of ``serve --workers`` names itself in it)."""
        self._runs: OrderedDict[str, RunHandle] = OrderedDict()
        self._finished: deque[str] = deque()
        """Ids of finished runs still held, oldest first."""
        self._active = 0
        self.reserved = 0
        """Slots held for answered runs about to continue here (serve/answers.py): a new run may not take them."""
        self._deciding: dict[str, tuple[asyncio.Lock, int]] = {}
        """A lock per run while an answer or a cancel of it is decided (:meth:`deciding`), and how many hold or
        wait for it."""
        self.when_over: list[Callable[[RunHandle], None]] = []
        """Called on the loop as each run ends or suspends (with a store: its events are kept, serve/history.py)."""
        self.owning: Callable[[str], Awaitable[None]] | None = None
        """With replicas on one store (serve/replicas.py): takes the run's lease before it runs or continues here."""
        self.forward_cancel: Callable[[str, str], Awaitable[bool]] | None = None
        """With replicas: leaves a cancel for the replica that runs a run (whether one does)."""
        self.confirm_owner: Callable[[str], Awaitable[None]] | None = None
        """With replicas: checks in the store that a run running here still holds its lease (one another replica
        took is marked :attr:`RunHandle.moved`), before this server answers for it."""
        self.finish_on_stop = False
        """On SIGTERM, stop taking runs and let those in progress finish (replicas hand the rest over as the server
        stops) instead of cancelling them at once."""

    @property
    def replicated(self) -> bool:
        """This server is one replica of several on its store (``--lease``): a run may run on another one."""
        return self.owning is not None

    @property
    def active(self) -> int:
        """Runs in progress."""
        return self._active

    def get(self, run_id: str) -> RunHandle | None:
        return self._runs.get(run_id)

    def held(self) -> list[RunHandle]:
        """The runs this server holds (running, and the latest :attr:`keep_finished` finished ones), oldest first."""
        return list(self._runs.values())

    async def find(self, run_id: str) -> FoundRun:
        """``run_id`` as this server answers for it: the handle it holds while the run runs here; once it stopped
        here, the store's record too, which wins when they differ (another process continued it since)."""
        handle = self._runs.get(run_id)
        if handle is not None and not handle.finished and not handle.moved and self.confirm_owner is not None:
            await self.confirm_owner(run_id)  # another replica may have taken it before the heartbeat noticed
        if handle is not None and (self.store is None or not reconciled(handle)):
            return FoundRun(handle, None)
        stored = await asyncio.to_thread(self.stored, run_id) if self.store is not None else None
        return FoundRun(handle, stored)

    def stored(self, run_id: str) -> JournaledRun | None:
        """The store's record of a run this server no longer holds (blocking); ``None`` without a store."""
        if self.store is None:
            return None
        from teamrun.store.journal import StoreJournal

        return StoreJournal(self.store).get_run(run_id)

    @asynccontextmanager
    async def deciding(self, run_id: str) -> AsyncIterator[None]:
        """Hold ``run_id`` while an answer or a cancel of it is decided and applied: in this process one waits for
        the other (across processes the store's transactions decide)."""
        lock, users = self._deciding.get(run_id) or (asyncio.Lock(), 0)
        self._deciding[run_id] = (lock, users + 1)
        try:
            async with lock:
                yield
        finally:
            lock, users = self._deciding[run_id]
            if users == 1:
                del self._deciding[run_id]
            else:
                self._deciding[run_id] = (lock, users - 1)

    @contextmanager
    def slot_for(self, run_id: str) -> Iterator[None]:
        """A run slot for ``run_id`` to continue in once answered, reserved until it has started again
        (:meth:`continuing`): refused like a new run (:class:`ServerBusy`, :class:`ShuttingDown`) when the server
        has none. A run still running here continues in its own slot."""
        handle = self._runs.get(run_id)
        if handle is not None and not handle.finished:
            yield
            return
        if self.closing:
            raise ShuttingDown("the server is shutting down")
        if self._active + self.reserved >= self.max_concurrent:
            self.metrics.rejected.labels("busy").inc()
            raise ServerBusy(f"all {self.max_concurrent} run slots are in use")
        self.reserved += 1
        try:
            yield
        finally:
            self.reserved -= 1

    def continuing(
        self,
        team: Team,
        redactor: Redactor,
        *,
        run_id: str,
        input: str,
        thread: str | None,
        created: float | None = None,
        attempts: int | None = None,
    ) -> RunHandle:
        """The handle of a waiting run about to continue here (claimed in the store), running from now on: the
        one held (its events so far stay; the continuation's follow them), else a new one with the same id,
        ``created`` when the run first started (its stored ``started_at``: a continuation is not a new run).
        ``attempts``: the stored record's, as claimed; a held handle of an earlier attempt stopped before another
        process continued the run, so a new handle takes its place (as after a restart: the events kept of the run
        come first, this continuation's are kept as its next part, never over the old handle's); so does a held
        handle of a run another replica took over from this one since (it resumed the journal: a later attempt).
        Takes a run slot (the caller holds one reserved). Synchronous: nothing sees it half-continued."""
        handle = self._runs.get(run_id)
        if handle is not None and attempts is not None and handle.attempt not in (None, attempts):
            _log.info("serve_run_continued_elsewhere_since", run=run_id, held=handle.attempt, stored=attempts)
            stale = self._runs.pop(run_id)
            handle = RunHandle(
                id=run_id, team=team.name, input=input, redactor=redactor, thread=thread, content=self.content
            )
            handle.created = created if created is not None else stale.created
            handle.note("run_continued", {"ts": time.time()})  # after the events of the process that continued it
            self._runs[run_id] = handle
        elif handle is None:  # waited through a restart (or dropped from memory)
            handle = RunHandle(
                id=run_id, team=team.name, input=input, redactor=redactor, thread=thread, content=self.content
            )
            if created is not None:
                handle.created = created
            self._runs[run_id] = handle
        else:  # (one that moved away and comes back, its attempt unchanged, executes here again: not moved)
            handle.result, handle.error, handle._done = None, None, asyncio.Event()
            handle.cancel, handle.cancel_reason, handle.failure = asyncio.Event(), None, None
            handle.ended_at, handle.moved, handle.lost_at = None, False, None
            handle.note("run_continued", {"ts": time.time()})
        if run_id in self._finished:
            self._finished.remove(run_id)
        handle._loop = asyncio.get_running_loop()
        handle._loop_thread = threading.get_ident()
        self._active += 1
        self.metrics.run_started(team.name)
        return handle

    def start(
        self,
        team: Team,
        input: str,
        *,
        redactor: Redactor,
        thread: str | None = None,
        limits: Limits | None = None,
        vars: Mapping[str, Any] | None = None,
        resource: str | None = None,
    ) -> RunHandle:
        """Start ``team`` on ``input`` (as a turn of ``thread``, for ``resource``, under the request's ``limits`` and
        ``vars``)
        now, or raise :class:`ServerBusy` / :class:`ShuttingDown` (:class:`NoThreads` for a thread without a
        store). ``limits`` were checked by :func:`check_budgets`.

        Synchronous up to the task's creation, so the slot check and the slot taken are one step.
        """
        if thread is not None and self.store is None:
            raise NoThreads(
                "this server keeps no threads (start it with --store PATH|URL); without a store each request is one run"
            )
        if self.closing:
            self.metrics.rejected.labels("shutting_down").inc()
            raise ShuttingDown("the server is shutting down")
        if self._active + self.reserved >= self.max_concurrent:
            self.metrics.rejected.labels("busy").inc()
            raise ServerBusy(f"all {self.max_concurrent} run slots are in use")
        handle = RunHandle(
            id=f"{self.id_prefix}{uuid.uuid4().hex[:16]}",
            team=team.name,
            input=input,
            redactor=redactor,
            thread=thread,
            resource=resource,
            content=self.content,
        )
        handle._loop = asyncio.get_running_loop()
        handle._loop_thread = threading.get_ident()
        self._active += 1
        self.metrics.run_started(team.name)
        self._runs[handle.id] = handle
        if self.store is not None:  # questions and approvals wait in the store: the run may suspend
            desk, approver = store_people(self.store, handle)
        else:  # tool calls needing approval ask over HTTP; questions find nobody (the team's desk)
            desk = None
            approver = HttpApprover(handle, timeout_s=self.approval_timeout_s, on_timeout=self.approval_on_timeout)
        handle.task = asyncio.create_task(
            self.run_to_end(team, handle, limits=limits, vars=vars, approver=approver, desk=desk),
            name=f"teamrun-serve:{handle.id}",
        )
        self._forget_old()
        return handle

    async def run_to_end(
        self,
        team: Team,
        handle: RunHandle,
        *,
        limits: Limits | None,
        vars: Mapping[str, Any] | None,
        approver: Approver,
        desk: PersonDesk | None,
        journal: RunJournal | None = None,
        owned: bool = False,
    ) -> None:
        """Run ``team`` for ``handle`` to its end and settle the handle (also a waiting run continued here,
        ``journal`` its resume journal: :mod:`teamrun.serve.answers`). ``owned``: its lease is taken already (a
        run taken over from another replica)."""

        def measure(event: Event) -> None:
            self.metrics.on_event(team.name, event)

        if self.store is not None:  # the attempt its journal records (a continuation's resume journal counted it)
            handle.attempt = journal.record.attempts if journal is not None else 1
        try:
            if self.owning is not None and not owned:
                await self.owning(handle.id)
            handle.result = await team.run(
                handle.input,
                subscribers=[handle, measure],  # the handle: its events, and the secrets they must mask
                cancel=handle.cancel,
                thread=handle.thread,
                resource=handle.resource,
                # the run's record in the store (the team's, since create_app); a continued run's, its journal
                journal=journal if journal is not None else self.store is not None,
                limits=limits,
                vars=vars,
                approver=approver,
                desk=desk,
                run_id=handle.id,  # one id per run: the one this server answers with, in its events and record
            )
            if handle.failure is not None:  # stopped by the server (an approval timed out), not by the client
                handle.result.status, handle.result.error = "failed", handle.failure
        except UsageError as exc:  # the request's own doing: a thread id of another team...
            from teamrun.engine.durability.threads import ThreadOfAnotherResource, ThreadOfAnotherTeam

            handle.error = handle.redactor.text(str(exc))
            handle.refused = True
            handle.refused_thread = isinstance(exc, ThreadOfAnotherTeam)
            handle.refused_resource = isinstance(exc, ThreadOfAnotherResource)
        except Exception as exc:  # Team.run returns a result whatever happens; this is the model's setup
            if getattr(exc, "stops_run", False):  # another replica took the run: it goes on there
                handle.lose()
                handle.moved = True
            else:  # (a moved run was said as its writes were refused)
                _log.warning("serve_run_error", run=handle.id, error=str(exc), error_type=type(exc).__name__)
            handle.error = handle.redactor.text(str(exc)) if isinstance(exc, TeamrunError) else "internal error"
        finally:
            self.settle(team, handle)

    def settle(self, team: Team, handle: RunHandle) -> None:
        """``handle``'s run stopped (it ended, suspended, or could not continue): its slot is free."""
        handle.ended_at = time.time()
        self._active -= 1
        self.metrics.run_finished(team.name, handle.result)
        self._finished.append(handle.id)
        handle._done.set()
        handle._wake()
        for hook in self.when_over:
            hook(handle)

    def cancel(self, run_id: str, reason: str = "cancelled by request") -> RunHandle | None:
        handle = self._runs.get(run_id)
        if handle is not None and not handle.finished and not handle.cancel.is_set():
            handle.cancel_reason = reason
            if self.store is not None:  # a replica's run: its outcome's write records the reason for every replica
                self.store.fences.cancelled(run_id, reason)
            handle.cancel.set()
        return handle

    async def cancel_waiting(self, run_id: str, reason: str) -> Literal["ended", "continued"] | None:
        """Cancel a run that waits for people (the runs API's cancel and A2A's CancelTask alike).

        ``"ended"``: the store recorded it cancelled and its pending items expired (one conditional write on its
        waiting status; a handle held here says ``cancelled`` too). ``"continued"``: an answer continued it here
        first, and that continuation is cancelled. ``None``: it waits no more for another reason (over, or
        continued elsewhere). Needs a store: nothing waits without one.
        """
        from teamrun.store.pending import PendingRepository

        assert self.store is not None
        ended = await asyncio.to_thread(PendingRepository(self.store).cancel_waiting, run_id, reason=reason)
        handle = self._runs.get(run_id)
        if ended is not None:
            _log.info("serve_waiting_run_cancelled", run=run_id, items=ended)
            if handle is not None and handle.result is not None and handle.state == "waiting":
                handle.result.status, handle.result.error = "cancelled", reason
                handle.result.stopped_by = None  # it waits no more: the reason is the error
                handle.cancel_reason = reason
                handle.ended_at = time.time()  # it ended now, not when it began to wait
            return "ended"
        if handle is not None and not handle.finished:
            self.cancel(run_id, reason)
            return "continued"
        return None

    async def request_cancel(
        self, run_id: str, *, teams: Container[str], reason: str, waiting_reason: str
    ) -> CancelAnswer:
        """A request to cancel ``run_id`` (a run of one of ``teams``), decided once for the runs API and A2A.

        A run in progress here is cancelled (``reason``); one waiting for people is ended in the store
        (``waiting_reason``, :meth:`cancel_waiting`); anything else is said as it is, for the caller to refuse
        in its own protocol's words.
        """
        async with self.deciding(run_id):  # an answer of it decided meanwhile goes first, or after
            return await self._cancel_request(run_id, teams=teams, reason=reason, waiting_reason=waiting_reason)

    async def _cancel_request(
        self, run_id: str, *, teams: Container[str], reason: str, waiting_reason: str
    ) -> CancelAnswer:
        handle = self._runs.get(run_id)
        if handle is not None and handle.team not in teams:
            return CancelAnswer("not_found")
        if handle is not None and not handle.finished and not handle.moved and self.confirm_owner is not None:
            await self.confirm_owner(run_id)  # taken by another replica: the cancel goes there
        if handle is not None and not handle.finished and not handle.moved:  # (a moved one: where it runs now)
            self.cancel(run_id, reason)
            return CancelAnswer("cancelling", handle, status="running")
        if handle is not None and handle.state != "waiting" and (self.store is None or not reconciled(handle)):
            return CancelAnswer("over", handle, status=handle.state)
        # waiting for people (nothing of it runs: the store ends it), stopped here (another process may have
        # continued it since: the store says where it is), or known only from the store
        stored = await asyncio.to_thread(self.stored, run_id)
        if handle is None and (stored is None or stored.team not in teams):
            return CancelAnswer("not_found")
        status = stored.shown_status() if stored is not None else "waiting"
        if status == "waiting" and self.store is not None:
            outcome = await self.cancel_waiting(run_id, waiting_reason)
            handle = self._runs.get(run_id)
            if outcome == "continued":
                return CancelAnswer("cancelling", handle, status="running")
            stored = await asyncio.to_thread(self.stored, run_id)
            if outcome == "ended":
                return CancelAnswer("ended", handle, stored, status="cancelled")
            status = stored.shown_status() if stored is not None else "unknown"
        if status == "waiting":  # without a store nothing waits there: it cannot be ended
            return CancelAnswer("waiting", handle, stored, status=status)
        if status == "running" and self.forward_cancel is not None and await self.forward_cancel(run_id, reason):
            return CancelAnswer("cancelling", handle, stored, status=status)  # its replica applies it shortly
        if status == "running":  # continued by another server process on the same store (`teamrun answer`...)
            return CancelAnswer("elsewhere", handle, stored, status=status)
        return CancelAnswer("over", handle, stored, status=status)

    def stopping(self, reason: str) -> None:
        """The server was asked to stop (SIGTERM): cancel every run (:meth:`cancel_all`), or, with
        :attr:`finish_on_stop`, only stop taking new ones."""
        if self.finish_on_stop:
            self.closing = True
        else:
            self.cancel_all(reason)

    def cancel_all(self, reason: str) -> None:
        """Stop taking runs and cancel every one in progress (graceful shutdown)."""
        self.closing = True
        for run_id in list(self._runs):
            self.cancel(run_id, reason)

    async def drain(self) -> None:
        """Wait for every run's task to finish (after :meth:`cancel_all`)."""
        tasks = [h.task for h in self._runs.values() if h.task is not None and not h.task.done()]
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)

    def let_go_of(self, resource: str, run_ids: Container[str] = ()) -> list[str]:
        """Stop holding the ended runs of ``resource`` (or among ``run_ids``: a forget found them in the journals)
        after ``DELETE /v1/memory/{resource}``: what they hold in memory (events, workspace, result) is not served
        again; with a store they are answered from it, redacted. A run still running is kept."""
        ended = [h.id for h in self._runs.values() if (h.resource == resource or h.id in run_ids) and h.finished]
        for run_id in ended:
            self._runs.pop(run_id, None)
            if run_id in self._finished:
                self._finished.remove(run_id)
        return ended

    def _forget_old(self) -> None:
        while len(self._finished) > self.keep_finished:
            self._runs.pop(self._finished.popleft(), None)


def store_people(store: Store, handle: RunHandle) -> tuple[PersonDesk, Approver]:
    """The desk and approver of a served run (``handle``) when the server has a store: questions and approvals
    become pending items in ``store`` and the run may suspend (listed and answered by
    :mod:`teamrun.serve.routes.pending` through :mod:`teamrun.serve.answers`). Each is this run's own, given to
    :meth:`Team.run`. What an item shows is masked with the run's redactor (the team's secrets, the server's
    tokens) before it is stored."""
    from teamrun.engine.durability.pending import SuspendingDesk
    from teamrun.store.pending import PendingRepository
    from teamrun.tools.people import DeskApprover

    desk = SuspendingDesk(PendingRepository(store), mask=lambda value: handle.redactor.value(value))
    return desk, DeskApprover(desk)
