"""A person is a pending item in the store: a journaled run waits for answers, and suspends when it must.

:class:`SuspendingDesk` gets questions and approvals answered through the store:
each becomes a pending item (:class:`~teamrun.store.pending.PendingRepository`),
named by the call that asked, and the call waits for its answer (polling the
store, so an answer given from another process while the run still goes on is
taken). :class:`RunActivity` counts what of the run is working: when every
strand (agent loop, tool call) waits — for a person, or for workers that wait
for one — the run can go no further and :attr:`RunActivity.stuck` is set; the
run then ends ``waiting`` (:class:`~teamrun.engine.team.Team` cancels the
waiting calls, nothing of theirs is journaled). ``teamrun answer`` records an
answer and resumes the run: the journal answers every call that finished, the
asking tool call finds its item answered and returns it.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import getpass
import re
import socket
import time
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from teamrun.logs import get_logger
from teamrun.tools.people import Answer, AskSite, PendingItem, answered_fields, asked_fields

if TYPE_CHECKING:  # the store (SQLAlchemy) is imported only by runs that use one
    from teamrun.store.pending import PendingRecord, PendingRepository

__all__ = [
    "CLAIMED_HERE",
    "POLL_S",
    "RunActivity",
    "SuspendingDesk",
    "call_key",
    "claim_run",
    "default_person",
    "tree_order",
]

_log = get_logger(__name__)
POLL_S = 0.5
"""How often a waiting call looks in the store for its answer."""
_CONFIRM_HOPS = 8
"""Event-loop turns the run must stay all-waiting before it counts as stuck (tasks just created get to start)."""


CLAIMED_HERE: set[str] = set()
"""Waiting runs this process claimed for resuming (their record says ``running`` with this pid)."""


def claim_run(items: PendingRepository, run_id: str) -> bool:
    """Take the waiting run ``run_id`` for this process (one conditional update); whether it did."""
    if not items.claim(run_id):
        return False
    CLAIMED_HERE.add(run_id)
    return True


def default_person() -> str:
    """Who answers when ``--by`` is not given: ``user@host``."""
    try:
        user = getpass.getuser()
    except Exception:  # no user name in a container
        user = "unknown"
    return f"{user}@{socket.gethostname()}"


def call_key(site: AskSite) -> str:
    """The item's place in the run: the asking call's invocation, model-call number and position."""
    return f"{site.invocation}#{site.turn}.{site.position}"


_STEP = re.compile(r"^(?P<name>.*?)@(?P<turn>\d+)\.(?P<position>\d+)(?P<rest>.*)$")


def tree_order(key: str) -> tuple[tuple[int, int, str, str], ...]:
    """A call key (:func:`call_key`) or an invocation's key (``lead/infra@1.0``, no ``#``) as a place in the
    run's tree, for sorting: step by step from the entry agent, each delegation by its delegating call's
    model-call number and position in the reply (numbers as numbers: call 10 after call 9), then the call's
    own. A worker's question comes before a question its delegating agent asks later, and the first delegation
    of a reply before the second; an invocation's place is the start of its calls' places."""
    invocation, hashed, own = key.rpartition("#") if "#" in key else (key, "", "")
    root, *steps = invocation.split("/")
    order = [(0, 0, root, "")]
    for step in steps:
        found = _STEP.match(step)
        order.append(
            (int(found["turn"]), int(found["position"]), found["name"], found["rest"]) if found else (0, 0, step, "")
        )
    if not hashed:  # an invocation (an agent loop's strand), not a call
        return tuple(order)
    turn, _, position = own.partition(".")
    if turn.isdigit() and position.isdigit():
        order.append((int(turn), int(position), "", ""))
    else:
        order.append((0, 0, own, ""))
    return tuple(order)


_Order = tuple[tuple[int, int, str, str], ...]


def _holds(outer: _Order, inner: _Order) -> bool:
    """Whether the strand at ``outer`` is ``inner`` or one of its ancestors: an invocation that ``inner`` is in,
    or a call that ``inner`` is in (a delegating call at ``lead#1.0`` holds its worker ``lead/infra@1.0``)."""
    if len(outer) > len(inner):
        return False
    *steps, last = outer
    if tuple(steps) != inner[: len(steps)]:
        return False
    below = inner[len(steps)]
    return last == below or (last[2:] == ("", "") and last[:2] == below[:2])


@dataclass(eq=False)
class _Strand:
    """One strand of a run (an agent invocation's loop, or one call of a reply): where it is in the tree, and
    whether it works now (it does not while it waits for its workers, for a person, or for its turn to ask)."""

    order: _Order | None
    busy: int = 1


@dataclass(eq=False)
class _Asker:
    order: _Order
    turn: asyncio.Future[None]


_strand: contextvars.ContextVar[_Strand | None] = contextvars.ContextVar("teamrun_strand", default=None)
"""The strand the running task works for (tasks it starts inherit it until they start a strand of their own)."""


class RunActivity:
    """What of one run is working, and what waits for a person.

    Agent loops and their actions are *working* strands; a strand that waits for
    its workers is *waiting*; a call waiting for a person is *parked*. When
    nothing works and something is parked on a suspendable desk, :attr:`stuck` is set.
    Time during which a call waits for a person is :attr:`waited_s` (it does not count
    against ``timeout_s``). A call about to ask a person takes its turn to number its item
    (:meth:`turn_to_ask`).
    """

    def __init__(self) -> None:
        self.active = 0
        self.parked = 0
        self.suspendable = 0
        self.stuck = asyncio.Event()
        self._confirming: asyncio.Task[None] | None = None
        self._waiting_since: float | None = None
        self._waited = 0.0
        self._timed = 0
        self._strands: set[_Strand] = set()
        self._askers: list[_Asker] = []
        self._asking: _Asker | None = None
        self._granting: asyncio.Task[None] | None = None

    @property
    def waited_s(self) -> float:
        """Seconds during which at least one call waited for a person."""
        extra = time.monotonic() - self._waiting_since if self._waiting_since is not None else 0.0
        return self._waited + extra

    @contextlib.asynccontextmanager
    async def working(self, key: str | None = None) -> AsyncIterator[None]:
        """A strand works (``key``: its place in the run, an invocation's key or a call's :func:`call_key`)."""
        strand = _Strand(tree_order(key) if key else None)
        token = _strand.set(strand)
        self._strands.add(strand)
        self.active += 1
        try:
            yield
        finally:
            self.active -= 1
            self._strands.discard(strand)
            with contextlib.suppress(ValueError):  # ended in another context (a generator closed late): moot
                _strand.reset(token)
            self._check()

    @contextlib.asynccontextmanager
    async def waiting(self) -> AsyncIterator[None]:
        """The strand waits for others (its workers, background tasks)."""
        with self._idle():
            yield

    @contextlib.asynccontextmanager
    async def parked_call(self, suspendable: bool) -> AsyncIterator[None]:
        """A call waits for a person (``suspendable``: the run may suspend for it)."""
        self.parked += 1
        self.suspendable += int(suspendable)
        try:
            with self.person_time(), self._idle():
                yield
        finally:
            self.parked -= 1
            self.suspendable -= int(suspendable)

    @contextlib.contextmanager
    def person_time(self) -> Iterator[None]:
        """Time that belongs to a person, not to the run's work (:attr:`waited_s`): a call parked for an answer,
        and all of a question's way through the store — recording it, waiting for its turn to be numbered,
        looking for the answer — which a busy store or machine can make long (it counted against ``timeout_s``:
        a detached run that asked ended ``budget_exhausted`` instead of ``waiting``)."""
        if self._timed == 0:
            self._waiting_since = time.monotonic()
        self._timed += 1
        try:
            yield
        finally:
            self._timed -= 1
            if self._timed == 0 and self._waiting_since is not None:
                self._waited += time.monotonic() - self._waiting_since
                self._waiting_since = None

    @contextlib.asynccontextmanager
    async def turn_to_ask(self, key: str) -> AsyncIterator[None]:
        """Hold a call that asks a person until it may number its item, then let it number it.

        Items are numbered in the order of the calls that asked (:func:`tree_order`), not in the order
        concurrent branches reached a person: a call waits (not working) while a strand before it in the tree
        still works (it may ask too) or an earlier call waits for its turn; the calls then take their turns
        one by one. A branch after it in the tree never holds it back.
        """
        asker = _Asker(tree_order(key), asyncio.get_running_loop().create_future())
        self._askers.append(asker)
        try:
            with self._idle():
                await asker.turn
                yield
        finally:
            self._askers.remove(asker)
            if self._asking is asker:
                self._asking = None
            self._check()

    @contextlib.contextmanager
    def _idle(self) -> Iterator[None]:
        """The current strand does not work while the block runs."""
        strand = _strand.get()
        if strand is not None:
            strand.busy -= 1
        self.active -= 1
        self._check()
        try:
            yield
        finally:
            self.active += 1
            if strand is not None:
                strand.busy += 1

    def _all_wait(self) -> bool:
        return self.active <= 0 and self.suspendable > 0 and not self._askers

    def _check(self) -> None:
        loop = asyncio.get_running_loop()
        if self._all_wait() and not self.stuck.is_set() and self._confirming is None:
            self._confirming = loop.create_task(self._confirm())
        if self._granting is None and self._next_asker() is not None:
            self._granting = loop.create_task(self._grant())

    async def _confirm(self) -> None:
        try:
            for _ in range(_CONFIRM_HOPS):
                await asyncio.sleep(0)
                if not self._all_wait():
                    return
            self.stuck.set()
        finally:
            self._confirming = None

    def _next_asker(self) -> _Asker | None:
        """The asking call whose turn it is: the first in the tree, when no strand before it works."""
        if self._asking is not None:
            return None
        waiting = [asker for asker in self._askers if not asker.turn.done()]
        if not waiting:
            return None
        first = min(waiting, key=lambda asker: asker.order)
        for strand in self._strands:
            order = strand.order
            if strand.busy > 0 and order is not None and order < first.order and not _holds(order, first.order):
                return None  # an earlier branch still works (its own ancestors wait for it, they do not count)
        return first

    async def _grant(self) -> None:
        """Give the next asking call its turn, once that stayed so for a few loop turns (a worker just
        delegated, or a call just answered by the journal, gets to start working first)."""
        try:
            first = self._next_asker()
            for _ in range(_CONFIRM_HOPS):
                await asyncio.sleep(0)
                if first is None or self._next_asker() is not first:
                    return
            assert first is not None
            self._asking = first
            first.turn.set_result(None)
        finally:
            self._granting = None
            if self._asking is None:
                self._check()


class SuspendingDesk:
    """Questions and approvals as pending items in a store; a call waits until its item is answered."""

    def __init__(
        self, items: PendingRepository, *, poll_s: float = POLL_S, mask: Callable[[Any], Any] | None = None
    ) -> None:
        self.items = items
        self.poll_s = poll_s
        self.mask = mask
        """Masks what the item shows (its question, an approval's arguments) before the store does: the run's
        own secrets, e.g. a server's tokens (the store masks the environment's secrets itself)."""

    async def ask(self, item: PendingItem, site: AskSite) -> Answer:
        activity = _activity_of(site)
        with activity.person_time() if activity is not None else contextlib.nullcontext():
            return await self._ask(item, site)

    async def _ask(self, item: PendingItem, site: AskSite) -> Answer:
        question, spec = item.question, item.spec()
        if self.mask is not None:
            question, spec["arguments"] = self.mask(question), self.mask(spec["arguments"])
        async with self._turn(site):
            record = await asyncio.to_thread(
                self.items.open_item,
                site.run_id,
                call_key(site),
                kind=item.kind,
                agent=site.agent,
                question=question,
                spec=spec,
            )
        if record.status == "pending":
            site.emit("person_asked", **asked_fields(record.item_id, item))
            _log.info("person_asked", item=record.item_id, tool=item.tool)
        while record.status == "pending":
            left = self._left(item, record)
            if left is not None and left <= 0:
                await asyncio.to_thread(
                    self.items.answer, site.run_id, record.item_id, None, by="nobody", status="expired"
                )
            else:
                async with site.waiting(True):
                    await asyncio.sleep(self.poll_s if left is None else min(self.poll_s, left))
            found = await asyncio.to_thread(self.items.get, site.run_id, record.item_id)
            record = found if found is not None else record
        answer = _answer_of(record)
        await asyncio.to_thread(self.items.mark_used, site.run_id, record.item_id)
        if not record.used:  # said once, by the attempt that took it
            site.emit("person_answered", **answered_fields(record.item_id, item, answer))
        return answer

    def _turn(self, site: AskSite) -> contextlib.AbstractAsyncContextManager[None]:
        """The call's turn to number its item (:meth:`RunActivity.turn_to_ask`), when its run counts activity."""
        activity = _activity_of(site)
        if activity is None:
            return contextlib.nullcontext()
        self._waits_turn(site)
        return activity.turn_to_ask(call_key(site))

    def _waits_turn(self, site: AskSite) -> None:
        """Called when a call starts waiting for its turn to number its item (tests see the order forced)."""

    @staticmethod
    def _left(item: PendingItem, record: PendingRecord) -> float | None:
        if item.max_wait_s is None:
            return None
        return record.asked_at + item.max_wait_s - time.time()


def _activity_of(site: AskSite) -> RunActivity | None:
    """The run's :class:`RunActivity` (the engine gives a call its ``parked_call`` as ``site.waiting``)."""
    activity = getattr(site.waiting, "__self__", None)
    return activity if isinstance(activity, RunActivity) else None


def _answer_of(record: PendingRecord) -> Answer:
    when = record.answered_at or time.time()
    by = record.answered_by or "nobody"
    if record.status == "expired":
        from teamrun.store.pending import CANCELLED_BY

        return Answer(None, by, when, expired=True, withdrawn=by == CANCELLED_BY)
    value: Any = record.answer
    if record.kind == "approval":  # only a JSON true approves ("yes", 1, "false" are no approval)
        data = value if isinstance(value, dict) else {"approved": value}
        note = data.get("note")
        return Answer(data.get("approved") is True, by, when, note=str(note) if note else None)
    return Answer(value, by, when)
