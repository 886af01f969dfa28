"""The HTTP application: the OpenAI-compatible endpoint, the native runs API, health checks.

Build it with :func:`create_app` (teams already loaded) and serve it with any
ASGI server; ``teamrun serve`` uses uvicorn (:mod:`teamrun.serve.server`).
Every run goes through :class:`~teamrun.serve.runs.RunRegistry`, which calls
:meth:`Team.run <teamrun.engine.team.Team.run>` and subscribes to its typed events.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from importlib import resources
from typing import TYPE_CHECKING, Annotated, Any, Literal

from fastapi import Depends, FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.middleware.cors import CORSMiddleware
from fastapi.responses import JSONResponse, Response, StreamingResponse
from pydantic import BaseModel, ConfigDict, Field, model_validator
from pydantic_core import PydanticCustomError
from starlette.exceptions import HTTPException as StarletteHTTPException

from teamrun.config.models import Limits
from teamrun.logs import get_logger
from teamrun.secrets import Redactor
from teamrun.serve.a2a import mount_a2a
from teamrun.serve.approvals import DEFAULT_APPROVAL_TIMEOUT_S
from teamrun.serve.history import EventKeeper, mount_history, stored_events
from teamrun.serve.metrics import CONTENT_TYPE as METRICS_CONTENT_TYPE
from teamrun.serve.pending import mount_pending
from teamrun.serve.runs import (
    AlreadyDecided,
    BudgetTooHigh,
    NoThreads,
    RunHandle,
    RunRegistry,
    ServerBusy,
    ShuttingDown,
    check_budgets,
    stored_record,
)
from teamrun.serve.security import LONE_SURROGATE, BodyLimit, lone_surrogate, printable, token_matches
from teamrun.serve.teams_api import mount_teams
from teamrun.serve.workspace import mount_workspace

if TYPE_CHECKING:
    from teamrun.engine.team import Team
    from teamrun.store import Store

__all__ = ["ServeSettings", "create_app"]

_log = get_logger(__name__)

KEEPALIVE_S = 10.0
"""Seconds between SSE comment lines while a run has nothing to say (keeps proxies from closing the stream)."""
CHUNK_CHARS = 48
"""About how many characters of the answer each streamed chunk carries."""
THREAD_HEADER = "X-Teamrun-Thread"
"""The request header naming the thread a chat completion continues (it wins over the ``user`` field)."""
CORS_HEADERS = (
    "Authorization",
    "Content-Type",
    THREAD_HEADER,
    "A2A-Version",
    "A2A-Extensions",
    "X-A2A-Extensions",
    "Cache-Control",
)
"""Request headers a browser may send (with ``--cors-origin``): the API's, and what an a2a-sdk client sends
(``A2A-Version: 1.0``, its extensions, ``Cache-Control: no-store`` on a stream)."""


@dataclass
class ServeSettings:
    """How the server guards itself."""

    tokens: frozenset[str] = frozenset()
    """Bearer tokens accepted; empty means no auth (allowed only on a loopback address)."""
    max_concurrent_runs: int = 20
    """Runs in progress at once; one more is answered 429 with ``Retry-After``."""
    max_request_bytes: int = 1_048_576
    """Largest request body; a larger one is answered 413."""
    cors_origins: Sequence[str] = ()
    """Origins allowed by CORS; none (CORS off) by default."""
    retry_after_s: int = 1
    """The ``Retry-After`` a 429 carries."""
    approval_timeout_s: float = DEFAULT_APPROVAL_TIMEOUT_S
    """Seconds a tool call that needs approval waits for ``POST .../approvals/{id}`` before it is denied."""
    approval_on_timeout: Literal["deny", "fail"] = "deny"
    """What an approval nobody answered in time does (without a store): deny the call, or fail the run."""
    extra_secrets: frozenset[str] = field(default_factory=frozenset)
    """More values to mask in every response and event (the tokens are always masked)."""
    store: Store | None = None
    """Where threads are kept (a PostgreSQL store can be shared by several servers); ``None``: no threads,
    each request is one run."""
    content: bool = False
    """Keep ``llm_io`` events (each model call's messages, masked) in a run's events, for the page's run view;
    the teams' models must publish them (``load_team(..., wrap_model=ContentCapture)``)."""


# -- wire shapes --------------------------------------------------------------------------------


class _Wire(BaseModel):
    """A request body: text that is not valid Unicode is refused (400) before anything runs."""

    @model_validator(mode="before")
    @classmethod
    def _valid_unicode(cls, data: Any) -> Any:
        where = lone_surrogate(data)
        if where is not None:
            raise PydanticCustomError("lone_surrogate", "{where} " + LONE_SURROGATE, {"where": where})
        return data


class ChatMessage(BaseModel):
    model_config = ConfigDict(extra="allow")
    role: str
    content: str | list[dict[str, Any]] | None = None


class ChatRequest(_Wire):
    """The parts of an OpenAI chat-completions request teamrun reads; other fields are accepted and ignored."""

    model_config = ConfigDict(extra="allow")
    model: str
    messages: Annotated[list[ChatMessage], Field(min_length=1)]
    stream: bool = False
    stream_options: dict[str, Any] | None = None
    user: str | None = None


class RunRequest(_Wire):
    """``POST /v1/runs``."""

    model_config = ConfigDict(extra="forbid")
    team: str
    """The team's name."""
    input: Annotated[str, Field(min_length=1)]
    """The task for the supervisor."""
    vars: dict[str, str | int | float | bool] | None = None
    """Template variables, over the team file's ``vars``."""
    budgets: Limits | None = None
    """Run limits for this run; each may only be lower than the team's ``limits``."""
    thread: Annotated[str, Field(min_length=1, max_length=200)] | None = None
    """The thread this run continues (or starts); needs a server with a store."""


class ApprovalAnswer(_Wire):
    """``POST /v1/runs/{run}/approvals/{id}``."""

    model_config = ConfigDict(extra="forbid")
    approve: bool
    """``true`` runs the tool call, ``false`` denies it."""


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

    def response(self, redactor: Redactor) -> Response:
        body = {"error": {"message": printable(self.message), "type": self.type, "code": self.code, **self.extra}}
        return _masked_json(redactor, body, status_code=self.status, headers=self.headers)


def _masked_json(
    redactor: Redactor, content: Any, *, status_code: int = 200, headers: Mapping[str, str] | None = None
) -> Response:
    """A :class:`JSONResponse` of ``content`` with secrets masked, written once (:meth:`Redactor.dumps`)."""
    body = redactor.dumps(content, ensure_ascii=False, allow_nan=False, indent=None, separators=(",", ":"))
    return Response(body.encode("utf-8"), status_code=status_code, headers=headers, media_type="application/json")


# -- the app ------------------------------------------------------------------------------------


@dataclass
class _Served:
    team: Team
    redactor: Redactor


def create_app(teams: Sequence[Team], settings: ServeSettings | None = None) -> FastAPI:
    """The ASGI app serving ``teams`` (addressed by their ``name``).

    With ``settings.store``, each team keeps its threads and run records there (:meth:`Team.use_store`, once
    here); every request is a :meth:`Team.run` of the team itself, with the run's own options.
    """
    settings = settings or ServeSettings()
    registry = RunRegistry(
        max_concurrent=settings.max_concurrent_runs,
        retry_after_s=settings.retry_after_s,
        approval_timeout_s=settings.approval_timeout_s,
        approval_on_timeout=settings.approval_on_timeout,
        store=settings.store,
        content=settings.content,
    )
    masked_always = set(settings.tokens) | set(settings.extra_secrets)
    served: dict[str, _Served] = {}
    for team in teams:
        if settings.store is not None:  # the server's store holds every served team's threads and run records
            team.use_store(settings.store)
        served[team.name] = _Served(team, Redactor([*team.loaded.secrets, *masked_always]))
    server_redactor = Redactor(masked_always)
    keeper = EventKeeper(settings.store) if settings.store is not None else None
    if keeper is not None:  # each run's events are kept in the store as it ends or suspends
        registry.when_over.append(keeper.run_over)

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        for team in teams:  # before the first request: LiteLLM's import and its first-call set-up per model
            warmed = await team.warm_up()
            if warmed:
                _log.info("models_warmed", team=team.name, models=warmed)
        yield
        registry.cancel_all("server shutting down")
        await registry.drain()
        if keeper is not None:
            await keeper.flush()

    app = FastAPI(title="teamrun", lifespan=lifespan, docs_url=None, redoc_url=None, openapi_url=None)
    app.state.registry = registry
    app.state.teams = served

    async def authorize(request: Request) -> None:  # async: a plain def would hop to a thread per request
        if settings.tokens and not token_matches(request.headers.get("authorization"), settings.tokens):
            raise ApiError(
                401,
                "missing or invalid bearer token (send `Authorization: Bearer <token>`)",
                type="authentication_error",
                code="invalid_api_key",
                headers={"WWW-Authenticate": "Bearer"},
            )

    auth = [Depends(authorize)] if settings.tokens else []  # without tokens it checks nothing: not run per request

    @app.exception_handler(ApiError)
    async def api_error(_: Request, exc: ApiError) -> Response:
        return exc.response(server_redactor)

    @app.exception_handler(RequestValidationError)
    async def invalid_request(_: Request, exc: RequestValidationError) -> Response:
        problems = [
            f"{'.'.join(str(p) for p in err.get('loc', ()))}: {err.get('msg', 'invalid')}" for err in exc.errors()
        ]
        if any(err.get("type") == "lone_surrogate" for err in exc.errors()):  # malformed text, like the MCP
            # endpoint's JSON parser says (400): not a request that could be right with other values
            return ApiError(400, "invalid request: " + "; ".join(problems), code="invalid_text").response(
                server_redactor
            )
        return ApiError(422, "invalid request: " + "; ".join(problems), code="invalid_request").response(
            server_redactor
        )

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> Response:
        # The router's own answers (no such route, method not allowed, a body that is not JSON) in our shape.
        return _http_problem(request, exc).response(server_redactor)

    @app.exception_handler(Exception)
    async def internal_error(_: Request, exc: Exception) -> Response:
        _log.error("serve_internal_error", error_type=type(exc).__name__, error=server_redactor.text(str(exc)))
        return ApiError(500, "internal server error", type="server_error", code="internal_error").response(
            server_redactor
        )

    def find_team(name: str) -> _Served:
        found = served.get(name)
        if found is None:
            known = ", ".join(sorted(served))
            raise ApiError(
                404,
                f"team '{name}' is not served here; teams: {known}",
                code="model_not_found",
                extra={"teams": sorted(served)},
            )
        return found

    def start(
        team: Team,
        input: str,
        redactor: Redactor,
        thread: str | None = None,
        *,
        limits: Limits | None = None,
        vars: dict[str, Any] | None = None,
    ) -> RunHandle:
        try:
            return registry.start(team, input, redactor=redactor, thread=thread, limits=limits, vars=vars)
        except NoThreads as exc:
            raise ApiError(400, str(exc), code="threads_unavailable") from None
        except (ServerBusy, ShuttingDown) as exc:
            wait = registry.retry_after_s
            raise ApiError.slot_refused(exc, wait, busy=f"{exc}; retry after {wait} s", closing=str(exc)) from None

    def find_run(run_id: str) -> RunHandle:
        handle = registry.get(run_id)
        if handle is None:
            raise ApiError(404, f"no run '{run_id}' on this server", code="run_not_found")
        return handle

    # -- operations ------------------------------------------------------------------------------

    @app.get("/healthz")
    async def healthz() -> dict[str, str]:
        return {"status": "ok"}

    @app.get("/readyz")
    async def readyz() -> JSONResponse:
        if registry.closing:
            return JSONResponse({"status": "shutting_down"}, status_code=503)
        return JSONResponse(
            {
                "status": "ready",
                "teams": sorted(served),
                "active_runs": registry.active,
                "max_concurrent_runs": registry.max_concurrent,
                "store": settings.store.dialect if settings.store is not None else None,
            }
        )

    @app.get("/metrics", dependencies=auth)
    async def metrics() -> Response:
        return Response(registry.metrics.render(), media_type=METRICS_CONTENT_TYPE)

    # -- the web page ----------------------------------------------------------------------------

    @app.get("/")
    async def page() -> Response:
        return _web_file("index.html")

    @app.get("/web/{name}")
    async def web_file(name: str) -> Response:
        if name not in _WEB_FILES:
            raise ApiError(404, f"no file '{name}'", code="not_found")
        return _web_file(name)

    # -- OpenAI-compatible -----------------------------------------------------------------------

    @app.get("/v1/models", dependencies=auth)
    async def models() -> dict[str, Any]:
        return {
            "object": "list",
            "data": [
                {
                    "id": name,
                    "object": "model",
                    "created": 0,
                    "owned_by": "teamrun",
                    "description": s.team.config.description or "",
                }
                for name, s in sorted(served.items())
            ],
        }

    @app.post("/v1/chat/completions", dependencies=auth)
    async def chat_completions(body: ChatRequest, request: Request) -> Response:
        target = find_team(body.model)
        thread, warning = _chat_thread(request.headers.get(THREAD_HEADER), body.user, registry.store is not None)
        handle = start(target.team, _last_user_message(body.messages), target.redactor, thread)
        completion_id = "chatcmpl-" + handle.id.removeprefix("run_")
        headers = {"x-teamrun-run-id": handle.id}
        if thread is not None and thread.isascii() and thread.isprintable():  # a header carries only those
            headers[THREAD_HEADER.lower()] = thread
        if warning:
            headers["x-teamrun-warning"] = warning
        if body.stream:
            include_usage = bool((body.stream_options or {}).get("include_usage"))
            return _ChatStream(registry, handle, completion_id, body.model, include_usage, headers)
        try:
            with _cancelled_if_client_leaves(registry, handle, request.receive):
                await handle.wait()
        except asyncio.CancelledError:  # the server is stopping, or the client went away: so does its run
            registry.cancel(handle.id, "client disconnected")
            raise
        problem = _run_problem(handle)
        if problem is not None:
            raise problem
        assert handle.result is not None
        return _masked_json(handle.redactor, _completion(handle, completion_id, body.model), headers=headers)

    # -- native runs API -------------------------------------------------------------------------

    @app.post("/v1/runs", dependencies=auth, status_code=201)
    async def create_run(body: RunRequest) -> JSONResponse:
        target = find_team(body.team)
        try:
            check_budgets(target.team.config, body.budgets)
        except BudgetTooHigh as exc:
            raise ApiError(422, str(exc), code="budget_too_high", extra={"limits": exc.in_force}) from None
        handle = start(target.team, body.input, target.redactor, body.thread, limits=body.budgets, vars=body.vars)
        return JSONResponse(handle.record(), status_code=201, headers={"Location": f"/v1/runs/{handle.id}"})

    @app.get("/v1/runs/{run_id}", dependencies=auth)
    async def get_run(run_id: str) -> dict[str, Any]:
        handle = registry.get(run_id)
        if handle is not None and not (handle.state == "waiting" and registry.store is not None):
            return handle.record()
        stored = await asyncio.to_thread(registry.stored, run_id) if registry.store is not None else None
        if handle is not None and (stored is None or stored.shown_status() == "waiting"):
            return handle.record()  # a waiting run continued elsewhere (`teamrun answer`) is read from the store
        if stored is None or stored.team not in served:  # the store's runs of teams served here only
            raise ApiError(404, f"no run '{run_id}' on this server", code="run_not_found")
        assert registry.store is not None
        kept = run_id in await asyncio.to_thread(registry.store.run_events.kept, [run_id])
        shown: dict[str, Any] = served[stored.team].redactor.value(stored_record(stored, events=kept))
        return shown

    @app.post("/v1/runs/{run_id}/cancel", dependencies=auth, status_code=202)
    async def cancel_run(run_id: str) -> JSONResponse:
        waiting_reason = "cancelled by request while waiting for people"
        answer = await registry.request_cancel(
            run_id, teams=served, reason="cancelled by request", waiting_reason=waiting_reason
        )
        handle, stored = answer.handle, answer.stored
        if answer.outcome == "not_found":
            raise ApiError(404, f"no run '{run_id}' on this server", code="run_not_found")
        if answer.outcome == "cancelling" and handle is not None:
            return JSONResponse(handle.record(), status_code=202)
        if answer.outcome == "ended":
            if handle is not None and handle.cancel_reason == waiting_reason:
                return JSONResponse(handle.record(), status_code=202)
            assert stored is not None
            shown = served[stored.team].redactor.value(stored_record(stored) | {"cancel_reason": waiting_reason})
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

    @app.post("/v1/runs/{run_id}/approvals/{approval_id}", dependencies=auth)
    async def answer_approval(run_id: str, approval_id: str, body: ApprovalAnswer) -> dict[str, Any]:
        handle = find_run(run_id)
        try:
            pending = handle.answer(approval_id, body.approve)
        except AlreadyDecided as exc:
            raise ApiError(409, str(exc), code="approval_decided") from None
        if pending is None:
            raise ApiError(404, f"run '{run_id}' has no approval '{approval_id}'", code="approval_not_found")
        shown: dict[str, Any] = handle.redactor.value(pending.as_dict())
        return shown

    @app.get("/v1/runs/{run_id}/events", dependencies=auth)
    async def run_events(run_id: str, request: Request) -> StreamingResponse:
        start_at = _after_event(request.headers.get("last-event-id"))
        handle = registry.get(run_id)
        if handle is None and registry.store is not None:  # a run of an earlier server, or of another worker
            found = await stored_events(registry.store, served, run_id)
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
                    _kept_stream(kept, record, start_at),
                    media_type="text/event-stream",
                    headers={"Cache-Control": "no-cache"},
                )
        handle = find_run(run_id)
        earlier = await asyncio.to_thread(keeper.earlier, handle) if keeper is not None else None
        if earlier:  # continued here after a restart: what earlier processes ran of it comes first
            return StreamingResponse(
                _continued_stream(earlier, handle, start_at),
                media_type="text/event-stream",
                headers={"Cache-Control": "no-cache"},
            )
        return StreamingResponse(
            _event_stream(handle, start_at), media_type="text/event-stream", headers={"Cache-Control": "no-cache"}
        )

    resumer = mount_pending(app, registry, served, authorize, ApiError)  # GET /v1/pending, POST .../pending/{item}
    mount_history(app, registry, served, authorize, ApiError)  # GET /v1/runs (the run list) and /view/* (the run view)
    mount_workspace(app, registry, served, authorize, ApiError)  # GET /v1/runs/{id}/workspace
    mount_a2a(app, registry, served, resumer, tokens=settings.tokens, redactor=server_redactor)  # /a2a/<team>
    mount_teams(app, settings.store, served, authorize, ApiError)  # GET /v1/teams, GET /v1/threads/{id} (the page)

    app.add_middleware(BodyLimit, max_bytes=settings.max_request_bytes)
    if settings.cors_origins:
        app.add_middleware(
            CORSMiddleware,
            allow_origins=list(settings.cors_origins),
            allow_methods=["GET", "POST"],
            allow_headers=list(CORS_HEADERS),
            expose_headers=["Retry-After", "Location", "WWW-Authenticate"],
        )
    return app


