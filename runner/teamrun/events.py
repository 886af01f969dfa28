"""Typed events the engine emits while a team runs.

One :class:`EventBus` per run; the console view, the trace file, the logs,
OpenTelemetry and the testing helpers are subscribers, not separate code
paths. Each kind of event is a small frozen dataclass (``RunStart``,
``LlmRetry``, ...): subscribers read typed attributes (``event.status``,
``event.usage``) and can keep, serialise or drop events.

The engine emits by kind name with keyword data, and the bus builds the typed
event — a misspelt or missing field raises :class:`TypeError` right there::

    bus.emit("tool_end", span_id="s7", parent_span_id="s3", agent_path=("lead",),
             tool="grep", status="ok", chars=120)

Code that builds an event itself hands it to :meth:`EventBus.publish`.
:data:`EVENT_TYPES` maps each kind to its class, so a trace file's lines can
be turned back into typed events (:func:`event_from_record`).

Spans: ``span_id`` names the span an event opens, closes or belongs to;
``parent_span_id`` names the enclosing span. Spans nest run → agent
(supervisor) → delegation → agent (worker) → llm / tool: a worker's agent span
is a child of the delegation span that started it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import time as _time
import weakref
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal, TypeVar

from teamrun.logs import get_logger

__all__ = [
    "BASE_FIELDS",
    "EVENT_TYPES",
    "AcceptCheck",
    "AgentEnd",
    "AgentStart",
    "BoardOp",
    "Budget",
    "DelegationEnd",
    "DelegationStart",
    "Event",
    "EventBus",
    "EventKind",
    "Hook",
    "LlmEnd",
    "LlmIO",
    "LlmRetry",
    "LlmStart",
    "LlmWait",
    "MemoryRecall",
    "MemorySave",
    "RemoteUpdate",
    "RunEnd",
    "RunStart",
    "RunWarning",
    "Subscriber",
    "ToolEnd",
    "ToolStart",
    "WorkspaceWrite",
    "content_fields",
    "event_from_record",
]

EventKind = Literal[
    "run_start",
    "run_end",
    "agent_start",
    "agent_end",
    "llm_start",
    "llm_end",
    "llm_retry",
    "llm_wait",
    "llm_io",
    "tool_start",
    "tool_end",
    "delegation_start",
    "delegation_end",
    "hook",
    "budget",
    "warning",
    "accept",
    "person_asked",
    "person_answered",
    "workspace_write",
    "board_op",
    "remote_update",
    "memory_recall",
    "memory_save",
]

_log = get_logger(__name__)

_CONTENT = {"content": True}
"""Field metadata: the field carries prompts, answers or tool payloads (kept out of traces and
logs unless content is asked for)."""


def _usage() -> dict[str, int]:
    return {}


@dataclass(frozen=True, kw_only=True)
class Event:
    """Something that happened in a run, placed in the span tree. Each kind is a subclass."""

    kind: ClassVar[str] = ""
    """The kind name (``"run_start"``, ``"llm_retry"``...): what :meth:`EventBus.emit` takes."""

    run_id: str
    """The run this event belongs to."""
    span_id: str
    """The span this event opens, closes or happens in."""
    parent_span_id: str | None
    """The enclosing span (``None`` for the run itself and for events that only name their span)."""
    agent_path: tuple[str, ...]
    """Supervisor first, then each worker down to the one this event is about (empty for the run)."""
    time: float = field(default_factory=_time.monotonic)
    """``time.monotonic()`` when the event was emitted."""

    @property
    def depth(self) -> int:
        """0 for the supervisor, 1 for its workers...; -1 for run events."""
        return len(self.agent_path) - 1

    @property
    def agent(self) -> str:
        """The agent this event is about (last of :attr:`agent_path`)."""
        return self.agent_path[-1] if self.agent_path else ""

    @property
    def data(self) -> dict[str, Any]:
        """The kind-specific fields that have a value (``None`` left out), as a dict: what a trace
        line's ``data`` holds."""
        return {name: value for name in _own_fields(type(self)) if (value := getattr(self, name)) is not None}


BASE_FIELDS = frozenset({"run_id", "span_id", "parent_span_id", "agent_path", "time"})
"""Fields every event has; the rest are the kind's own."""

EVENT_TYPES: dict[str, type[Event]] = {}
"""Kind name → event class."""

E = TypeVar("E", bound=type[Event])


