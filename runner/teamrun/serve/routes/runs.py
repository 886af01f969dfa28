"""The native runs API: ``POST /v1/runs`` starts a run, ``GET /v1/runs/{id}`` reads it (held here, else from the
store), ``POST /v1/runs/{id}/cancel`` cancels it (:meth:`RunRegistry.request_cancel
<teamrun.serve.runs.RunRegistry.request_cancel>`), ``GET /v1/runs/{id}/events`` streams its events."""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING, Annotated, Any

from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse, StreamingResponse

from teamrun.serve.errors import ApiError
from teamrun.serve.history import FOLLOW_POLL_S, stored_events
from teamrun.serve.replicas import as_replicas_show
from teamrun.serve.runs import BudgetTooHigh, RunRegistry, check_budgets, stored_record
from teamrun.serve.sse import (
    STORE_SETTLE_S,
    Fetch,
    after_event,
    continued_stream,
    event_stream,
    kept_stream,
    store_stream,
)
from teamrun.serve.state import ServeState, serve_state
from teamrun.serve.wire import RunRequest

if TYPE_CHECKING:
    from teamrun.store.records import JournaledRun

__all__ = ["router"]

router = APIRouter()
State = Annotated[ServeState, Depends(serve_state)]
_WAITING_REASON = "cancelled by request while waiting for people"
_SSE_HEADERS = {"Cache-Control": "no-cache"}
FORWARDED_POLLS = 4
"""Heartbeats a cancel of a run on another replica waits for the run to stop, to answer how it ended."""


@router.post("/v1/runs", status_code=201)
async def create_run(state: State, body: RunRequest) -> JSONResponse:
    target = state.team(body.team)
    try:
        check_budgets(target.team.config, body.budgets)
    except BudgetTooHigh as exc:
        raise ApiError(422, str(exc), code="budget_too_high", extra={"limits": exc.in_force}) from None
    handle = state.start(target, body.input, body.thread, limits=body.budgets, vars=body.vars, resource=body.resource)
    if state.replica is not None and not await state.replica.recorded(handle):  # answered once any replica finds it
        raise ApiError.store_unavailable(
            handle.error or f"run {handle.id} could not take its lease in the store, so it did not start"
        )
    return JSONResponse(handle.record(), status_code=201, headers={"Location": f"/v1/runs/{handle.id}"})


@router.get("/v1/runs/{run_id}")
async def get_run(state: State, run_id: str) -> dict[str, Any]:
    found = await state.registry.find(run_id)
    if found.held and found.handle is not None:
        return found.handle.record()
    stored = found.stored  # never held here, or continued by another process since it stopped here
    if stored is None or stored.team not in state.served:  # the store's runs of teams served here only
        raise ApiError.run_not_found(run_id)
    assert state.store is not None
    kept = run_id in await asyncio.to_thread(state.store.run_events.kept, [run_id])
    redactor = state.served[stored.team].redactor
    shown: dict[str, Any] = redactor.value(stored_record(stored, events=kept))
    if shown["status"] == "cancelled" and state.replica is not None:  # the words of the replica that cancelled it
        shown["cancel_reason"] = shown["cancel_reason"] or shown["error"]  # (kept in its record)
    if state.replica is not None:  # between two replicas (handed over, its lease expired): running, not interrupted
        shown = await as_replicas_show(state.store, shown)
    return shown


@router.post("/v1/runs/{run_id}/cancel", status_code=202)
async def cancel_run(state: State, run_id: str) -> JSONResponse:
    answer = await state.registry.request_cancel(
        run_id, teams=state.served, reason="cancelled by request", waiting_reason=_WAITING_REASON
    )
    handle, stored = answer.handle, answer.stored
    if answer.outcome == "not_found":
        raise ApiError.run_not_found(run_id)
    if answer.outcome == "cancelling" and handle is not None and not handle.finished:
        return JSONResponse(handle.record(), status_code=202)
    if answer.outcome == "cancelling" and stored is not None:  # it runs on another replica, which applies the cancel
        ended = await _forwarded_outcome(state, run_id)
        if ended is not None and ended.status == "waiting":  # it suspended first: a waiting run's cancel ends it
            return await cancel_run(state, run_id)
        if ended is not None and ended.status != "cancelled":
            raise ApiError(
                409,
                f"run '{run_id}' is not running: it ended ({ended.status}) before the cancel reached its replica",
                code="run_not_running",
            )
        asked = stored_record(ended or stored) | {"cancel_reason": "cancelled by request"}
        if ended is not None:  # the words of the replica that cancelled it (kept in its record)
            asked["cancel_reason"] = ended.cancel_reason or ended.error or "cancelled"
        shown = state.served[stored.team].redactor.value(asked)
        return JSONResponse(shown, status_code=202)
    if answer.outcome == "ended":
        if handle is not None and handle.cancel_reason == _WAITING_REASON:
            return JSONResponse(handle.record(), status_code=202)
        assert stored is not None
        shown = state.served[stored.team].redactor.value(stored_record(stored) | {"cancel_reason": _WAITING_REASON})
        return JSONResponse(shown, status_code=202)
    if answer.outcome == "waiting":
        raise ApiError(
            409,
            f"run '{run_id}' is waiting for people, not running: there is nothing to cancel; "
            "answer its pending items (GET /v1/pending) to continue it",
            code="run_waiting",
        )
    if answer.outcome == "elsewhere":
        raise ApiError(
            409,
            f"run '{run_id}' runs in another process on the same store (another server, or a `teamrun answer` "
            "or `resume` continuing it), not here: cancel it there (Ctrl-C for a teamrun command)",
            code="run_not_running",
        )
    raise ApiError(409, f"run '{run_id}' is not running (it is {answer.status})", code="run_not_running")


