"""The server's error answer: ``{"error": {"message", "type", "code", ...}}`` (the OpenAI shape), for every route
but A2A's (JSON-RPC errors: :mod:`teamrun.serve.a2a.routes`), and the handlers that answer every failure so."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import Response
from starlette.exceptions import HTTPException as StarletteHTTPException

from teamrun.errors import StoreError
from teamrun.logs import get_logger
from teamrun.secrets import Redactor
from teamrun.serve.runs import ServerBusy, ShuttingDown
from teamrun.serve.security import printable
from teamrun.serve.wire import BODY_NOT_JSON, NOT_JSON

__all__ = ["ApiError", "add_error_handlers", "masked_json", "plain_store_error"]

_log = get_logger(__name__)


class ApiError(Exception):
    """An error answered in the OpenAI error shape: ``{"error": {"message", "type", "code"}}``."""

    def __init__(
        self,
        status: int,
        message: str,
        *,
        type: str = "invalid_request_error",
        code: str | None = None,
        headers: dict[str, str] | None = None,
        extra: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.type = type
        self.code = code
        self.headers = headers or {}
        self.extra = extra or {}

    @classmethod
    def slot_refused(cls, exc: ServerBusy | ShuttingDown, retry_after_s: int, *, busy: str, closing: str) -> ApiError:
        """No run slot: 429 ``too_many_runs`` (``busy``) or 503 ``shutting_down`` (``closing``), with Retry-After."""
        headers = {"Retry-After": str(retry_after_s)}
        if isinstance(exc, ServerBusy):
            return cls(429, busy, type="rate_limit_error", code="too_many_runs", headers=headers)
        return cls(503, closing, type="server_error", code="shutting_down", headers=headers)

    @classmethod
    def store_unavailable(cls, message: str, retry_after_s: int = 1) -> ApiError:
        """503 ``store_unavailable`` with Retry-After: the store did not answer. ``message`` is said plainly, its
        first line only (a database driver's SQL, parameters and links stay in the logs)."""
        return cls(
            503,
            plain_store_error(message),
            type="server_error",
            code="store_unavailable",
            headers={"Retry-After": str(retry_after_s)},
        )

    @classmethod
    def run_not_found(cls, run_id: str) -> ApiError:
        return cls(404, f"no run '{run_id}' on this server", code="run_not_found")

    def response(self, redactor: Redactor) -> Response:
        body = {"error": {"message": printable(self.message), "type": self.type, "code": self.code, **self.extra}}
        return masked_json(redactor, body, status_code=self.status, headers=self.headers)


_DRIVER_NAME = re.compile(r"\((?:[A-Za-z_][\w]*\.)*[A-Za-z_]\w*\) ")
"""A database driver's exception name as SQLAlchemy puts it before its message: ``(psycopg.OperationalError) ``."""
_RETRY = "; retry the request"


def plain_store_error(message: str) -> str:
    """A store failure's first line, without the driver's exception names or SQLAlchemy's link, asking for a
    retry once."""
    first = (message.strip().splitlines() or [""])[0].strip()
    first = _DRIVER_NAME.sub("", first.split("(Background on this error at:")[0]).rstrip(" ;:")
    first = first.removesuffix(_RETRY.lstrip("; ")).rstrip(" ;:")
    return (first or "the store did not answer") + _RETRY


def masked_json(
    redactor: Redactor, content: Any, *, status_code: int = 200, headers: Mapping[str, str] | None = None
) -> Response:
    """A JSON response of ``content`` with secrets masked, written once (:meth:`Redactor.dumps`)."""
    body = redactor.dumps(content, ensure_ascii=False, allow_nan=False, indent=None, separators=(",", ":"))
    return Response(body.encode("utf-8"), status_code=status_code, headers=headers, media_type="application/json")


def add_error_handlers(app: FastAPI, redactor: Redactor) -> None:
    """Answer every failure of ``app``'s routes in the error shape, masked with the server's ``redactor``."""

    async def api_error(_: Request, exc: Exception) -> Response:
        assert isinstance(exc, ApiError)
        return exc.response(redactor)

    async def invalid_request(_: Request, exc: Exception) -> Response:
        assert isinstance(exc, RequestValidationError)
        return _invalid(exc).response(redactor)

    async def http_error(request: Request, exc: Exception) -> Response:
        # The router's own answers (no such route, method not allowed, a body that is not JSON) in our shape.
        assert isinstance(exc, StarletteHTTPException)
        return _http_problem(request, exc).response(redactor)

    async def store_error(_: Request, exc: Exception) -> Response:
        # the store out of reach (or its pool dry) as a route read it: a retry may find it, no traceback
        _log.warning("serve_store_unavailable", error_type=type(exc).__name__, error=redactor.text(str(exc)))
        return ApiError.store_unavailable(str(exc)).response(redactor)

    async def internal_error(_: Request, exc: Exception) -> Response:
        _log.error("serve_internal_error", error_type=type(exc).__name__, error=redactor.text(str(exc)))
        return ApiError(500, "internal server error", type="server_error", code="internal_error").response(redactor)

    app.add_exception_handler(ApiError, api_error)
    app.add_exception_handler(RequestValidationError, invalid_request)
    app.add_exception_handler(StarletteHTTPException, http_error)
    app.add_exception_handler(StoreError, store_error)
    app.add_exception_handler(Exception, internal_error)


def _invalid(exc: RequestValidationError) -> ApiError:
    problems = [f"{'.'.join(str(p) for p in err.get('loc', ()))}: {err.get('msg', 'invalid')}" for err in exc.errors()]
    if any(err.get("type") == "lone_surrogate" for err in exc.errors()):  # malformed text, like the MCP
        # endpoint's JSON parser says (400): not a request that could be right with other values
        return ApiError(400, "invalid request: " + "; ".join(problems), code="invalid_text")
    not_json = [err for err in exc.errors() if err.get("type") == BODY_NOT_JSON]
    if not_json:  # a body not labelled JSON (read as JSON all the same) that is not JSON either
        return ApiError(400, str(not_json[0].get("msg")), code="invalid_json")
    if any(_unparsed(err) for err in exc.errors()):  # FastAPI's own reading of a body labelled JSON
        return ApiError(400, NOT_JSON, code="invalid_json")
    return ApiError(422, "invalid request: " + "; ".join(problems), code="invalid_request")


def _unparsed(err: Mapping[str, Any]) -> bool:
    """Whether ``err`` is FastAPI's for a body labelled ``application/json`` that is not JSON (``json_invalid`` at
    ``body.<offset>``), or for no body at all (``missing`` at ``body``: FastAPI reads an empty body as none)."""
    loc = tuple(err.get("loc", ()))
    return err.get("type") == "json_invalid" or (err.get("type") == "missing" and loc == ("body",))


_HTTP_CODES = {400: "invalid_json", 404: "not_found", 405: "method_not_allowed"}


def _http_problem(request: Request, exc: StarletteHTTPException) -> ApiError:
    """An error raised by the router or FastAPI itself, as an :class:`ApiError`."""
    status = exc.status_code
    where = f"{request.method} {request.url.path}"
    if status == 404:
        message = f"no route {where} (the API is under /v1: /v1/models, /v1/chat/completions, /v1/runs)"
    elif status == 405:
        allowed = (exc.headers or {}).get("Allow") or (exc.headers or {}).get("allow")
        message = f"method {request.method} is not allowed on {request.url.path}" + (
            f" (allowed: {allowed})" if allowed else ""
        )
    elif status == 400:  # FastAPI's answer to a body labelled JSON its parser gave up on (nested too deeply)
        message = NOT_JSON
    else:
        message = str(exc.detail)
    return ApiError(
        status,
        message,
        type="invalid_request_error" if status < 500 else "server_error",
        code=_HTTP_CODES.get(status, f"http_{status}"),
        headers=dict(exc.headers or {}),
    )
