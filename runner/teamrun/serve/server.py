"""Running the app under uvicorn, with a shutdown that cancels runs first.

On SIGTERM or SIGINT the server stops taking runs, cancels every run in
progress (each ends ``status: cancelled`` and keeps its partial results; their
clients get that answer), lets the responses finish, and exits 0. A replica of
several (``--lease``) only stops taking runs, lets the responses finish, then
hands what still runs over to another replica (:mod:`teamrun.serve.replicas`).
"""

from __future__ import annotations

import asyncio
import gc
import signal
import socket
from types import FrameType

import uvicorn
from starlette.types import ASGIApp

from teamrun.serve.runs import RunRegistry

__all__ = ["GRACE_S", "serve_app"]

GRACE_S = 30.0
"""Seconds the server waits, after cancelling runs, for responses to finish before closing them."""
GC_GEN0_THRESHOLD = 50_000
"""Allocations between two young-generation garbage collections in a server (Python's default: 700).
A served request allocates thousands of objects, most short-lived; collecting every 700 cost about
6 % of the server's CPU per request at 100 clients (paired runs: 5.2-5.4 vs 4.9-5.1 ms), for a few
megabytes more between collections."""
KEEP_ALIVE_S = 65
"""Seconds an idle keep-alive connection stays open. Longer than clients keep idle connections in their
pools (httpx and the OpenAI client: 5 s) and than a load balancer's usual idle timeout (60 s): with
uvicorn's 5 s the server closed connections exactly when a client picked them for its next request,
which then failed with a read error (under load, several per hundred requests)."""


class _Server(uvicorn.Server):
    def __init__(self, config: uvicorn.Config, registry: RunRegistry) -> None:
        super().__init__(config)
        self.registry = registry
        self.loop: asyncio.AbstractEventLoop | None = None

    async def serve(self, sockets: list[object] | None = None) -> None:  # type: ignore[override]
        self.loop = asyncio.get_running_loop()
        await super().serve(sockets)  # type: ignore[arg-type]

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        # A stop asked for is a clean exit: uvicorn would re-raise the signal after shutting down.
        if self.loop is not None:
            self.loop.call_soon_threadsafe(self.registry.stopping, "server shutting down")
        if self.should_exit and sig == signal.SIGINT:
            self.force_exit = True
        else:
            self.should_exit = True


def serve_app(
    app: ASGIApp,
    *,
    host: str,
    port: int,
    verbosity: int = 0,
    registry: RunRegistry | None = None,
    sockets: list[socket.socket] | None = None,
    forwarded_allow_ips: str | None = None,
) -> None:
    """Serve ``app`` (from :func:`~teamrun.serve.app.create_app`) until SIGTERM/SIGINT.

    uvicorn's own logging set-up is skipped: its records go to the standard
    library loggers ``uvicorn.*``, which the CLI renders like teamrun's own lines
    (JSON with ``--log-format json``). ``verbosity`` is the CLI's (-1 quiet, 0
    warnings, 1 info...): the access log (one line per request) is kept only from
    ``-v``, since formatting it costs every request a little CPU. ``registry`` is
    the app's (default: ``app.state.registry``; give it when ``app`` is wrapped in
    middleware). With ``sockets`` (already listening; a worker of ``--workers``)
    ``host`` and ``port`` only name the address. ``forwarded_allow_ips`` (``--forwarded-allow-ips``): the
    proxies whose ``X-Forwarded-Proto`` and ``X-Forwarded-For`` are believed (uvicorn's proxy headers, only
    from a client at one of these addresses); ``None``: nobody's.
    """
    level = {-1: "error", 0: "warning", 1: "info"}.get(verbosity, "debug")
    young, *older = gc.get_threshold()
    gc.set_threshold(max(young, GC_GEN0_THRESHOLD), *older)
    if registry is None:
        registry = app.state.registry  # type: ignore[attr-defined]
    config = uvicorn.Config(
        app,
        host=host,
        port=port,
        log_config=None,
        log_level=level,
        access_log=verbosity >= 1,
        timeout_graceful_shutdown=int(GRACE_S),
        server_header=False,
        proxy_headers=forwarded_allow_ips is not None,
        forwarded_allow_ips=forwarded_allow_ips,
        lifespan="on",
        timeout_keep_alive=KEEP_ALIVE_S,
    )
    _Server(config, registry).run(sockets=sockets)
