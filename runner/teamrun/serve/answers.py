"""One answer service: every way in (``POST /v1/runs/{run}/pending/{item}``, A2A, the page) answers through it.

:meth:`AnswerService.answer` reads the answer for the item's kind, then, holding the run
(:meth:`RunRegistry.deciding <teamrun.serve.runs.RunRegistry.deciding>`, as a cancel does) and a run slot,
records it and claims the waiting run in ONE store transaction
(:meth:`~teamrun.store.pending.PendingRepository.answer_and_claim`): an answer and a cancel that race cannot
both succeed. A claimed run continues here at once, through its journal (nothing it finished is paid again),
under the same run id. Each protocol says a refusal (:class:`AnswerNotTaken`) in its own words.
"""

from __future__ import annotations

import asyncio
import datetime as _dt
import json
import time
import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool, model_validator

from teamrun.errors import TeamrunError
from teamrun.logs import get_logger
from teamrun.serve.continuation import continue_here
from teamrun.serve.runs import RunHandle, RunRegistry, ServerBusy, ShuttingDown
from teamrun.serve.served import Served
from teamrun.serve.wire import valid_body
from teamrun.store.pending import CANCELLED_BY, PendingRecord, PendingRepository

if TYPE_CHECKING:
    from teamrun.store import Store
    from teamrun.store.records import JournaledRun

__all__ = [
    "AnswerNotTaken",
    "AnswerService",
    "Answered",
    "PendingAnswer",
    "answer_value",
    "item_view",
    "settled_reason",
    "was_cancelled",
]

_log = get_logger(__name__)

FOLLOW_S = 10.0
"""Seconds :meth:`AnswerService.until_settled` waits for a run's next event before it looks again."""


class PendingAnswer(BaseModel):
    """``POST /v1/runs/{run}/pending/{item}``: ``answer`` for a question, ``approve`` (and ``note``) for an approval."""

    model_config = ConfigDict(extra="forbid")
    answer: Any = None
    approve: StrictBool | None = None
    """Only a JSON ``true`` or ``false`` (``"yes"``, ``1`` are refused, not read as a decision)."""
    note: str | None = None
    by: str | None = Field(default=None, min_length=1, max_length=200)
    """Who answers, as events and listings show it (default: ``http``)."""

    @model_validator(mode="before")
    @classmethod
    def _valid_unicode(cls, data: Any) -> Any:
        """JSON whatever the content type; text that is not valid Unicode is refused (400 ``invalid_text``, as on
        every route) before anything is recorded; :func:`~teamrun.tools.people.read_answer` checks the answer
        again, as for every way in."""
        return valid_body(data)


def item_view(item: PendingRecord) -> dict[str, Any]:
    """A pending item as listings show it (unmasked: the caller masks with the run's team's redactor)."""
    spec = item.spec
    shown: dict[str, Any] = {
        "object": "teamrun.pending_item",
        "run_id": item.run_id,
        "id": item.item_id,
        "kind": item.kind,
        "agent": item.agent,
        "question": item.question,
        "asked_at": item.asked_at,
        "status": item.status,
    }
    if item.kind == "question":
        shown |= {"choices": spec.get("choices"), "answer_schema": spec.get("answer_schema")}
    else:
        shown |= {"tool": spec.get("tool"), "arguments": spec.get("arguments") or {}}
    if item.status != "pending":
        shown |= {
            "answer": "***" if spec.get("secret") and item.answer is not None else item.answer,
            "answered_by": item.answered_by,
            "answered_at": item.answered_at,
        }
    return shown


def was_cancelled(item: PendingRecord) -> bool:
    """The item ended with its run, cancelled while it waited (:meth:`PendingRepository.cancel_waiting`)."""
    return item.status == "expired" and item.answered_by == CANCELLED_BY


