"""``DELETE /v1/memory/{resource}``: forget everything of a resource (docs/memory.md), as
``teamrun memory forget --resource ID`` does, and say what was removed."""

from __future__ import annotations

import asyncio
from typing import Annotated, Any

from fastapi import APIRouter, Depends

from teamrun.serve.errors import ApiError
from teamrun.serve.state import ServeState, serve_state
from teamrun.store.memory import MemoryRefused, check_resource_id

__all__ = ["router"]

router = APIRouter()
State = Annotated[ServeState, Depends(serve_state)]


@router.delete("/v1/memory/{resource}")
async def forget_resource(state: State, resource: str) -> dict[str, Any]:
    """Forget ``resource`` in every store the served teams keep memories in (the server's store, else each
    team's own): its memories, working memory and what its runs' journals keep of them, one transaction each."""
    try:
        check_resource_id(resource)
    except MemoryRefused as exc:
        raise ApiError(400, f"resource: {exc}", code="invalid_resource") from None

    def forget() -> dict[str, Any]:
        from teamrun.engine.memory.opening import memory_store_of

        stores = {id(entry.team.store): entry.team.store for entry in state.served.values()}
        if state.store is not None:
            stores = {id(state.store): state.store}
        removed = {"resource": resource, "memories": 0, "working_memory": 0, "runs": 0, "journal_entries": 0}
        for store in stores.values():
            gone = memory_store_of(store).forget(resource).as_dict()
            for key in ("memories", "working_memory", "runs", "journal_entries"):
                removed[key] += gone[key]
        return removed

    return await asyncio.to_thread(forget)
