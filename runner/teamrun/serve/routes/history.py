"""Run history for the web page: ``GET /v1/runs`` lists runs (:func:`teamrun.serve.history.list_runs_async`),
``/view/*`` serves the run view's files."""

from __future__ import annotations

from importlib import resources
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query
from fastapi.responses import Response

from teamrun.observe.view import ASSETS
from teamrun.serve.errors import ApiError
from teamrun.serve.history import MAX_LISTED, RUN_STATUSES, list_runs_async
from teamrun.serve.state import ServeState, serve_state

__all__ = ["router", "view_router"]

router = APIRouter()
"""``GET /v1/runs`` (behind the tokens)."""
view_router = APIRouter()
"""The run view's files (no token: they hold no run)."""

_VIEW_HEADERS = {"X-Content-Type-Options": "nosniff", "Cache-Control": "no-cache"}


@router.get("/v1/runs")
async def runs_list(
    state: Annotated[ServeState, Depends(serve_state)],
    status: Annotated[str | None, Query(pattern="^(" + "|".join(RUN_STATUSES) + ")$")] = None,
    thread: Annotated[str | None, Query(min_length=1, max_length=200)] = None,
    team: Annotated[str | None, Query(min_length=1, max_length=200)] = None,
    limit: Annotated[int, Query(ge=1, le=MAX_LISTED)] = 100,
) -> dict[str, Any]:
    found = await list_runs_async(state.registry, state.served, status=status, thread=thread, team=team, limit=limit)
    return {"object": "list", "data": found}


@view_router.get("/favicon.ico", include_in_schema=False)
async def favicon() -> Response:  # no icon, and no 404 in the browser's console either
    return Response(status_code=204)


@view_router.get("/view/{name}")
async def view_file(name: str) -> Response:
    if name not in ASSETS:
        raise ApiError(
            404, f"no file '{name}' in the run view; its files: {', '.join(sorted(ASSETS))}", code="not_found"
        )
    body = resources.files("teamrun.observe.view").joinpath(name).read_bytes()
    return Response(body, media_type=ASSETS[name], headers=_VIEW_HEADERS)
