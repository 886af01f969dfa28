"""A run as one turn of a thread: the earlier turns it sees, the agent it starts with, what it saves.

A thread stores, per turn, the user's message and the final answer (with the
agent that gave it), not the tool traffic in between: that stays in the run.
The next turn starts with the agent the conversation was last handed to
(swarm routing), else the supervisor. A worker with ``memory: thread`` also
sees its own earlier tasks and answers in the thread (never the supervisor's
conversation); other workers start fresh for every delegation.

The team's ``history`` setting trims what a turn sees (the store keeps every
turn): the last ``max_turns`` turns, then the newest that fit in
``max_tokens`` (:data:`DEFAULT_HISTORY_TOKENS` when neither is set). With
``summarize: true`` the turns left out are replaced by a summary, written by
the answering agent's model when more turns drop out and kept in the thread's
``meta`` (``summary: {text, turns}``) so it is not paid for again.

A turn that fails or is cancelled leaves the thread as it was.

A turn that waits for a person (its run ends ``waiting``) keeps where it stood in the thread
(:data:`WAITING_TURNS` in the thread's ``meta``: the last message it saw, how many turns, who answered it):
answered later, its run continues as itself — the same history and first agent, so every call it finished is
answered by the journal — even when other turns came in between. It is then filed after them, its user
message marked with the turn it was asked before.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from teamrun.config.models import History, TeamConfig
from teamrun.engine.workspace.carry import THREAD_META_KEY
from teamrun.errors import ModelError, StoreError, UsageError
from teamrun.llm.types import Message
from teamrun.secrets import unmask

if TYPE_CHECKING:
    from teamrun.engine.result import RunResult
    from teamrun.store import Store
    from teamrun.store.threads import NewMessage, ThreadMessage

Summarise = Callable[[list[Message]], Awaitable[str]]
"""Makes one model call on the summary request's messages; the summary's text (the engine's model-call path)."""

DEFAULT_HISTORY_TOKENS = 20_000
"""The history a turn sees when the team sets no ``history`` limit (estimated tokens)."""

SUMMARY_HEADING = "Summary of the earlier conversation (older turns are not shown):"
SUMMARY_INSTRUCTIONS = (
    "Summarise the conversation below for the assistant who continues it: the user's requests, facts, "
    "decisions and open questions, in at most 200 words. Keep names, numbers and promises exactly. "
    "Start from the earlier summary when there is one."
)
_SAVED = ("done", "budget_exhausted")
"""Statuses of a run whose turn is added to its thread."""
WAITING_TURNS = "waiting_turns"
THREAD_RESOURCE = "resource"
"""The ``meta`` key of the resource a thread belongs to: the first one a run of it was given."""
"""The thread ``meta`` key of the turns whose runs wait for a person: ``{run_id: {seen, turns, starts_with}}``."""


@dataclass
class ThreadSession:
    """One run's view of its thread."""

    store: Store
    thread_id: str
    starts_with: str
    """The agent that answers this turn: the one the conversation was last handed to, else the supervisor."""
    conversation: list[Message]
    """The earlier turns this run sees (after ``history``)."""
    memories: dict[str, list[Message]]
    """Earlier tasks and answers of each worker with ``memory: thread``."""
    policy: History | None = None
    remembered: list[NewMessage] = field(default_factory=list)
    """Worker memory this run adds, saved with the turn."""
    dropped: list[Message] = field(default_factory=list)
    """The earlier turns the ``history`` setting left out, oldest first."""
    summary: dict[str, Any] = field(default_factory=dict)
    """The thread's summary of its oldest turns: ``{text, turns}`` (how many turns it covers)."""
    workspace: Any = None
    """The workspace the thread's latest saved turn ended with (``persist: thread``; see
    :mod:`teamrun.engine.workspace.carry`), else ``None``."""
    run_id: str | None = None
    """The run this turn is (journaled runs: what a turn that waits for a person is kept under)."""
    seen: int = 0
    """The last message (``seq``) of the thread this turn sees."""
    turns_seen: int = 0
    """How many user turns of the thread this turn sees."""
    resumed: bool = False
    """This turn waited for a person and continues from where it stood (:data:`WAITING_TURNS`)."""

    async def prepare(self, summarise: Summarise, warn: Callable[[str], None]) -> None:
        """With ``history.summarize``: put a summary of the turns left out before the ones kept."""
        if self.policy is None or not self.policy.summarize or not self.dropped:
            return
        text, covered = str(self.summary.get("text") or ""), int(self.summary.get("turns") or 0)
        left_out = _turns(self.dropped)
        if len(left_out) > covered:
            try:
                text = await summarise(summary_request(text, [m for turn in left_out[covered:] for m in turn]))
            except ModelError as exc:
                warn(
                    f"history: the older turns of thread {self.thread_id} could not be summarised "
                    f"({exc}); they are left out"
                )
                return
            self.summary = {"text": text, "turns": len(left_out)}
            try:
                with self.store.errors(f"keep the summary of thread {self.thread_id!r}"):
                    await asyncio.to_thread(self.store.threads.update_meta, self.thread_id, {"summary": self.summary})
            except StoreError as exc:  # this turn still uses it; the next one writes it again
                warn(str(exc))
        if text:
            self.conversation = [{"role": "user", "content": f"{SUMMARY_HEADING}\n{text}"}, *self.conversation]

    def history_for(self, agent: str, depth: int, task: str) -> list[Message]:
        """The messages an agent (at ``depth``) starts with (before its system prompt): earlier turns and the task.

        Empty (a fresh start on ``task``) for a worker without ``memory: thread``.
        """
        if depth == 0:
            return [*self.conversation, {"role": "user", "content": task}]
        memory = self.memories.get(agent)
        if memory is None:
            return []
        return [*trim(memory, self.policy)[0], {"role": "user", "content": task}]

    def remember(self, agent: str, task: str, answer: str) -> None:
        """A delegation a worker with ``memory: thread`` answered: its next delegations see it."""
        from teamrun.store.threads import NewMessage

        memory = self.memories.get(agent)
        if memory is None or not answer:
            return
        memory += [{"role": "user", "content": task}, {"role": "assistant", "content": answer}]
        self.remembered += [
            NewMessage("user", task, scope=agent),
            NewMessage("assistant", answer, agent=agent, scope=agent),
        ]

    async def save(self, input: str, result: RunResult, *, meta: dict[str, Any] | None = None) -> str | None:
        """Add the turn (and workers' new memory) to the thread; who answered takes the next turn. ``meta``:
        what the thread keeps with it (the workspace, ``persist: thread``), in the same transaction.
        The warning to give when it could not be saved."""
        if result.status == "waiting" and self.run_id is not None:
            return await self._keep_place()
        if result.status not in _SAVED or not result.final_text:
            return None

        answered_by = result.answered_by or self.starts_with
        try:
            with self.store.errors(f"save turn of thread {self.thread_id!r}"):
                await asyncio.to_thread(self._append, input, result, answered_by, dict(meta or {}))
        except StoreError as exc:  # the answer is not lost: the caller gets it, and is told
            return f"{exc}; the next turn will not see this one"
        return None

    def _append(self, input: str, result: RunResult, answered_by: str, meta: dict[str, Any]) -> None:
        from teamrun.store.threads import NewMessage

        if self.resumed:  # filed now, after the turns that came in while it waited: said so
            record = self.store.threads.get(self.thread_id)
            waiting = dict(record.meta.get(WAITING_TURNS) or {}) if record is not None else {}
            waiting.pop(str(self.run_id), None)
            meta[WAITING_TURNS] = waiting
            if record is not None and record.turns > self.turns_seen:
                input = f"{input}\n\n{_asked_before(self.turns_seen + 1)}"
        turn = [NewMessage("user", input), NewMessage("assistant", result.final_text, agent=answered_by)]
        self.store.threads.append(
            self.thread_id,
            [*turn, *self.remembered],
            run_id=result.run_id,
            current_agent=answered_by,
            meta=meta or None,
        )

    async def _keep_place(self) -> str | None:
        """The run waits for a person: keep where this turn stands, for its continuation."""
        place = {"seen": self.seen, "turns": self.turns_seen, "starts_with": self.starts_with}

        def keep() -> None:
            record = self.store.threads.get(self.thread_id)
            waiting = dict(record.meta.get(WAITING_TURNS) or {}) if record is not None else {}
            waiting[str(self.run_id)] = place
            self.store.threads.update_meta(self.thread_id, {WAITING_TURNS: waiting})

        try:
            with self.store.errors(f"keep the waiting turn of thread {self.thread_id!r}"):
                await asyncio.to_thread(keep)
        except (StoreError, KeyError) as exc:
            return f"{exc}; answered later, this turn sees the turns that come in meanwhile"
        return None


def _asked_before(turn: int) -> str:
    """The mark of a turn filed after others that came in while it waited for a person."""
    return f"(asked before turn {turn} of this thread; answered once a person replied)"


class ThreadOfAnotherTeam(UsageError):
    """The thread a run should continue holds another team's conversation (the run is refused)."""


class ThreadOfAnotherResource(UsageError):
    """The thread a run should continue belongs to another resource (the run is refused; the message does not
    name that resource)."""


async def open_thread(
    store: Store,
    thread_id: str,
    config: TeamConfig,
    *,
    run_id: str | None = None,
    resource: str | None = None,
    resumed: bool = False,
) -> ThreadSession:
    """The thread ``thread_id`` of ``store`` (created when new), as run ``run_id`` sees it: a run that waited
    for a person sees it as it stood when that turn began (:data:`WAITING_TURNS`).

    A thread belongs to the first resource a run of it was given (:data:`THREAD_RESOURCE`): a run given another
    one, or none, is refused (:class:`ThreadOfAnotherResource`), except a ``resumed`` run given none (its first
    attempt was let in). A thread no run gave a resource takes the first one given."""
    with store.errors(f"open thread {thread_id!r}"):
        return await asyncio.to_thread(_load, store, thread_id, config, run_id, resource, resumed)


def _load(
    store: Store,
    thread_id: str,
    config: TeamConfig,
    run_id: str | None = None,
    resource: str | None = None,
    resumed: bool = False,
) -> ThreadSession:
    thread_id = thread_id.strip()
    if not thread_id or len(thread_id) > 200:
        raise UsageError("a thread id is 1 to 200 characters (e.g. --thread support-42)")
    new = {THREAD_RESOURCE: resource} if resource is not None else None
    record = store.threads.get(thread_id) or store.threads.create(thread_id, config.name, meta=new)
    if record.team != config.name:
        raise ThreadOfAnotherTeam(
            f"thread {thread_id!r} belongs to team {record.team!r}, not {config.name!r}: "
            "give another --thread id (or delete it: teamrun threads delete ID)"
        )
    owner = unmask(record.meta.get(THREAD_RESOURCE))
    if owner is None and resource is not None:  # a thread started without a resource takes the first one given
        store.threads.update_meta(thread_id, {THREAD_RESOURCE: resource})
        owner = resource
    if owner is not None and owner != resource and not (resource is None and resumed):
        given = "another resource" if resource is not None else "a resource, and this run was given none"
        raise ThreadOfAnotherResource(  # the owner is not named: the id of another user or organisation
            f"thread {thread_id!r} belongs to {given}: give another --thread id (a thread keeps the "
            "resource of its first run)"
        )
    waiting = record.meta.get(WAITING_TURNS)
    place = waiting.get(run_id) if isinstance(waiting, dict) and run_id is not None else None
    place = place if isinstance(place, dict) and isinstance(place.get("seen"), int) else None
    current = place.get("starts_with") if place is not None else record.current_agent
    starts_with = current if current in config.agents else config.supervisor or ""
    seen = int(place["seen"]) if place is not None else None

    def as_seen(stored: Sequence[ThreadMessage]) -> list[ThreadMessage]:
        return [m for m in stored if seen is None or m.seq <= seen]

    stored = as_seen(store.threads.messages(thread_id))
    last = max((m.seq for m in stored), default=0)
    conversation, dropped = trim(_messages(stored), config.history)
    summary = unmask(record.meta.get("summary"))
    memories: dict[str, list[Message]] = {}
    for name, agent in config.agents.items():
        if agent.memory == "thread" and name != config.supervisor:
            own = as_seen(store.threads.messages(thread_id, scope=name))
            last = max([last, *(m.seq for m in own)])
            memories[name] = _messages(own)
    persisted = config.workspace is not None and config.workspace.persist == "thread"
    return ThreadSession(
        store=store,
        thread_id=thread_id,
        starts_with=starts_with,
        conversation=conversation,
        memories=memories,
        policy=config.history,
        dropped=dropped,
        summary=dict(summary) if isinstance(summary, dict) else {},
        workspace=unmask(record.meta.get(THREAD_META_KEY)) if persisted else None,
        run_id=run_id,
        seen=seen if seen is not None else last,
        turns_seen=sum(1 for m in stored if m.role == "user"),
        resumed=place is not None,
    )


def summary_request(earlier: str, turns: Sequence[Message]) -> list[Message]:
    """The messages of the call that writes a thread's new summary."""
    lines = [f"Earlier summary:\n{earlier}\n"] if earlier else []
    lines += [f"{m.get('role')}: {m.get('content')}" for m in turns]
    return [{"role": "system", "content": SUMMARY_INSTRUCTIONS}, {"role": "user", "content": "\n".join(lines)}]


def _messages(stored: Sequence[ThreadMessage]) -> list[Message]:
    """The stored messages as a model sees them, with the secrets the store masked read from the environment."""
    return [unmask(m.as_message()) for m in stored]


def estimate_tokens(message: Message) -> int:
    """A rough token count of one message (characters / 4), the same rule for every model."""
    content = message.get("content")
    return 4 + len(content if isinstance(content, str) else str(content)) // 4


def _turns(messages: Sequence[Message]) -> list[list[Message]]:
    """Messages grouped into turns: a turn starts at each user message."""
    turns: list[list[Message]] = []
    for message in messages:
        if message.get("role") == "user" or not turns:
            turns.append([])
        turns[-1].append(message)
    return turns


def trim(messages: Sequence[Message], policy: History | None) -> tuple[list[Message], list[Message]]:
    """``(kept, left out)``: the newest turns ``policy`` keeps, and the older ones it leaves out."""
    turns = _turns(messages)
    max_turns = policy.max_turns if policy else None
    max_tokens = policy.max_tokens if policy else None
    if max_turns is None and max_tokens is None:
        max_tokens = DEFAULT_HISTORY_TOKENS
    kept = turns[-max_turns:] if max_turns is not None else turns
    if max_tokens is not None:
        fitting: list[list[Message]] = []
        used = 0
        for turn in reversed(kept):
            used += sum(estimate_tokens(m) for m in turn)
            if used > max_tokens:
                break
            fitting.append(turn)
        kept = fitting[::-1]
    left_out = turns[: len(turns) - len(kept)]
    return [m for turn in kept for m in turn], [m for turn in left_out for m in turn]


__all__ = [
    "DEFAULT_HISTORY_TOKENS",
    "THREAD_RESOURCE",
    "WAITING_TURNS",
    "ThreadOfAnotherResource",
    "ThreadOfAnotherTeam",
    "ThreadSession",
    "estimate_tokens",
    "open_thread",
    "trim",
]