def _kind(name: str) -> Callable[[E], E]:
    def register(cls: E) -> E:
        cls.kind = name
        EVENT_TYPES[name] = cls
        return cls

    return register


# -- the run ----------------------------------------------------------------------------------


@_kind("run_start")
@dataclass(frozen=True, kw_only=True)
class RunStart(Event):
    """The run begins (``span_id`` is the run span)."""

    team: str
    """The team's name."""
    input: str = field(default="", metadata=_CONTENT)
    """The task given to the supervisor (content)."""


@_kind("run_end")
@dataclass(frozen=True, kw_only=True)
class RunEnd(Event):
    """The run is over, whatever happened."""

    status: str
    """``done``, ``failed``, ``budget_exhausted`` or ``cancelled``."""
    stopped_by: str | None = None
    """The limit (or ``interrupted``) that stopped the run."""
    usage: Mapping[str, int] = field(default_factory=_usage)
    """Tokens and requests of the whole run (``input_tokens``, ``output_tokens``, ``total_tokens``...)."""
    cost: float = 0.0
    """USD, from LiteLLM's price table."""
    duration_s: float = 0.0
    """Wall time of the run."""


# -- agents -----------------------------------------------------------------------------------


@_kind("agent_start")
@dataclass(frozen=True, kw_only=True)
class AgentStart(Event):
    """An agent invocation begins (the supervisor's parent is the run span, a worker's its delegation span)."""

    model: str
    """The LiteLLM model string this agent uses."""
    task: str = field(default="", metadata=_CONTENT)
    """What it was asked (content); ``(handoff)`` when it takes over a conversation."""


@_kind("agent_end")
@dataclass(frozen=True, kw_only=True)
class AgentEnd(Event):
    """An agent invocation ends."""

    status: str
    """``ok``, ``budget_exhausted``, ``handed_off``, ``cancelled``, ``waiting`` (its run suspended for a person)
    or ``error``."""
    usage: Mapping[str, int] = field(default_factory=_usage)
    """Tokens this invocation used."""
    cost: float | None = 0.0
    """USD this invocation spent; ``None`` when it is not known (``usage_known`` false)."""
    stopped_by: str | None = None
    """The limit that stopped it, if one did."""
    usage_known: bool = True
    """False for a remote (``a2a:``) worker that reported no (countable) usage: ``usage`` is then ``{}`` and
    ``cost`` is ``None`` (not known, not 0)."""

    @property
    def data(self) -> dict[str, Any]:
        """As :attr:`Event.data`, but an unknown ``cost`` stays, as ``null``: said, never left to a reader's 0."""
        shown = super().data
        if not self.usage_known and self.cost is None:
            shown["cost"] = None
        return shown


@_kind("budget")
@dataclass(frozen=True, kw_only=True)
class Budget(Event):
    """A limit was reached (or a hook said stop): the agent gets one last turn without tools."""

    reason: str
    """What was reached, e.g. ``agents.lead.budget.max_steps (4)``."""
    limit: str | None = None
    """The limit's path in the team file (``agents.lead.budget.max_steps``); ``None`` when a hook said stop."""
    value: float | None = None
    """The limit's value."""


@_kind("warning")
@dataclass(frozen=True, kw_only=True)
class RunWarning(Event):
    """Something went wrong without stopping the run (an unknown worker name, a missing reference...)."""

    message: str
    """What happened, for people."""


@_kind("hook")
@dataclass(frozen=True, kw_only=True)
class Hook(Event):
    """A delegation hook acted (``status: ok``) or failed (``status: error``)."""

    hook: str
    """Which hook: ``on_start[0]``, ``on_complete[1]``..."""
    status: str
    """``ok`` or ``error``."""
    target: str = ""
    """The worker the hook ran for."""
    agent: str = ""
    """The agent whose delegation settings hold the hook (the delegating agent)."""
    actions: Sequence[str] = ()
    """Names of the actions it took (``reject``, ``append_prompt``, ``bail``...)."""
    message: str | None = None
    """The error, when it failed."""


# -- model calls ------------------------------------------------------------------------------


@_kind("llm_start")
@dataclass(frozen=True, kw_only=True)
class LlmStart(Event):
    """A model call begins (its own span, child of the agent's)."""

    model: str
    """The LiteLLM model string."""
    messages: int = 0
    """How many messages are sent."""


