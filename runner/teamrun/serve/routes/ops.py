"""Operations and the page: ``/healthz``, ``/readyz``, the web page (``/``, ``/web/{name}``); ``/metrics`` is its
own router (behind the tokens)."""

from __future__ import annotations

from importlib import resources
from typing import Annotated

from fastapi import APIRouter, Depends
from fastapi.responses import JSONResponse, Response

from teamrun.serve.errors import ApiError
from teamrun.serve.metrics import CONTENT_TYPE as METRICS_CONTENT_TYPE
from teamrun.serve.state import ServeState, serve_state

__all__ = ["metrics_router", "router"]

router = APIRouter()
metrics_router = APIRouter()
State = Annotated[ServeState, Depends(serve_state)]

_MEDIA_TYPES = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
}


def _web_files() -> dict[str, str]:
    """The page's files shipped in the package (``serve/web/``), each with its media type."""
    found: dict[str, str] = {}
    for entry in resources.files("teamrun.serve").joinpath("web").iterdir():
        media_type = _MEDIA_TYPES.get("." + entry.name.rpartition(".")[2])
        if media_type is not None and entry.is_file():
            found[entry.name] = media_type
    return found


_WEB_FILES = _web_files()
_WEB_HEADERS = {
    "Content-Security-Policy": "default-src 'self'; style-src 'self'; script-src 'self'; "
    "connect-src 'self'; frame-ancestors 'none'",
    "X-Content-Type-Options": "nosniff",
    "Cache-Control": "no-cache",
}


@router.get("/healthz")
async def healthz() -> dict[str, str]:
    return {"status": "ok"}


@router.get("/readyz")
async def readyz(state: State) -> JSONResponse:
    registry = state.registry
    if registry.closing:
        return JSONResponse({"status": "shutting_down"}, status_code=503)
    return JSONResponse(
        {
            "status": "ready",
            "teams": sorted(state.served),
            "active_runs": registry.active,
            "max_concurrent_runs": registry.max_concurrent,
            "store": state.store.dialect if state.store is not None else None,
        }
    )


@metrics_router.get("/metrics")
async def metrics(state: State) -> Response:
    return Response(state.registry.metrics.render(), media_type=METRICS_CONTENT_TYPE)


@router.get("/")
async def page() -> Response:
    return _web_file("index.html")


@router.get("/web/{name}")
async def web_file(name: str) -> Response:
    if name not in _WEB_FILES:
        raise ApiError(404, f"no file '{name}'", code="not_found")
    return _web_file(name)


def _web_file(name: str) -> Response:
    """One file of the page (plain HTML, a small script, a stylesheet), shipped in the package."""
    body = resources.files("teamrun.serve").joinpath("web", name).read_bytes()
    return Response(body, media_type=_WEB_FILES[name], headers=_WEB_HEADERS)
