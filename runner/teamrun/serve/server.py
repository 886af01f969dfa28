"""Running the app under uvicorn, with a shutdown that cancels runs first.

On SIGTERM or SIGINT the server stops taking runs, cancels every run in
progress (each ends ``status: cancelled`` and keeps its partial results; their
clients get that answer), lets the responses finish, and exits 0.
"""

from __future__ import annotations

import asyncio
import signal
from types import FrameType

import uvicorn
from fastapi import FastAPI

from teamrun.serve.runs import RunRegistry

__all__ = ["GRACE_S", "serve_app"]

GRACE_S = 30.0
"""Seconds the server waits, after cancelling runs, for responses to finish before closing them."""


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
            self.loop.call_soon_threadsafe(self.registry.cancel_all, "server shutting down")
        if self.should_exit and sig == signal.SIGINT:
            self.force_exit = True
        else:
            self.should_exit = True


def serve_app(app: FastAPI, *, host: str, port: int, verbosity: int = 0) -> None:
    """Serve ``app`` (from :func:`~teamrun.serve.app.create_app`) until SIGTERM/SIGINT.

    uvicorn's own logging set-up is skipped: its records go to the standard
    library loggers ``uvicorn.*``, which the CLI renders like teamrun's own lines
    (JSON with ``--log-format json``). ``verbosity`` is the CLI's (-1 quiet, 0
    warnings, 1 info...): the access log (one line per request) is kept only from
    ``-v``, since formatting it costs every request a little CPU.
    """
    level = {-1: "error", 0: "warning", 1: "info"}.get(verbosity, "debug")
    config = uvicorn.Config(app, host=host, port=port, log_config=None, log_level=level,
                            access_log=verbosity >= 1, timeout_graceful_shutdown=int(GRACE_S),
                            server_header=False, proxy_headers=False, lifespan="on")
    _Server(config, app.state.registry).run()
