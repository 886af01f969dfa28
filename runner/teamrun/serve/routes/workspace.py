"""``GET /v1/runs/{run_id}/workspace``: a run's workspace (held here, else from the store), ``?since=N`` the
writes after version N (:mod:`teamrun.serve.workspace`)."""

from __future__ import annotations

import asyncio
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query

from teamrun.serve.errors import ApiError
from teamrun.serve.state import ServeState, serve_state
from teamrun.serve.workspace import held_workspace, stored_workspace

__all__ = ["router"]

router = APIRouter()


def _no_workspace(run_id: str, team: str) -> ApiError:
    return ApiError(
        404,
        f"run '{run_id}' has no workspace: team '{team}' declares no `workspace:` (see docs/team-file.md)",
        code="no_workspace",
    )


@router.get("/v1/runs/{run_id}/workspace")
async def run_workspace(
    state: Annotated[ServeState, Depends(serve_state)],
    run_id: str,
    since: Annotated[int | None, Query(ge=0, le=2**53)] = None,
) -> dict[str, Any]:
    registry = state.registry
    handle = registry.get(run_id)
    target = state.served.get(handle.team) if handle is not None else None
    if handle is not None and target is not None:
        spec = target.team.config.workspace
        if spec is None:
            raise _no_workspace(run_id, handle.team)
        return held_workspace(handle, spec, since)
    store = registry.store
    found = await asyncio.to_thread(stored_workspace, store, state.served, run_id, since) if store else None
    if found is None:
        raise ApiError.run_not_found(run_id)
    if not found:
        stored = await asyncio.to_thread(registry.stored, run_id)
        raise _no_workspace(run_id, stored.team if stored is not None else "?")
    return found