_WEB_FILES = {
    "index.html": "text/html; charset=utf-8",
    "app.js": "text/javascript; charset=utf-8",
    "style.css": "text/css; charset=utf-8",
    "history.js": "text/javascript; charset=utf-8",
    "pending.js": "text/javascript; charset=utf-8",
    "graph.js": "text/javascript; charset=utf-8",
    "runview.js": "text/javascript; charset=utf-8",
    "chat.js": "text/javascript; charset=utf-8",
}
_WEB_HEADERS = {
    "Content-Security-Policy": "default-src 'self'; style-src 'self'; script-src 'self'; "
    "connect-src 'self'; frame-ancestors 'none'",
    "X-Content-Type-Options": "nosniff",
    "Cache-Control": "no-cache",
}


def _web_file(name: str) -> Response:
    """One file of the page (plain HTML, a small script, a stylesheet), shipped in the package."""
    body = resources.files("teamrun.serve").joinpath("web", name).read_bytes()
    return Response(body, media_type=_WEB_FILES[name], headers=_WEB_HEADERS)


# -- helpers ------------------------------------------------------------------------------------

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
    elif status == 400:
        message = "the request body could not be parsed as JSON (malformed, or nested too deeply)"
    else:
        message = str(exc.detail)
    return ApiError(
        status,
        message,
        type="invalid_request_error" if status < 500 else "server_error",
        code=_HTTP_CODES.get(status, f"http_{status}"),
        headers=dict(exc.headers or {}),
    )


