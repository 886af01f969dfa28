"""``GET /v1/teams`` (the teams served, their shapes and graphs: :mod:`teamrun.serve.teams_api`) and
``GET /v1/threads/{thread_id}`` (a thread's turns, for the page)."""

from __future__ import annotations

import asyncio
from typing import Annotated, Any

from fastapi import APIRouter, Depends

from teamrun.serve.errors import ApiError
from teamrun.serve.state import ServeState, serve_state
from teamrun.serve.teams_api import team_view

__all__ = ["router"]

router = APIRouter()
State = Annotated[ServeState, Depends(serve_state)]


@router.get("/v1/teams")
async def teams_list(state: State) -> dict[str, Any]:
    return {"object": "list", "data": [team_view(name, entry) for name, entry in sorted(state.served.items())]}


@router.get("/v1/threads/{thread_id}")
async def thread_turns(state: State, thread_id: str) -> dict[str, Any]:
    store = state.store
    if store is None:
        raise ApiError(400, "this server keeps no threads (start it with --store PATH|URL)", code="threads_unavailable")
    record = await asyncio.to_thread(store.threads.get, thread_id)
    entry = state.served.get(record.team) if record is not None else None
    if record is None or entry is None:
        raise ApiError(404, f"no thread '{thread_id}' of a team served here", code="thread_not_found")
    messages = await asyncio.to_thread(store.threads.shown_messages, thread_id)
    turns = [
        {
            "role": m.role,
            "content": m.content if isinstance(m.content, str) else str(m.content),
            "agent": m.agent,
            "run_id": m.run_id,
            "turn": m.turn,
            "created_at": m.created_at.isoformat() if m.created_at else None,
        }
        for m in messages
        if m.role in ("user", "assistant")
    ]
    shown: dict[str, Any] = entry.redactor.value({"object": "teamrun.thread", **record.as_dict(), "messages": turns})
    return shown
