"""The HTTP application: :func:`create_app` assembles the server's routers over one :class:`ServeState`.

Each concern is a router of its own (:mod:`teamrun.serve.routes`: chat completions, runs, pending items,
approvals, workspace, history and the run view, teams, operations and metrics; A2A in :mod:`teamrun.serve.a2a`);
every run goes through :class:`~teamrun.serve.runs.RunRegistry`, every answer to a person's item through
:class:`~teamrun.serve.answers.AnswerService`. ``teamrun serve`` serves the app with uvicorn
(:mod:`teamrun.serve.server`).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import TYPE_CHECKING

from fastapi import Depends, FastAPI, Request
from fastapi.middleware.cors import CORSMiddleware

from teamrun.logs import get_logger
from teamrun.secrets import Redactor
from teamrun.serve.a2a import include_a2a
from teamrun.serve.answers import AnswerService
from teamrun.serve.errors import ApiError, add_error_handlers
from teamrun.serve.history import EventKeeper
from teamrun.serve.routes import approvals, chat, history, memory, ops, pending, runs, workspace
from teamrun.serve.routes import teams as team_routes
from teamrun.serve.routes.chat import THREAD_HEADER
from teamrun.serve.runs import RunRegistry
from teamrun.serve.security import BodyLimit, token_matches
from teamrun.serve.served import Served
from teamrun.serve.settings import ServeSettings
from teamrun.serve.state import ServeState

if TYPE_CHECKING:
    from teamrun.engine.team import Team

__all__ = ["CORS_HEADERS", "KEEPALIVE_S", "ServeSettings", "create_app"]

_log = get_logger(__name__)

KEEPALIVE_S = 10.0
"""Seconds between SSE comment lines while a run has nothing to say (keeps proxies from closing the stream)."""
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


def create_app(teams: Sequence[Team], settings: ServeSettings | None = None) -> FastAPI:
    """The ASGI app serving ``teams`` (addressed by their ``name``).

    With ``settings.store``, each team keeps its threads and run records there (:meth:`Team.use_store`, once
    here); every request is a :meth:`Team.run` of the team itself, with the run's own options.
    """
    state = _state(teams, settings or ServeSettings())
    app = FastAPI(title="teamrun", lifespan=_lifespan(teams, state), docs_url=None, redoc_url=None, openapi_url=None)
    app.state.serve, app.state.registry, app.state.teams = state, state.registry, state.served
    add_error_handlers(app, state.redactor)
    auth = [Depends(_authorize)] if state.settings.tokens else []  # without tokens: not run per request
    for router in (ops.router, history.view_router):
        app.include_router(router)
    for router in (ops.metrics_router, chat.router, runs.router, approvals.router, pending.router):
        app.include_router(router, dependencies=auth)
    for router in (history.router, workspace.router, team_routes.router, memory.router):
        app.include_router(router, dependencies=auth)
    include_a2a(app, state)  # /a2a/<team>: the card is public, the endpoint checks the tokens itself
    app.add_middleware(BodyLimit, max_bytes=state.settings.max_request_bytes)
    if state.settings.cors_origins:
        app.add_middleware(
            CORSMiddleware,
            allow_origins=list(state.settings.cors_origins),
            allow_methods=["GET", "POST"],
            allow_headers=list(CORS_HEADERS),
            expose_headers=["Retry-After", "Location", "WWW-Authenticate"],
        )
    return app


def _state(teams: Sequence[Team], settings: ServeSettings) -> ServeState:
    registry = RunRegistry(
        max_concurrent=settings.max_concurrent_runs,
        retry_after_s=settings.retry_after_s,
        approval_timeout_s=settings.approval_timeout_s,
        approval_on_timeout=settings.approval_on_timeout,
        store=settings.store,
        content=settings.content,
    )
    masked_always = set(settings.tokens) | set(settings.extra_secrets)
    served: dict[str, Served] = {}
    for team in teams:
        if settings.store is not None:  # the server's store holds every served team's threads and run records
            team.use_store(settings.store)
        served[team.name] = Served(team, Redactor([*team.loaded.secrets, *masked_always]))
    store = settings.store
    keeper = EventKeeper(store) if store is not None else None
    if keeper is not None:  # each run's events are kept in the store as it ends or suspends
        registry.when_over.append(keeper.run_over)
    answers = AnswerService(registry, served, store) if store is not None else None
    if answers is not None:  # a run that stops waiting continues when its questions expire
        registry.when_over.append(answers.when_stopped)
    replica = None
    if store is not None and settings.lease_s:  # one of several replicas on the store: leases, takeover, fencing
        from teamrun.serve.replicas import Replica

        replica = Replica(registry, served, store, lease_s=settings.lease_s, keeper=keeper)
    return ServeState(settings, registry, served, Redactor(masked_always), keeper, answers, KEEPALIVE_S, replica)


def _lifespan(teams: Sequence[Team], state: ServeState) -> Callable[[FastAPI], AbstractAsyncContextManager[None]]:
    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        for team in teams:  # before the first request: LiteLLM's import and its first-call set-up per model
            warmed = await team.warm_up()
            if warmed:
                _log.info("models_warmed", team=team.name, models=warmed)
        if state.answers is not None:
            await state.answers.watch_waiting()
        if state.replica is not None:
            state.replica.start()
        yield
        if state.answers is not None:
            state.answers.close()
        if state.replica is not None:  # what still runs after the grace period: another replica takes it
            await state.replica.hand_over()
        state.registry.cancel_all("server shutting down")
        await state.registry.drain()
        if state.keeper is not None:
            await state.keeper.flush()

    return lifespan


async def _authorize(request: Request) -> None:  # async: a plain def would hop to a thread per request
    tokens: frozenset[str] = request.app.state.serve.settings.tokens
    if not token_matches(request.headers.get("authorization"), tokens):
        raise ApiError(
            401,
            "missing or invalid bearer token (send `Authorization: Bearer <token>`)",
            type="authentication_error",
            code="invalid_api_key",
            headers={"WWW-Authenticate": "Bearer"},
        )