async def _forwarded_outcome(state: ServeState, run_id: str) -> JournaledRun | None:
    """The store's record of ``run_id`` once it stopped, for a cancel left for the replica that runs it (which
    applies it on its next heartbeat, or at once on PostgreSQL): a run can end otherwise first (its last step was
    done). ``None``: still running after a few heartbeats (the cancel stands, applied as the run goes on)."""
    if state.replica is None:
        return None
    poll_s = state.replica.tick_s
    for _ in range(FORWARDED_POLLS):
        await asyncio.sleep(poll_s)  # a poll of the store: the run's replica applies the cancel on its heartbeat
        stored = await asyncio.to_thread(state.registry.stored, run_id)
        if stored is None or stored.status != "running":
            return stored
    return None


async def _settling(
    registry: RunRegistry, run_id: str, found: tuple[list[dict[str, Any]] | None, dict[str, Any]] | None
) -> float | None:
    """How long a stream of a run another replica ran waits for the run's last events (its ``run_end``) after its
    record: :data:`STORE_SETTLE_S` while it runs, what is left of them since it ended; ``None``: not to wait (its
    events end with its ``run_end``, or it ended longer ago: a replica that could not keep them)."""
    if found is None:
        return None
    events, record = found
    if record.get("status") == "running":
        return STORE_SETTLE_S
    if events and events[-1].get("kind") == "run_end":
        return None
    stored = await asyncio.to_thread(registry.stored, run_id)
    ended = stored.ended_at if stored is not None else None
    left = STORE_SETTLE_S - (time.time() - ended) if ended is not None else 0.0
    return left if left > 0 else None


@router.get("/v1/runs/{run_id}/events")
async def run_events(state: State, run_id: str, request: Request) -> StreamingResponse:
    start_at = after_event(request.headers.get("last-event-id"))
    registry = state.registry
    leaving = state.replica.leaving if state.replica is not None else None  # SIGTERM: reconnect to another replica
    handle = registry.get(run_id)
    fetch: Fetch | None = None
    if registry.store is not None:
        store = registry.store

        watched: float | None = None

        async def from_store() -> tuple[list[dict[str, Any]] | None, dict[str, Any]] | None:
            nonlocal watched
            found = await stored_events(store, state.served, run_id)
            if found is None or state.replica is None:
                return found
            shown = await as_replicas_show(store, found[1])  # between two replicas: running
            if shown.get("status") == "running":  # followed from here: its replica saves its events every beat
                watched = await state.replica.watching(run_id, watched)
            return found[0], shown

        fetch = from_store
    if handle is None and fetch is not None:  # a run of an earlier server, or of another worker
        found = await fetch()
        settle_s = await _settling(registry, run_id, found) if state.replica is not None else None
        if found is not None and settle_s is not None and state.replica is not None:
            # it runs on another replica (live from the events it saves on its heartbeat), or it has just ended
            # there: its record is written before its last events, which the stream waits for
            stream = store_stream(
                fetch, start_at, state.replica.tick_s, state.keepalive_s, settle_s=settle_s, leaving=leaving
            )
            return StreamingResponse(stream, media_type="text/event-stream", headers=_SSE_HEADERS)
        if found is not None:
            kept, record = found
            if kept is None:
                raise ApiError(
                    404,
                    f"run '{run_id}' is known from the store, without its events (the server that ran it kept "
                    "none: it was stopped mid-run, or the run is older than this teamrun)",
                    code="events_not_kept",
                )
            return StreamingResponse(
                kept_stream(kept, record, start_at), media_type="text/event-stream", headers=_SSE_HEADERS
            )
    handle = state.run(run_id)
    now = await registry.find(run_id)  # continued by another process since it stopped here: its end is the store's
    stored = now.stored if not now.held else None
    result = None
    if stored is not None:  # said as GET /v1/runs/{id} says it, `events` included
        assert registry.store is not None
        events_kept = run_id in await asyncio.to_thread(registry.store.run_events.kept, [run_id])
        result = handle.redactor.value(stored_record(stored, events=events_kept))
    keeper = state.keeper
    if stored is not None and keeper is not None and stored.shown_status() == "running":
        follow = keeper.following(handle)  # another process continues it now: followed from the store to its stop
        if follow is not None:
            poll_s = state.replica.tick_s if state.replica is not None else FOLLOW_POLL_S
            stream = store_stream(follow, start_at, poll_s, state.keepalive_s, leaving=leaving)
            return StreamingResponse(stream, media_type="text/event-stream", headers=_SSE_HEADERS)
    if stored is not None and keeper is not None:  # and its continuation's events, kept by the process that ran it
        whole = await asyncio.to_thread(keeper.continued_elsewhere, handle)
        if whole is not None:
            assert result is not None
            return StreamingResponse(
                kept_stream(whole, result, start_at), media_type="text/event-stream", headers=_SSE_HEADERS
            )
    earlier = await keeper.earlier(handle) if keeper is not None else None
    # a run another replica takes from this one goes on with the store's events, as a stream on another replica
    elsewhere = fetch if state.replica is not None else None
    tick_s = state.replica.tick_s if state.replica is not None else FOLLOW_POLL_S
    if earlier:  # continued here after a restart: what earlier processes ran of it comes first
        stream = continued_stream(
            earlier,
            handle,
            start_at,
            state.keepalive_s,
            result=result,
            leaving=leaving,
            elsewhere=elsewhere,
            poll_s=tick_s,
        )
    else:
        stream = event_stream(
            handle, start_at, state.keepalive_s, result=result, leaving=leaving, elsewhere=elsewhere, poll_s=tick_s
        )
    return StreamingResponse(stream, media_type="text/event-stream", headers=_SSE_HEADERS)
