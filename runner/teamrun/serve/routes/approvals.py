"""Approvals without a store: ``POST /v1/runs/{run}/approvals/{id}`` answers a tool call waiting for a yes or no
(:mod:`teamrun.serve.approvals`). With a store they are pending items (:mod:`teamrun.serve.routes.pending`)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends

from teamrun.serve.errors import ApiError
from teamrun.serve.runs import AlreadyDecided
from teamrun.serve.state import ServeState, serve_state
from teamrun.serve.wire import ApprovalAnswer

__all__ = ["router"]

router = APIRouter()


@router.post("/v1/runs/{run_id}/approvals/{approval_id}")
async def answer_approval(
    state: Annotated[ServeState, Depends(serve_state)], run_id: str, approval_id: str, body: ApprovalAnswer
) -> dict[str, Any]:
    handle = state.run(run_id)
    try:
        pending = handle.answer(approval_id, body.approve)
    except AlreadyDecided as exc:
        raise ApiError(409, str(exc), code="approval_decided") from None
    if pending is None:
        raise ApiError(404, f"run '{run_id}' has no approval '{approval_id}'", code="approval_not_found")
    shown: dict[str, Any] = handle.redactor.value(pending.as_dict())
    return shown