@_kind("llm_end")
@dataclass(frozen=True, kw_only=True)
class LlmEnd(Event):
    """A model call ends."""

    status: str
    """``ok`` or ``error`` (``error: cancelled`` when a cancel cut the call off)."""
    usage: Mapping[str, int] = field(default_factory=_usage)
    """Tokens of this call."""
    cost: float = 0.0
    """USD of this call."""
    tool_calls: Sequence[str] = ()
    """Names of the tools the model called."""
    error: str | None = None
    """Why it failed (after retries)."""
    finish_reason: str | None = None
    """Why the model stopped writing: ``stop``, ``tool_calls``, ``length`` (cut off at ``max_tokens``)..."""
    usage_known: bool | None = None
    """``False`` when the provider's usage figures were malformed: ``usage`` and ``cost`` are not known."""
    model: str | None = None
    """For an agent with ``fallbacks``: the model of its list that answered."""
    fallback: str | None = None
    """When a fallback answered: ``"openai/b after openai/a failed: server error (HTTP 500)"``."""
    waited_s: float | None = None
    """Seconds the call waited for its model's rate limit (``llm_wait``), not the model's time."""


@_kind("llm_retry")
@dataclass(frozen=True, kw_only=True)
class LlmRetry(Event):
    """A model request failed with a transient error and will be retried (``span_id``: the model call)."""

    attempt: int
    """The attempt that failed (1-based)."""
    max_attempts: int
    """Attempts allowed in all."""
    delay_s: float
    """Seconds before the next attempt."""
    error: str
    """Why the attempt failed."""
    status_code: int | None = None
    """The provider's HTTP status, if there was one."""


@_kind("llm_wait")
@dataclass(frozen=True, kw_only=True)
class LlmWait(Event):
    """A model request waits for a slot of its model's rate limit, shared by the process (``span_id``: the model
    call); the wait is not the model's time."""

    model: str
    """The model (and so the limit) waited for."""
    seconds: float
    """How long it waits."""
    reason: str
    """``requests_per_minute``, ``tokens_per_minute`` or ``retry_after`` (a 429 this or another run got)."""


@_kind("llm_io")
@dataclass(frozen=True, kw_only=True)
class LlmIO(Event):
    """What a model call sent and got back; only with content on (``--trace-content``)."""

    turn: int
    """1-based model call number within the agent invocation."""
    new_messages: Sequence[Mapping[str, Any]] = field(default=(), metadata=_CONTENT)
    """The messages this call adds to the conversation (after the last assistant message)."""
    reply: Mapping[str, Any] = field(default_factory=dict, metadata=_CONTENT)
    """``{"text": ..., "tool_calls": [{"name", "arguments"}]}``."""


# -- tools and delegations --------------------------------------------------------------------


@_kind("tool_start")
@dataclass(frozen=True, kw_only=True)
class ToolStart(Event):
    """A tool call begins (its own span, child of the agent's)."""

    tool: str
    """The tool's name."""


@_kind("tool_end")
@dataclass(frozen=True, kw_only=True)
class ToolEnd(Event):
    """A tool call ends."""

    tool: str
    """The tool's name."""
    status: str
    """``ok`` or ``error`` (``error: cancelled`` when a cancel cut the call off), or ``waiting`` (``error: waiting
    for a person``) when the run suspended for a person while the call waited (a ``person:`` tool, an approval)."""
    error: str | None = None
    """What went wrong (also what the model was told)."""
    chars: int = 0
    """Length of the result handed to the model."""


@_kind("delegation_start")
@dataclass(frozen=True, kw_only=True)
class DelegationStart(Event):
    """An agent hands a task to a worker (its own span, child of the delegating agent's)."""

    worker: str
    """The worker's name."""
    task: str = field(default="", metadata=_CONTENT)
    """The task as the model wrote it (content)."""
    step: str | None = None
    """The workflow step it runs (``research[2]``, ``review#1/writer``); ``None`` for an agent's delegation."""


@_kind("delegation_end")
@dataclass(frozen=True, kw_only=True)
class DelegationEnd(Event):
    """A delegation ends: the worker answered, failed, or was refused before it started."""

    worker: str
    """The worker's name."""
    status: str
    """``ok``, ``error``, ``rejected``, ``budget_exhausted``, ``cancelled``, or ``waiting`` (``error: waiting for a
    person``) when the run suspended for a person while the worker waited (a question, an A2A ``input-required``)."""
    usage: Mapping[str, int] = field(default_factory=_usage)
    """Tokens the worker used."""
    cost: float = 0.0
    """USD the worker spent."""
    error: str | None = None
    """Why it did not succeed."""