def _after_event(last_event_id: str | None) -> int:
    """The first event to send to a reader whose ``Last-Event-ID`` is ``last_event_id`` (0: from the start).

    Anything but an event number in ASCII digits is ignored (``"²"`` is a digit to
    :meth:`str.isdigit`, not to :func:`int`).
    """
    text = (last_event_id or "").strip()
    if not text or len(text) > 18 or not all("0" <= c <= "9" for c in text):
        return 0
    return int(text) + 1


def _last_user_message(messages: Sequence[ChatMessage]) -> str:
    for message in reversed(messages):
        if message.role != "user":
            continue
        content = message.content
        if isinstance(content, list):
            content = "\n".join(str(part.get("text", "")) for part in content if part.get("type") == "text")
        if content and content.strip():
            return content
        break
    raise ApiError(
        400, "messages: the last user message is missing or empty (it is the team's input)", code="missing_input"
    )


def _chat_thread(header: str | None, user: str | None, have_store: bool) -> tuple[str | None, str | None]:
    """The thread a chat completion continues, and a warning for the response (or ``None``).

    The ``X-Teamrun-Thread`` header wins over the ``user`` field. Without a store
    the header is refused (400) but ``user`` is only ignored: OpenAI clients often
    send it to name the end user, not a conversation.
    """
    if header is not None:
        thread = header.strip()
        if not thread or len(thread) > 200:
            raise ApiError(400, f"{THREAD_HEADER}: a thread id is 1 to 200 characters", code="invalid_thread")
        return thread, None
    if user is None or not user.strip():
        return None, None
    if not have_store:
        return None, "the user field names no thread here (this server keeps no threads): each request is one run"
    if len(user.strip()) > 200:
        raise ApiError(400, "user: a thread id is 1 to 200 characters", code="invalid_thread")
    return user.strip(), None


