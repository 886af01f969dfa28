"""People in the loop over HTTP, for a server with a store: runs that wait for a person suspend there.

A served run journaled in the server's store asks its questions and approvals
through a :class:`~teamrun.engine.durability.pending.SuspendingDesk`: each
becomes a pending item in the store, and when the run can go no further it
ends ``waiting`` (it holds no task, and survives the server). ``GET
/v1/pending`` lists the items waiting across runs; ``POST
/v1/runs/{run}/pending/{item}`` records an answer (``{"answer": ...}``) or a
decision (``{"approve": true|false, "note": ...}``) with one conditional
update, claims the waiting run and continues it in this server through its
journal (nothing it finished is paid again), under the same run id.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Awaitable, Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Protocol

from fastapi import Depends, FastAPI
from pydantic import BaseModel, ConfigDict, Field, model_validator
from pydantic_core import PydanticCustomError

from teamrun.errors import TeamrunError
from teamrun.logs import get_logger
from teamrun.secrets import Redactor
from teamrun.serve.security import LONE_SURROGATE, lone_surrogate

if TYPE_CHECKING:
    from teamrun.engine.durability.journal import RunJournal
    from teamrun.engine.team import Team
    from teamrun.serve.app import ApiError
    from teamrun.serve.runs import RunHandle, RunRegistry
    from teamrun.store import Store
    from teamrun.store.pending import PendingRecord, PendingRepository

__all__ = ["PendingAnswer", "mount_pending"]

_log = get_logger(__name__)


class _Served(Protocol):
    team: Team
    redactor: Redactor


class PendingAnswer(BaseModel):
    """``POST /v1/runs/{run}/pending/{item}``: ``answer`` for a question, ``approve`` (and ``note``) for an approval."""

    model_config = ConfigDict(extra="forbid")
    answer: Any = None
    approve: bool | None = None
    note: str | None = None
    by: str | None = Field(default=None, min_length=1, max_length=200)
    """Who answers, as events and listings show it (default: ``http``)."""

    @model_validator(mode="before")
    @classmethod
    def _valid_unicode(cls, data: Any) -> Any:
        """Text that is not valid Unicode is refused (400 ``invalid_text``, as on every route) before anything
        is recorded; :func:`~teamrun.tools.people.read_answer` checks the answer again, as for every way in."""
        where = lone_surrogate(data)
        if where is not None:
            raise PydanticCustomError("lone_surrogate", "{where} " + LONE_SURROGATE, {"where": where})
        return data


def _item_view(item: PendingRecord) -> dict[str, Any]:
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


class _Resumer:
    """Continues waiting runs in this server once they have answers (one run at a time per id)."""

    def __init__(self, registry: RunRegistry, served: Mapping[str, _Served], store: Store) -> None:
        from teamrun.store.journal import StoreJournal
        from teamrun.store.pending import PendingRepository

        self.registry = registry
        self.served = served
        self.store = store
        self.items: PendingRepository = PendingRepository(store)
        self.backend = StoreJournal(store)
        self._watchers: set[asyncio.Task[None]] = set()

    @contextmanager
    def room(self, run_id: str) -> Iterator[None]:
        """A run slot for ``run_id`` to continue in once answered, held until it has started again: an answer
        that would continue a waiting run is refused like a new run (:class:`ServerBusy`, :class:`ShuttingDown`)
        when the server has no slot for one. A run still running here continues in its own slot."""
        from teamrun.serve.runs import ServerBusy, ShuttingDown

        registry = self.registry
        handle = registry.get(run_id)
        if handle is not None and not handle.finished:
            yield
            return
        if registry.closing:
            raise ShuttingDown("the server is shutting down")
        if registry.active + registry.reserved >= registry.max_concurrent:
            registry.metrics.rejected.labels("busy").inc()
            raise ServerBusy(f"all {registry.max_concurrent} run slots are in use")
        registry.reserved += 1
        try:
            yield
        finally:
            registry.reserved -= 1

    async def after_answer(self, run_id: str) -> None:
        """The run continues: now if it waits, or once it ends waiting if it still runs here."""
        handle = self.registry.get(run_id)
        if handle is not None and not handle.finished:
            watcher = asyncio.get_running_loop().create_task(self._when_over(handle))  # its desk may take it first
            self._watchers.add(watcher)
            watcher.add_done_callback(self._watchers.discard)
            return
        await self.maybe_resume(run_id)

    async def _when_over(self, handle: RunHandle) -> None:
        await handle.wait()
        await self.maybe_resume(handle.id)

    async def maybe_resume(self, run_id: str) -> None:
        """Continue ``run_id`` here if it waits with answers it has not taken (and nobody else claims it)."""
        if self.registry.closing:
            return
        record = await asyncio.to_thread(self.backend.get_run, run_id, unmasked=True)
        if record is None or record.shown_status() != "waiting":
            return
        if not await asyncio.to_thread(self.items.unused_answers, run_id):
            return
        entry = self.served.get(record.team)
        if entry is None:
            _log.warning("serve_resume_unserved", run=run_id, team=record.team)
            return
        from teamrun.engine.durability.pending import claim_run
        from teamrun.engine.durability.resume import open_resume

        if not await asyncio.to_thread(claim_run, self.items, run_id):
            return  # another server or process continues it
        try:
            # confirmed: a run ends waiting only when nothing of it works, so no tool was cut off mid-call
            journal = await asyncio.to_thread(open_resume, self.backend, run_id, confirmed=True)
        except TeamrunError as exc:
            _log.warning("serve_resume_failed", run=run_id, error=str(exc))
            return
        self._start(entry.team, entry.redactor, record.input, record.thread_id, journal, record.vars or None)

    def _start(
        self,
        team: Team,
        redactor: Redactor,
        input: str,
        thread: str | None,
        journal: RunJournal,
        vars: Mapping[str, Any] | None,
    ) -> None:
        import time

        from teamrun.serve.runs import RunHandle

        registry, run_id = self.registry, journal.run_id
        handle = registry.get(run_id)
        if handle is None:  # waited through a restart (or dropped from memory): a new handle, the same id
            handle = RunHandle(
                id=run_id, team=team.name, input=input, redactor=redactor, thread=thread, content=registry.content
            )
            registry._runs[run_id] = handle
        else:  # its events so far stay; the continuation's follow them
            handle.result, handle.error, handle._done = None, None, asyncio.Event()
            handle.cancel, handle.cancel_reason, handle.failure = asyncio.Event(), None, None
            handle.ended_at = None
            handle.note("run_continued", {"ts": time.time()})
        if run_id in registry._finished:
            registry._finished.remove(run_id)
        handle._loop = asyncio.get_running_loop()
        handle._loop_thread = threading.get_ident()
        registry._active += 1
        registry.metrics.run_started(team.name)
        handle.task = asyncio.create_task(self._run(team, handle, journal, vars), name=f"teamrun-serve-resume:{run_id}")

    async def _run(self, team: Team, handle: RunHandle, journal: RunJournal, vars: Mapping[str, Any] | None) -> None:
        from teamrun.serve.runs import store_people

        desk, approver = store_people(self.store, handle)
        await self.registry._run(  # its budgets come back from the journal's record, its vars from ours
            team, handle, limits=None, vars=vars, approver=approver, desk=desk, journal=journal
        )
        if handle.state == "waiting":  # answered while it went on, after its desk last looked
            await self.maybe_resume(handle.id)


def _answer_value(item: PendingRecord, body: PendingAnswer) -> tuple[Any, str]:
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


def mount_pending(
    app: FastAPI,
    registry: RunRegistry,
    served: Mapping[str, _Served],
    authorize: Callable[..., Awaitable[None]],
    error: type[ApiError],
) -> _Resumer | None:
    """Add ``GET /v1/pending`` and ``POST /v1/runs/{run_id}/pending/{item_id}`` to ``app``; the resumer that
    continues answered runs (``None`` without a store), for the other ways to answer (A2A).

    ``error`` is the server's error answer (``ApiError``: passed in, as app.py imports this module).
    """
    store = registry.store
    resumer = _Resumer(registry, served, store) if store is not None else None
    auth = [Depends(authorize)]

    def need_store() -> _Resumer:
        if resumer is None:
            raise error(
                400,
                "this server keeps no pending items (start it with --store PATH|URL); without a store "
                "approvals are answered at POST /v1/runs/{run_id}/approvals/{id}",
                code="pending_unavailable",
            )
        return resumer

    def redactor_of(team: str | None) -> Redactor | None:
        entry = served.get(team or "")
        return entry.redactor if entry is not None else None

    @app.get("/v1/pending", dependencies=auth)
    async def list_pending(run_id: str | None = None) -> dict[str, Any]:
        found = need_store()
        items = await asyncio.to_thread(found.items.items, run_id, status="pending")
        teams: dict[str, str | None] = {}
        shown: list[dict[str, Any]] = []
        for item in items:
            if item.run_id not in teams:
                record = await asyncio.to_thread(found.backend.get_run, item.run_id)
                teams[item.run_id] = record.team if record is not None else None
            redactor = redactor_of(teams[item.run_id])
            if redactor is None:
                continue  # a run of a team not served here
            view = _item_view(item) | {"team": teams[item.run_id]}
            shown.append(redactor.value(view))
        return {"object": "list", "data": shown}

    @app.post("/v1/runs/{run_id}/pending/{item_id}", dependencies=auth)
    async def answer_pending(run_id: str, item_id: str, body: PendingAnswer) -> dict[str, Any]:
        from teamrun.serve.runs import ServerBusy, ShuttingDown
        from teamrun.tools.people import AnswerNotText, AnswerRefused

        found = need_store()
        record = await asyncio.to_thread(found.backend.get_run, run_id)
        redactor = redactor_of(record.team) if record is not None else None
        if record is None or redactor is None:
            raise error(404, f"no run '{run_id}' on this server", code="run_not_found")
        item = await asyncio.to_thread(found.items.get, run_id, item_id)
        if item is None:
            known = await asyncio.to_thread(found.items.items, run_id)
            listing = ", ".join(f"{i.item_id} ({i.status})" for i in known) or "none"
            raise error(404, f"run {run_id} has no item '{item_id}'; its items: {listing}", code="item_not_found")
        if item.status != "pending":
            raise error(409, _settled(run_id, item), code="run_cancelled" if _cancelled(item) else "item_answered")
        try:
            value, said = _answer_value(item, body)
        except AnswerNotText as exc:
            raise error(400, str(exc), code="invalid_text") from None
        except AnswerRefused as exc:
            raise error(422, str(exc), code="answer_refused") from None
        except ValueError as exc:
            raise error(422, str(exc), code="invalid_answer") from None
        who = body.by or "http"
        try:
            with found.room(run_id):  # the run continues here: it needs a run slot, as a new run does
                if not await asyncio.to_thread(found.items.answer, run_id, item_id, value, by=who):
                    now = await asyncio.to_thread(found.items.get, run_id, item_id)
                    raise error(409, _settled(run_id, now or item), code="item_answered")
                _log.info("serve_pending_answered", run=run_id, item=item_id, by=who)
                await found.after_answer(run_id)
        except (ServerBusy, ShuttingDown) as exc:
            wait = registry.retry_after_s
            raise error.slot_refused(
                exc,
                wait,
                busy=f"{exc}: the answer would continue run {run_id} here; nothing was recorded, retry after {wait} s",
                closing=f"{exc}; nothing was recorded",
            ) from None
        answered = await asyncio.to_thread(found.items.get, run_id, item_id)
        handle = registry.get(run_id)
        status = handle.state if handle is not None else record.shown_status()
        view = _item_view(answered or item) | {"team": record.team, "said": said, "run_status": status}
        masked: dict[str, Any] = redactor.value(view)
        return masked

    return resumer


def _cancelled(item: PendingRecord) -> bool:
    """The item ended with its run, cancelled while it waited (:meth:`PendingRepository.cancel_waiting`)."""
    from teamrun.store.pending import CANCELLED_BY

    return item.status == "expired" and item.answered_by == CANCELLED_BY


def _settled(run_id: str, item: PendingRecord, *, what: str = "run") -> str:
    """Why ``item`` takes no answer: who answered it and when, when it expired, or that its run was cancelled
    while it waited (``what``: run or task)."""
    import datetime as _dt

    when = _dt.datetime.fromtimestamp(item.answered_at or 0, _dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    if _cancelled(item):
        return (
            f"{what} {run_id} was cancelled at {when} while it waited for people: "
            f"item {item.item_id} takes no answer any more"
        )
    if item.status == "expired":
        return f"item {item.item_id} of {what} {run_id} expired at {when}: nobody answered in time"
    return f"item {item.item_id} of {what} {run_id} was already answered by {item.answered_by} at {when}"
