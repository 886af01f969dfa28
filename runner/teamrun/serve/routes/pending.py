"""People in the loop over HTTP, for a server with a store: runs that wait for a person suspend there.

A served run journaled in the server's store asks its questions and approvals through a
:class:`~teamrun.engine.durability.pending.SuspendingDesk`: each becomes a pending item in the store, and when
the run can go no further it ends ``waiting`` (it holds no task, and survives the server). ``GET /v1/pending``
lists the items waiting across runs; ``POST /v1/runs/{run}/pending/{item}`` answers one (``{"answer": ...}``,
or ``{"approve": true|false, "note": ...}``) through the answer service (:mod:`teamrun.serve.answers`), which
continues the run in this server under the same run id.
"""

from __future__ import annotations

import asyncio
from typing import Annotated, Any

from fastapi import APIRouter, Depends

from teamrun.serve.answers import AnswerNotTaken, AnswerService, PendingAnswer, item_view, settled_reason, was_cancelled
from teamrun.serve.errors import ApiError
from teamrun.serve.replicas import as_replicas_show
from teamrun.serve.state import ServeState, serve_state

__all__ = ["answer_item", "router"]

router = APIRouter()
ENDED = frozenset({"cancelled", "done"})
"""A run whose record says so waits for nobody: an item of it still pending is not listed."""
State = Annotated[ServeState, Depends(serve_state)]


def _answers(state: ServeState) -> AnswerService:
    if state.answers is None:
        raise ApiError(
            400,
            "this server keeps no pending items (start it with --store PATH|URL); without a store "
            "approvals are answered at POST /v1/runs/{run_id}/approvals/{id}",
            code="pending_unavailable",
        )
    return state.answers


@router.get("/v1/pending")
async def list_pending(state: State, run_id: str | None = None) -> dict[str, Any]:
    answers = _answers(state)
    items = await asyncio.to_thread(answers.items.items, run_id, status="pending")
    teams: dict[str, str | None] = {}
    shown: list[dict[str, Any]] = []
    for item in items:
        if item.run_id not in teams:
            record = await asyncio.to_thread(answers.backend.get_run, item.run_id)
            over = record is None or record.status in ENDED  # its items take no answer (ended with it, or soon)
            teams[item.run_id] = None if over or record is None else record.team
        redactor = state.redactor_of(teams[item.run_id])
        if redactor is None:
            continue  # a run of a team not served here, or a run that ended
        shown.append(redactor.value(item_view(item) | {"team": teams[item.run_id]}))
    return {"object": "list", "data": shown}


@router.post("/v1/runs/{run_id}/pending/{item_id}")
async def answer_pending(state: State, run_id: str, item_id: str, body: PendingAnswer) -> dict[str, Any]:
    return await answer_item(state, run_id, item_id, body)


async def answer_item(state: ServeState, run_id: str, item_id: str, body: PendingAnswer) -> dict[str, Any]:
    """Answer the pending item ``item_id`` of ``run_id`` through the answer service: the item as answered (masked),
    or the HTTP error saying why not (also for ``POST /v1/runs/{run}/approvals/{id}`` on a server with a store)."""
    answers = _answers(state)
    record = await asyncio.to_thread(answers.backend.get_run, run_id)
    redactor = state.redactor_of(record.team) if record is not None else None
    if record is None or redactor is None:
        raise ApiError.run_not_found(run_id)
    item = await asyncio.to_thread(answers.items.get, run_id, item_id)
    if item is None:
        known = await asyncio.to_thread(answers.items.items, run_id)
        listing = ", ".join(f"{i.item_id} ({i.status})" for i in known) or "none"
        raise ApiError(404, f"run {run_id} has no item '{item_id}'; its items: {listing}", code="item_not_found")
    if item.status != "pending":
        code = "run_cancelled" if was_cancelled(item) else "item_answered"
        raise ApiError(409, settled_reason(run_id, item), code=code)
    try:
        answered = await answers.answer(item, body, by=body.by or "http")
    except AnswerNotTaken as exc:
        raise _refusal(exc, run_id, state.registry.retry_after_s) from None
    handle = state.registry.get(run_id)
    status = handle.state if handle is not None else record.shown_status()
    if handle is None and state.replica is not None and state.store is not None:
        # as GET /v1/runs/{id} says it: between two replicas (its lease expired, not yet taken) running
        status = (await as_replicas_show(state.store, {"id": run_id, "status": status}))["status"]
    view = item_view(answered.item) | {"team": record.team, "said": answered.said, "run_status": status}
    masked: dict[str, Any] = redactor.value(view)
    return masked


_REFUSED = {
    "settled": (409, "item_answered"),
    "cancelled": (409, "run_cancelled"),
    "invalid_text": (400, "invalid_text"),
    "refused": (422, "answer_refused"),
    "invalid": (422, "invalid_answer"),
}


def _refusal(exc: AnswerNotTaken, run_id: str, wait: int) -> ApiError:
    """An answer not taken, as the HTTP error it is answered with."""
    if exc.slot is not None:
        return ApiError.slot_refused(
            exc.slot,
            wait,
            busy=f"{exc}: the answer would continue run {run_id} here; nothing was recorded, retry after {wait} s",
            closing=f"{exc}; nothing was recorded",
        )
    status, code = _REFUSED[exc.because]
    return ApiError(status, str(exc), code=code)