def _run_problem(handle: RunHandle) -> ApiError | None:
    """The error a chat completion answers for a run that failed, was refused or was cancelled."""
    state = handle.state
    extra = {"run_id": handle.id, "status": state}
    if handle.refused:
        return ApiError(400, handle.error or "the request was refused", code="run_refused", extra=extra)
    if state == "failed":
        reason = handle.error or (handle.result.error if handle.result else None) or "unknown error"
        return ApiError(
            502, handle.redactor.text(f"the run failed: {reason}"), type="server_error", code="run_failed", extra=extra
        )
    if state == "cancelled":
        return ApiError(
            503,
            f"the run was cancelled ({handle.cancel_reason or 'interrupted'})",
            type="server_error",
            code="run_cancelled",
            extra=extra,
        )
    return None


def _usage(handle: RunHandle) -> dict[str, int]:
    usage = handle.result.usage if handle.result is not None else None
    if usage is None:
        return {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}
    return {
        "prompt_tokens": usage.input_tokens,
        "completion_tokens": usage.output_tokens,
        "total_tokens": usage.total_tokens,
    }


def _finish_reason(handle: RunHandle) -> str:
    return "length" if handle.state == "budget_exhausted" else "stop"


def _completion(handle: RunHandle, completion_id: str, model: str) -> dict[str, Any]:
    assert handle.result is not None
    return {
        "id": completion_id,
        "object": "chat.completion",
        "created": int(handle.created),
        "model": model,
        "choices": [
            {
                "index": 0,
                "finish_reason": _finish_reason(handle),
                "message": {"role": "assistant", "content": handle.result.final_text},
            }
        ],
        "usage": _usage(handle),
        "teamrun": {"run_id": handle.id, "status": handle.state, "cost": handle.result.cost, "thread": handle.thread},
    }