# -- acceptance checks ------------------------------------------------------------------------


@_kind("accept")
@dataclass(frozen=True, kw_only=True)
class AcceptCheck(Event):
    """An agent's answer was checked against its ``accept:`` checks (and, for the run's final answer, the team's)."""

    status: str
    """``passed``; ``retry`` (a check failed: the agent gets feedback and answers again); ``failed`` (a check
    failed and no attempt is left: the answer is delivered as it is)."""
    attempt: int
    """The answer checked (1-based)."""
    max_attempts: int
    """Answers allowed."""
    check: str | None = None
    """The first check that failed."""
    detail: str | None = None
    """Why it failed."""
    source: str | None = None
    """Where the failed check is declared: ``agents.<name>.accept`` or ``accept`` (the team's)."""


# -- people in the loop -----------------------------------------------------------------------


@_kind("person_asked")
@dataclass(frozen=True, kw_only=True)
class PersonAsked(Event):
    """An agent asked a person a question, or a tool call waits for a person's approval."""

    item: str
    """The pending item's id in the run (``q1``, ``a2``; empty when asked on a terminal)."""
    item_kind: str
    """``question`` or ``approval``."""
    tool: str
    """The person tool that asked, or the tool waiting for approval."""
    question: str = field(default="", metadata=_CONTENT)
    """The question (content)."""


@_kind("person_answered")
@dataclass(frozen=True, kw_only=True)
class PersonAnswered(Event):
    """A person answered a pending item (or it expired)."""

    item: str
    """The pending item's id in the run."""
    item_kind: str
    """``question`` or ``approval``."""
    tool: str
    """The person tool that asked, or the tool that waited for approval."""
    by: str
    """Who answered (``terminal``, a name given with ``teamrun answer --by``, the user and host by default;
    ``nobody`` when it expired)."""
    answered_at: float
    """When (Unix time)."""
    status: str
    """``answered`` or ``expired``."""
    answer: Any = field(default=None, metadata=_CONTENT)
    """The answer (content; ``***`` when the person tool is marked ``secret``)."""


# -- the workspace ------------------------------------------------------------------------------


@_kind("workspace_write")
@dataclass(frozen=True, kw_only=True)
class WorkspaceWrite(Event):
    """An agent wrote a workspace entry: applied or refused, and why (``span_id``: its tool call's span)."""

    entry: str
    """The workspace entry written."""
    rule: str
    """Its merge rule: ``replace``, ``append``, ``merge``, ``max``, ``min`` or ``sum``."""
    status: str
    """``applied`` or ``refused``."""
    version_before: int
    """The entry's version when the write arrived."""
    version_after: int
    """Its version after (the same when refused or when nothing changed)."""
    reason: str | None = None
    """Why it was refused: ``stale``, ``conflict``, ``schema``, ``size``, ``permission`` or ``arguments``."""
    message: str = ""
    """What happened, for people (never the value: that is :attr:`value_after`)."""
    replayed: bool = False
    """True when a resumed run answered the call from the journal (the write was applied by an earlier attempt)."""
    step: str | None = None
    """A workflow step's ``write:`` (the writer is ``workflow``): the step's id; ``None`` for an agent's tool call."""
    value_after: Any = field(default=None, metadata=_CONTENT)
    """The entry's value after an applied write (content: in traces only with ``--trace-content``); ``None``
    for a refused one."""


@_kind("board_op")
@dataclass(frozen=True, kw_only=True)
class BoardOp(Event):
    """An operation on a board (a ``kind: board`` workspace entry): post, claim, complete, release, expire."""

    entry: str
    """The board."""
    op: str
    """``post``, ``claim``, ``complete``, ``release`` (by its claimant) or ``expire`` (a lease ran out, or its
    claimant ended)."""
    task_id: str | None = None
    """The task (none for a refused claim or post)."""
    status: str
    """``applied`` or ``refused``."""
    version_before: int
    """The board's version when the operation arrived."""
    version_after: int
    """Its version after (the same when refused)."""
    reason: str | None = None
    """Why it was refused: ``permission``, ``schema``, ``size``, ``arguments``, ``busy``, ``lease``, ``closed``,
    ``empty`` or ``limit``."""
    message: str = ""
    """What happened, for people (never the payload or the result)."""
    replayed: bool = False
    """True when a resumed run answered the call from the journal (applied by an earlier attempt)."""