def settled_reason(run_id: str, item: PendingRecord, *, what: str = "run") -> str:
    """Why ``item`` takes no answer: who answered it and when, when it expired, or that its run was cancelled
    while it waited (``what``: run or task)."""
    when = _dt.datetime.fromtimestamp(item.answered_at or 0, _dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    if was_cancelled(item):
        return (
            f"{what} {run_id} was cancelled at {when} while it waited for people: "
            f"item {item.item_id} takes no answer any more"
        )
    if item.status == "expired":
        return f"item {item.item_id} of {what} {run_id} expired at {when}: nobody answered in time"
    return f"item {item.item_id} of {what} {run_id} was already answered by {item.answered_by} at {when}"


def _deadline(item: PendingRecord) -> float | None:
    """When ``item`` expires (its ``max_wait_s`` counted from when it was first asked); ``None``: never."""
    wait = item.spec.get("max_wait_s")
    return None if wait is None else item.asked_at + float(wait)


def answer_value(item: PendingRecord, body: PendingAnswer) -> tuple[Any, str]:
    """The value to record for ``item`` and how the answer is said; raises ``AnswerRefused`` / ``ValueError``."""
    from teamrun.tools.people import PendingItem, masked, read_answer

    if item.kind == "approval":
        if body.approve is None or body.answer is not None:
            raise ValueError('an approval is answered with {"approve": true|false, "note": "..."}')
        return {"approved": body.approve, "note": body.note}, "approved" if body.approve else "denied"
    if body.approve is not None or body.answer is None:
        raise ValueError('a question is answered with {"answer": ...}')
    asked = PendingItem.from_spec("question", item.question, item.spec)
    text = body.answer if isinstance(body.answer, str) else json.dumps(body.answer)
    value = read_answer(asked, text)
    return value, f"answered ({masked(asked, value)})"


def check_by(by: str) -> None:
    """Refuse ``by`` (who answers, shown in listings, events and ``teamrun answer``'s refusals) unless it is text
    without a NUL (:func:`~teamrun.tools.people.check_text`, as for ``--by``) and without a control character
    (one line: an escape sequence in a name would reach a terminal); raises ``AnswerNotText``."""
    from teamrun.tools.people import AnswerNotText, check_text

    check_text(by, "by")
    if any(unicodedata.category(char) == "Cc" for char in by):
        raise AnswerNotText("by holds a control character (an escape, a newline): give who answers as one line of text")


def _read(item: PendingRecord, body: PendingAnswer, by: str) -> tuple[Any, str]:
    """:func:`answer_value`, its refusals as :class:`AnswerNotTaken`; ``by`` and the note are checked as
    ``teamrun answer`` checks ``--by`` and ``--note`` (:func:`check_by`)."""
    from teamrun.tools.people import AnswerNotText, AnswerRefused, check_text

    try:
        check_by(by)
        check_text(body.note, "the note")
        return answer_value(item, body)
    except AnswerNotText as exc:
        raise AnswerNotTaken("invalid_text", str(exc), item=item) from None
    except AnswerRefused as exc:
        raise AnswerNotTaken("refused", str(exc), item=item) from None
    except ValueError as exc:
        raise AnswerNotTaken("invalid", str(exc), item=item) from None


NotTakenBecause = Literal["settled", "cancelled", "invalid_text", "refused", "invalid", "no_slot"]


class AnswerNotTaken(TeamrunError):
    """An answer nothing was recorded of: ``because`` says why, for each protocol to say in its words."""

    def __init__(
        self,
        because: NotTakenBecause,
        message: str,
        *,
        item: PendingRecord | None = None,
        slot: ServerBusy | ShuttingDown | None = None,
    ) -> None:
        super().__init__(message)
        self.because: NotTakenBecause = because
        self.item = item
        """The item as the store holds it (``settled``, ``cancelled``: answered, expired or cancelled first)."""
        self.slot = slot
        """``no_slot``: the server's refusal (busy, or shutting down)."""


@dataclass(frozen=True)
class Answered:
    """An answer recorded."""

    item: PendingRecord
    """The item as recorded."""
    said: str
    """How the answer is said (``answered (...)``, ``approved``, ``denied``)."""


class AnswerService:
    """Answers pending items of runs of the served teams, and continues the answered runs here."""

    def __init__(self, registry: RunRegistry, served: Mapping[str, Served], store: Store) -> None:
        from teamrun.store.journal import StoreJournal

        self.registry = registry
        self.served = served
        self.items = PendingRepository(store)
        self.backend = StoreJournal(store)
        self._watchers: set[asyncio.Task[None]] = set()
        self._resuming: dict[str, set[asyncio.Task[None]]] = {}
        """Per run: the watchers that continue it once it stops, if it ends waiting with an answer untaken."""

    async def answer(self, item: PendingRecord, body: PendingAnswer, *, by: str) -> Answered:
        """Record ``body`` as the answer of ``item`` (of a run of a served team) and continue its run."""
        value, said = _read(item, body, by)
        run_id = item.run_id
        run = await asyncio.to_thread(self.backend.get_run, run_id, unmasked=True)  # its input, to continue it
        if run is None or run.team not in self.served:
            raise TeamrunError(f"run {run_id} of item {item.item_id} is not a run of a team served here")
        async with self.registry.deciding(run_id):  # a cancel of it goes first, or after
            try:
                with self.registry.slot_for(run_id):  # the run continues here: it needs a run slot, as a new run does
                    outcome = await asyncio.to_thread(self.items.answer_and_claim, run_id, item.item_id, value, by=by)
                    if outcome == "claimed":
                        self._continue(run)
            except (ServerBusy, ShuttingDown) as exc:
                raise AnswerNotTaken("no_slot", str(exc), item=item, slot=exc) from None
        if outcome == "settled":
            now = await asyncio.to_thread(self.items.get, run_id, item.item_id) or item
            raise AnswerNotTaken(
                "cancelled" if was_cancelled(now) else "settled", settled_reason(run_id, now), item=now
            )
        # "answered": it runs (here or on another replica): its desk takes the answer, or the process running it
        # continues it once it stops waiting with the answer untaken (:meth:`when_stopped`)
        _log.info("serve_pending_answered", run=run_id, item=item.item_id, by=by)
        answered = await asyncio.to_thread(self.items.get, run_id, item.item_id)
        return Answered(answered or item, said)

    # -- items nobody answered in time -------------------------------------------------------------

    def when_stopped(self, handle: RunHandle) -> None:
        """A run stopped here (:attr:`RunRegistry.when_over`): if it waits, continue it at once if an answer came
        that it did not take (given while it went on, after its question last looked: on any replica, or by
        ``teamrun answer``), and watch its items' ``max_wait_s``; if it was cancelled (while it ran, or the run an
        answer continued), its items still pending end with it. Every run alike: started here, continued by an
        answer, or taken over from another replica."""
        if handle.state == "waiting":
            self._recheck(handle.id)
            self._watch(handle.id)
        elif handle.state == "cancelled":
            self._track(asyncio.get_running_loop().create_task(self._end_items(handle.id)))

    async def _end_items(self, run_id: str) -> None:
        ended = await asyncio.to_thread(self.items.end_with_run, run_id)
        if ended:
            _log.info("serve_cancelled_run_items_ended", run=run_id, items=ended)

    def _track(self, task: asyncio.Task[None]) -> None:
        self._watchers.add(task)
        task.add_done_callback(self._watchers.discard)

    async def watch_waiting(self) -> None:
        """Watch the deadlines of the runs of served teams already waiting in the store (a server started)."""
        items = await asyncio.to_thread(self.items.items, status="pending")
        for run_id in dict.fromkeys(item.run_id for item in items if item.spec.get("max_wait_s") is not None):
            self._watch(run_id)

    def close(self) -> None:
        """Stop watching (the server stops; a later server watches the deadlines again)."""
        for task in list(self._watchers):
            task.cancel()

    def _watch(self, run_id: str) -> None:
        task = asyncio.get_running_loop().create_task(self._expire_when_due(run_id), name=f"teamrun-deadline:{run_id}")
        self._watchers.add(task)
        task.add_done_callback(self._watchers.discard)

    async def _expire_when_due(self, run_id: str) -> None:
        """Once an item of the waiting run ``run_id`` is past its ``max_wait_s``, record it expired (as the run's
        desk would have) and continue the run here: the model hears nobody answered (docs/people.md)."""
        while True:
            items = await asyncio.to_thread(self.items.items, run_id, status="pending")
            deadlines = {item.item_id: _deadline(item) for item in items}
            due_at = [when for when in deadlines.values() if when is not None]
            if not due_at:
                return  # answered, cancelled, or nothing of it has a deadline
            left = min(due_at) - time.time()
            if left > 0:
                await asyncio.sleep(left)  # a timer: the deadline is in the store, read again when it comes
                continue
            async with self.registry.deciding(run_id):  # not while an answer or a cancel of it is decided
                record = await asyncio.to_thread(self.backend.get_run, run_id)
                if record is None or record.shown_status() != "waiting" or record.team not in self.served:
                    return  # it runs again (its desk keeps the deadline), or it is over
                now = time.time()
                for item_id in [item_id for item_id, when in deadlines.items() if when is not None and when <= now]:
                    await asyncio.to_thread(self.items.answer, run_id, item_id, None, by="nobody", status="expired")
                    _log.info("serve_pending_expired", run=run_id, item=item_id)
            await self.maybe_resume(run_id)
            return

    def _recheck(self, run_id: str) -> None:
        """Continue ``run_id``, which stopped here waiting, if it waits with answers it has not taken
        (:meth:`maybe_resume`, in a task :meth:`until_settled` follows)."""
        recheck = asyncio.get_running_loop().create_task(self.maybe_resume(run_id), name=f"teamrun-recheck:{run_id}")
        self._track(recheck)
        resuming = self._resuming.setdefault(run_id, set())
        resuming.add(recheck)

        def forget(done: asyncio.Task[None]) -> None:
            resuming.discard(done)
            if not resuming and self._resuming.get(run_id) is resuming:
                del self._resuming[run_id]

        recheck.add_done_callback(forget)

    async def until_settled(self, run_id: str) -> None:
        """Until ``run_id`` no longer runs here: over, or waiting with no answer it has not taken. A run that
        stops waiting while an answer given meanwhile is untaken is continued again here at once (by
        :meth:`maybe_resume`, in its own task): that continuation is followed too, so a caller that waits for
        the run's outcome (a blocking A2A answer racing another) is not told it is still working."""
        handle = self.registry.get(run_id)
        while handle is not None:  # a continuation here runs on the same handle (RunRegistry.continuing)
            while not handle.finished:
                await handle.changed(FOLLOW_S)
            after = [t for t in (handle.task, *self._resuming.get(run_id, ())) if t is not None and not t.done()]
            if not after:
                return
            await asyncio.wait(after)  # not cancelled with the caller: they may continue the run again
            handle = self.registry.get(run_id)

    async def maybe_resume(self, run_id: str) -> None:
        """Continue ``run_id`` here if it waits with answers it has not taken (and nobody else claims it)."""
        from teamrun.engine.durability.pending import claim_run

        if self.registry.closing:
            return
        record = await asyncio.to_thread(self.backend.get_run, run_id, unmasked=True)
        if record is None or record.shown_status() != "waiting" or record.team not in self.served:
            return
        if not await asyncio.to_thread(self.items.unused_answers, run_id):
            return
        async with self.registry.deciding(run_id):
            if await asyncio.to_thread(claim_run, self.items, run_id):  # else another process continues it
                self._continue(record)

    def _continue(self, run: JournaledRun) -> None:
        """Continue ``run`` (claimed in the store by this process) here; synchronous up to its task."""
        # confirmed: a run ends waiting only when nothing of it works, so no tool was cut off mid-call
        continue_here(self.registry, self.served[run.team], run, self.backend, confirmed=True)