def _sse(data: Any, redactor: Redactor | None = None, *, event: str | None = None, id: int | None = None) -> bytes:
    """One SSE message of ``data`` as JSON (secrets masked when a ``redactor`` is given)."""
    head = (f"id: {id}\n" if id is not None else "") + (f"event: {event}\n" if event else "")
    text = json.dumps(data, ensure_ascii=False) if redactor is None else redactor.dumps(data, ensure_ascii=False)
    return (head + "data: " + text + "\n\n").encode()


def _pieces(text: str) -> list[str]:
    """The answer cut at spaces into pieces of about :data:`CHUNK_CHARS` characters (joined, the answer)."""
    pieces: list[str] = []
    current = ""
    for word in text.split(" "):
        candidate = word if not current else current + " " + word
        if len(candidate) > CHUNK_CHARS and current:
            pieces.append(current + " ")
            current = word
        else:
            current = candidate
    if current:
        pieces.append(current)
    return pieces


@contextmanager
def _cancelled_if_client_leaves(registry: RunRegistry, handle: RunHandle, receive: Any) -> Iterator[None]:
    """While in the block, the client going away cancels ``handle``'s run at once.

    The request's body has been read, so the next ASGI message is ``http.disconnect``: one task waits
    for it, and its done-callback cancels the run (uvicorn neither cancels the handler nor fails a write
    when the client leaves; without this a run whose client left would go on to its end).
    """

    def went_away(listener: asyncio.Future[Any]) -> None:
        if listener.cancelled() or listener.exception() is not None or handle.finished:
            return
        if listener.result().get("type") == "http.disconnect":
            registry.cancel(handle.id, "client disconnected")

    listener = asyncio.ensure_future(receive())
    listener.add_done_callback(went_away)
    try:
        yield
    finally:
        listener.remove_done_callback(went_away)
        listener.cancel()