@_kind("remote_update")
@dataclass(frozen=True, kw_only=True)
class RemoteUpdate(Event):
    """A remote (``a2a:``) worker's task moved on: a status update or an artifact chunk it streamed, in the
    worker's agent span."""

    url: str
    """The remote agent's URL (as the team file gives it)."""
    task_id: str
    """The task's id at the remote agent."""
    state: str
    """The task's state: ``submitted``, ``working``, ``input-required``, ``completed``, ``failed``,
    ``rejected``, ``canceled``, ``auth-required``."""
    update: str
    """``task`` (the task as sent back), ``status`` or ``artifact``."""
    text: str = field(default="", metadata=_CONTENT)
    """The status message's or artifact chunk's text (content)."""
    chars: int = 0
    """Characters of that text (shown even when content is not)."""
    reattached: bool = False
    """True when a resumed run picked up the task an earlier attempt started (not sent again)."""


# -- long-term memory ---------------------------------------------------------------------------


@_kind("memory_recall")
@dataclass(frozen=True, kw_only=True)
class MemoryRecall(Event):
    """An agent recalled the resource's memories: before its turn (``how: recall``) or with the
    ``memory_search`` tool (``how: search``)."""

    resource: str
    """Whose memories (the run's ``--resource``)."""
    how: str
    """``recall`` (before a turn), ``search`` (the tool) or ``messages`` (before a turn, the messages of the
    resource's other threads a recall with ``messages:`` quoted; ``facts`` holds their texts)."""
    ids: list[str] = field(default_factory=list)
    """The memories (or indexed messages) recalled, best first."""
    scores: list[float] = field(default_factory=list)
    """Their scores (0 to 1), in the same order."""
    replayed: bool = False
    """True when a resumed run took what an earlier attempt recalled from the journal (nothing embedded again)."""
    query: str = field(default="", metadata=_CONTENT)
    """What was searched for (content)."""
    facts: list[str] = field(default_factory=list, metadata=_CONTENT)
    """The facts recalled (content: in traces only with ``--trace-content``)."""


@_kind("memory_save")
@dataclass(frozen=True, kw_only=True)
class MemorySave(Event):
    """An agent saved a fact to the resource's long-term memory with ``memory_save`` (applied or refused)."""

    resource: str
    """Whose memory."""
    status: str
    """``saved``, ``known`` (the same fact was saved before: one memory) or ``refused``."""
    id: str | None = None
    """The memory's id (none when refused)."""
    reason: str | None = None
    """Why it was refused (a fact past the cap, a resource past its cap...)."""
    fact: str = field(default="", metadata=_CONTENT)
    """The fact as saved, secrets masked (content)."""


def content_fields() -> frozenset[str]:
    """Names of the fields, over every kind, that carry content (prompts, answers, payloads)."""
    return frozenset(
        f.name for cls in EVENT_TYPES.values() for f in dataclasses.fields(cls) if f.metadata.get("content")
    )


_OWN_FIELDS: dict[type[Event], tuple[str, ...]] = {}
"""Per event class: the kind's own field names in order (read once per class, not per event)."""


def _own_fields(cls: type[Event]) -> tuple[str, ...]:
    names = _OWN_FIELDS.get(cls)
    if names is None:
        names = _OWN_FIELDS[cls] = tuple(f.name for f in dataclasses.fields(cls) if f.name not in BASE_FIELDS)
    return names


_SHAPES: dict[type[Event], tuple[frozenset[str], frozenset[str]]] = {}
"""Per event class: every field name, and the required ones (read once per class, not per event)."""


def _shape(cls: type[Event]) -> tuple[frozenset[str], frozenset[str]]:
    shape = _SHAPES.get(cls)
    if shape is None:
        names = frozenset(f.name for f in dataclasses.fields(cls))
        required = frozenset(
            f.name
            for f in dataclasses.fields(cls)
            if f.name not in BASE_FIELDS
            and f.default is dataclasses.MISSING
            and f.default_factory is dataclasses.MISSING
        )
        shape = _SHAPES[cls] = (names, required)
    return shape


