"""``DELETE /v1/memory/{resource}``: forget everything of a resource (docs/memory.md), as
``teamrun memory forget --resource ID`` does, and say what was removed.

The resource is the rest of the path, percent-decoded once (``org%2Facme`` is ``org/acme``, as is ``org/acme``):
a resource id may hold any printable text. A path whose bytes are not UTF-8 is a ``400 invalid_text`` (as a body's
text is); an id the resource rule refuses a ``422 invalid_request`` (as ``POST /v1/runs`` answers it)."""

from __future__ import annotations

import asyncio
from typing import Annotated, Any
from urllib.parse import unquote_to_bytes

from fastapi import APIRouter, Depends, Request
from starlette.convertors import PathConvertor, register_url_convertor

from teamrun.serve.errors import ApiError
from teamrun.serve.state import ServeState, serve_state
from teamrun.store.memory import MemoryRefused, check_resource_id

__all__ = ["router"]

router = APIRouter()
State = Annotated[ServeState, Depends(serve_state)]
_PREFIX = b"/v1/memory/"


class _AnyText(PathConvertor):
    """The rest of the path, ``/`` and control characters included (Starlette's ``path`` stops at a newline, so
    ``a%0Ab`` was a 404 instead of the resource rule's 422)."""

    regex = "(?s:.+)"


register_url_convertor("teamrun_resource", _AnyText())
_COUNTS = ("memories", "working_memory", "indexed_messages", "runs", "journal_entries", "events")


def _resource_of(request: Request, decoded: str) -> str:
    """The resource as the client sent it: the raw path's bytes after the prefix, percent-decoded, strictly UTF-8
    (Starlette's decoding puts U+FFFD for bytes that are not)."""
    raw = request.scope.get("raw_path")
    if not isinstance(raw, bytes):
        return decoded
    start = raw.find(_PREFIX)
    if start < 0:
        return decoded
    try:
        return unquote_to_bytes(raw[start + len(_PREFIX) :].split(b"?", 1)[0]).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ApiError(
            400,
            f"invalid request: the resource in the path is not UTF-8 text (byte 0x{exc.object[exc.start]:02X}); "
            "percent-encode the id's UTF-8 bytes, e.g. 'org%2Facme' for 'org/acme'",
            code="invalid_text",
        ) from None


@router.delete("/v1/memory/{resource:teamrun_resource}")
async def forget_resource(state: State, request: Request, resource: str) -> dict[str, Any]:
    """Forget ``resource`` in every store the served teams keep memories in (the server's store, else each
    team's own): its memories, working memory and what its runs' journals and kept events keep of them, one
    transaction each. The server stops holding the resource's ended runs (their results and events in memory):
    they are answered from the store, redacted, from now on."""
    resource = _resource_of(request, resource)
    try:
        check_resource_id(resource)
    except MemoryRefused as exc:
        raise ApiError(422, f"invalid request: resource: {exc}", code="invalid_request") from None

    def forget() -> tuple[dict[str, Any], set[str]]:
        from teamrun.engine.memory.opening import memory_store_of

        stores = {id(entry.team.store): entry.team.store for entry in state.served.values()}
        if state.store is not None:
            stores = {id(state.store): state.store}
        removed: dict[str, Any] = {"resource": resource, **dict.fromkeys(_COUNTS, 0)}
        runs: set[str] = set()
        for store in stores.values():
            gone = memory_store_of(store).forget(resource)
            runs.update(gone.run_ids)
            counted = gone.as_dict()
            for key in _COUNTS:
                removed[key] += counted[key]
        return removed, runs

    removed, runs = await asyncio.to_thread(forget)
    state.registry.let_go_of(resource, runs)
    return removed