class _ChatStream(Response):
    """A streaming chat completion's SSE answer, as a plain ASGI response.

    The role chunk goes out at once; then the run's end is awaited (a keepalive comment every
    :data:`KEEPALIVE_S`, the client leaving cancels the run: :func:`_cancelled_if_client_leaves`) and
    the rest is written in one piece: the answer's chunks, the finish, the usage when asked, ``[DONE]``
    — or the run's error, then ``[DONE]``. Not Starlette's ``StreamingResponse``: under uvicorn (ASGI
    2.3) it runs the body and a disconnect listener as two tasks of an anyio task group per request.
    """

    media_type = "text/event-stream"

    def __init__(
        self,
        registry: RunRegistry,
        handle: RunHandle,
        completion_id: str,
        model: str,
        include_usage: bool,
        headers: Mapping[str, str],
    ) -> None:
        self.status_code = 200
        self.background = None
        self.init_headers({**headers, "Cache-Control": "no-cache"})
        self._registry = registry
        self._handle = handle
        self._include_usage = include_usage
        self._base = {
            "id": completion_id,
            "object": "chat.completion.chunk",
            "created": int(handle.created),
            "model": model,
        }

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        handle = self._handle
        await send({"type": "http.response.start", "status": self.status_code, "headers": self.raw_headers})
        await send(
            {"type": "http.response.body", "body": self._chunk({"role": "assistant", "content": ""}), "more_body": True}
        )

        try:
            with _cancelled_if_client_leaves(self._registry, handle, receive):
                while not handle.finished:
                    if not await handle.ended(KEEPALIVE_S):
                        await send({"type": "http.response.body", "body": b": keepalive\n\n", "more_body": True})
            await send({"type": "http.response.body", "body": self._tail(), "more_body": False})
        finally:
            if not handle.finished:  # cancelled here (the server stopping) or a send failed
                self._registry.cancel(handle.id, "client disconnected")

    def _chunk(self, delta: dict[str, Any], finish: str | None = None) -> bytes:
        chunk = {**self._base, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
        return _sse(chunk, self._handle.redactor)

    def _tail(self) -> bytes:
        """Everything after the run: known at once, written at once."""
        handle = self._handle
        tail: list[bytes] = []
        problem = _run_problem(handle)
        if problem is not None:
            error = {"message": problem.message, "type": problem.type, "code": problem.code, **problem.extra}
            tail.append(_sse({"error": error}, handle.redactor))
        else:
            assert handle.result is not None
            final_text = handle.redactor.text(handle.result.final_text)
            tail.extend(self._chunk({"content": piece}) for piece in _pieces(final_text))
            tail.append(self._chunk({}, _finish_reason(handle)))
            if self._include_usage:
                tail.append(_sse({**self._base, "choices": [], "usage": _usage(handle)}))
        tail.append(b"data: [DONE]\n\n")
        return b"".join(tail)


async def _kept_stream(events: list[dict[str, Any]], record: dict[str, Any], start_at: int) -> AsyncIterator[bytes]:
    """A stored run's kept events as :func:`_event_stream` sends a finished run's (masked already)."""
    for index in range(start_at, len(events)):
        yield _sse(events[index], event=str(events[index]["kind"]), id=index)
    yield _sse(record, event="result")


async def _continued_stream(earlier: list[dict[str, Any]], handle: RunHandle, start_at: int) -> AsyncIterator[bytes]:
    """A run continued here after a restart: the events kept of it, then this process's (numbered after them)."""
    for index in range(start_at, len(earlier)):
        yield _sse(earlier[index], event=str(earlier[index]["kind"]), id=index)
    async for chunk in _event_stream(handle, max(0, start_at - len(earlier)), first_id=len(earlier)):
        yield chunk


async def _event_stream(handle: RunHandle, start_at: int, *, first_id: int = 0) -> AsyncIterator[bytes]:
    """The run's events as SSE (``event:`` the kind, ``id:`` its number), then ``event: result``."""
    index = start_at
    while True:
        while index < handle.event_count:
            line = handle.event(index)
            yield _sse(line, event=str(line["kind"]), id=first_id + index)
            index += 1
        if handle.finished:
            break
        if not await handle.changed(KEEPALIVE_S):
            yield b": keepalive\n\n"
    yield _sse(handle.record(), event="result")
