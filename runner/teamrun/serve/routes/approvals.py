"""Approvals: ``POST /v1/runs/{run}/approvals/{id}`` answers a tool call waiting for a yes or no.

Without a store the run holds the call in memory (:mod:`teamrun.serve.approvals`). With a store an approval is a
pending item (:mod:`teamrun.serve.routes.pending`): this route answers it through the one answer service, as
``POST /v1/runs/{run}/pending/{id}`` with ``{"approve": ..., "note"?: ..., "by"?: ...}`` does (the same fields;
without a store ``note`` and ``by`` are accepted and not kept: the run holds only the decision).
"""

from __future__ import annotations

import asyncio
from typing import Annotated, Any

from fastapi import APIRouter, Depends

from teamrun.serve.answers import PendingAnswer
from teamrun.serve.errors import ApiError
from teamrun.serve.routes.pending import answer_item
from teamrun.serve.runs import AlreadyDecided
from teamrun.serve.state import ServeState, serve_state
from teamrun.serve.wire import ApprovalAnswer

__all__ = ["router"]

router = APIRouter()


@router.post("/v1/runs/{run_id}/approvals/{approval_id}")
async def answer_approval(
    state: Annotated[ServeState, Depends(serve_state)], run_id: str, approval_id: str, body: ApprovalAnswer
) -> dict[str, Any]:
    if state.answers is not None:  # with a store: an approval the run waits for is a pending item
        item = await asyncio.to_thread(state.answers.items.get, run_id, approval_id)
        if item is not None and item.kind == "approval":
            answer = PendingAnswer(approve=body.approve, note=body.note, by=body.by)
            return await answer_item(state, run_id, approval_id, answer)
    handle = state.run(run_id)
    try:
        pending = handle.answer(approval_id, body.approve)
    except AlreadyDecided as exc:
        raise ApiError(409, str(exc), code="approval_decided") from None
    if pending is None:
        raise ApiError(404, f"run '{run_id}' has no approval '{approval_id}'", code="approval_not_found")
    shown: dict[str, Any] = handle.redactor.value(pending.as_dict())
    return shown