def _build(kind: str, fields: Mapping[str, Any]) -> Event:
    cls = EVENT_TYPES.get(kind)
    if cls is None:
        raise TypeError(f"unknown event kind {kind!r}; known kinds: {', '.join(sorted(EVENT_TYPES))}")
    names, required = _shape(cls)
    if names.issuperset(fields) and required.issubset(fields):
        return cls(**fields)  # the common case: nothing to report
    own = names - BASE_FIELDS
    unknown = sorted(set(fields) - names)
    missing = sorted(required - set(fields))
    if unknown or missing:
        problems = ([f"unknown field(s) {', '.join(unknown)}"] if unknown else []) + (
            [f"missing field(s) {', '.join(missing)}"] if missing else []
        )
        raise TypeError(f"event {kind!r}: {'; '.join(problems)} (fields: {', '.join(sorted(own))})")
    return cls(**fields)


def event_from_record(record: Mapping[str, Any]) -> Event:
    """Rebuild a typed event from a trace line (or any dict of that shape).

    Fields the line does not have (content left out of the trace) take their
    defaults; fields this version does not know are ignored. Raises
    :class:`TypeError` for an unknown kind or a missing required field.
    """
    kind = str(record.get("kind"))
    cls = EVENT_TYPES.get(kind)
    if cls is None:
        raise TypeError(f"unknown event kind {kind!r}")
    own = {f.name for f in dataclasses.fields(cls)} - BASE_FIELDS
    data: Mapping[str, Any] = record.get("data") or {}
    values: dict[str, Any] = {k: v for k, v in data.items() if k in own}
    for name in ("usage",):
        if name in values and not isinstance(values[name], Mapping):
            values[name] = {}
    return _build(
        kind,
        {
            **values,
            "run_id": str(record.get("run_id") or ""),
            "span_id": str(record.get("span_id") or ""),
            "parent_span_id": record.get("parent_span_id") or None,
            "agent_path": tuple(record.get("agent_path") or ()),
            "time": float(record.get("time") or 0.0),
        },
    )


Subscriber = Callable[[Event], None]
"""Called with each event of the run. A subscriber that writes events down (a trace, spans, a server's event
list) and masks secrets also has ``keep_secrets(values)``: :meth:`EventBus.keep_secrets` hands it the values
the run learnt are secret (a ``secret: true`` person's answer) before any event can carry them."""


class EventBus:
    """Fans events out to subscribers. A subscriber that fails is dropped (and logged), never fatal."""

    _live: ClassVar[weakref.WeakValueDictionary[str, EventBus]] = weakref.WeakValueDictionary()

    def __init__(self, run_id: str) -> None:
        self.run_id = run_id
        self._subscribers: list[Subscriber] = []
        self._ids = itertools.count(1)
        EventBus._live[run_id] = self

    @classmethod
    def of_run(cls, run_id: str) -> EventBus | None:
        """The bus of a run still in memory, by run id: how code below the engine (a model wrapper
        that knows only the :class:`~teamrun.llm.types.CallScope`) publishes into its run."""
        return cls._live.get(run_id)

    def subscribe(self, subscriber: Subscriber) -> None:
        self._subscribers.append(subscriber)

    def new_span_id(self) -> str:
        return f"s{next(self._ids)}"

    def keep_secrets(self, values: Iterable[str]) -> None:
        """Mask ``values`` in everything this run's subscribers write down from now on: each subscriber with
        a ``keep_secrets(values)`` method gets them (the trace file, the OpenTelemetry exporter, a served
        run's events; log lines carry no content). The model still reads them."""
        values = frozenset(v for v in values if v)
        if not values:
            return
        for subscriber in list(self._subscribers):
            keep = getattr(subscriber, "keep_secrets", None)
            if keep is not None:
                keep(values)

    def emit(
        self,
        kind: EventKind | str,
        *,
        span_id: str,
        parent_span_id: str | None,
        agent_path: tuple[str, ...],
        **data: Any,
    ) -> Event:
        """Build the typed event for ``kind`` from ``data`` and publish it.

        Raises :class:`TypeError` for an unknown kind, an unknown field or a missing required one.
        """
        event = _build(
            kind,
            {
                **data,
                "run_id": self.run_id,
                "span_id": span_id,
                "parent_span_id": parent_span_id,
                "agent_path": tuple(agent_path),
            },
        )
        return self.publish(event)

    def publish(self, event: Event) -> Event:
        """Hand an event built by the caller to every subscriber."""
        for subscriber in list(self._subscribers):
            try:
                subscriber(event)
            except Exception as exc:  # a broken view (say, stderr closed by `| head`) must not break the run
                if subscriber in self._subscribers:
                    self._subscribers.remove(subscriber)
                with contextlib.suppress(Exception):
                    _log.warning("event_subscriber_dropped", subscriber=repr(subscriber), error=str(exc))
        return event
