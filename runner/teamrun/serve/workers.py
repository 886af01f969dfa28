"""``teamrun serve --workers N``: a pre-fork of N uvicorn servers sharing one listening socket.

The parent binds the TCP socket (so the port answers as soon as the start-up
line is printed) and one Unix socket per worker in a private directory, then
starts N worker processes (``multiprocessing``'s spawn: each builds its own app
from :class:`~teamrun.serve.launch.ServeOptions`, with its own event loop,
LiteLLM clients and store connections). Each worker serves the shared socket
and its own Unix socket with :func:`~teamrun.serve.server.serve_app`; the kernel
hands each new connection to one of them. Runs are started under ids naming
their worker, and :class:`~teamrun.serve.routing.RunRouter` forwards a request
about a run to the worker that runs it over its Unix socket.

The parent only supervises: SIGTERM or SIGINT is passed to every worker (each
cancels its runs and finishes its responses, as one server does), a worker that
dies is started again under the same index (its runs in memory are lost; their
records stay in the store), and a worker that cannot start stops them all.
"""

from __future__ import annotations

import multiprocessing
import os
import shutil
import signal
import socket
import tempfile
import threading
import time
from collections.abc import Callable
from multiprocessing.process import BaseProcess
from pathlib import Path
from types import FrameType

from teamrun.errors import TeamrunError, UsageError
from teamrun.logs import get_logger
from teamrun.serve.launch import ServeOptions
from teamrun.serve.server import GRACE_S

__all__ = ["serve_workers"]

_log = get_logger(__name__)

PARENT_POLL_S = 1.0
"""How often a worker looks whether the server that started it is still there."""
START_GRACE_S = 30.0
"""A worker that exits within this many seconds of its start is taken for a worker that cannot start."""
BACKLOG = 2048
"""The listening socket's backlog (uvicorn's default)."""

multiprocessing.allow_connection_pickling()  # sockets cross into the spawned workers
_SPAWN = multiprocessing.get_context("spawn")


def serve_workers(options: ServeOptions, on_listening: Callable[[int], None] | None = None) -> None:
    """Serve with ``options.workers`` processes until SIGTERM/SIGINT; raises :class:`TeamrunError` if a worker
    cannot start. ``on_listening`` gets the port once it is bound (the one chosen, for ``--port 0``)."""
    listener = listen(options.host, options.port)
    if on_listening is not None:
        on_listening(listener.getsockname()[1])
    folder = Path(tempfile.mkdtemp(prefix="teamrun-serve-"))  # mode 0700: only this user reaches the workers
    paths = [str(folder / f"w{index}.sock") for index in range(options.workers)]
    private = [_listen_unix(path) for path in paths]
    stopping = False

    def stop(sig: int, frame: FrameType | None) -> None:
        nonlocal stopping
        stopping = True

    previous = {sig: signal.signal(sig, stop) for sig in (signal.SIGTERM, signal.SIGINT)}
    workers: list[tuple[BaseProcess, float]] = []
    try:
        workers = [_start(options, index, listener, private[index], paths) for index in range(options.workers)]
        while not stopping:
            time.sleep(0.2)
            for index, (process, started) in enumerate(workers):
                if process.is_alive() or stopping:
                    continue
                if time.monotonic() - started < START_GRACE_S:
                    raise TeamrunError(
                        f"serve worker {index} exited at start (exit code {process.exitcode}); see its log lines above"
                    )
                _log.warning("serve_worker_restarted", worker=index, exit_code=process.exitcode)
                workers[index] = _start(options, index, listener, private[index], paths)
    finally:
        _stop_all([process for process, _ in workers])
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        listener.close()
        for sock in private:
            sock.close()
        shutil.rmtree(folder, ignore_errors=True)


def _start(
    options: ServeOptions, index: int, listener: socket.socket, private: socket.socket, paths: list[str]
) -> tuple[BaseProcess, float]:
    process = _SPAWN.Process(
        target=_worker_main,
        args=(options, index, listener, private, paths),
        name=f"teamrun-serve-w{index}",
        daemon=False,
    )
    process.start()
    return process, time.monotonic()


def _stop_all(processes: list[BaseProcess]) -> None:
    """SIGTERM every worker still running, wait for them (a graceful stop takes up to GRACE_S), then kill."""
    for process in processes:
        if process.is_alive() and process.pid is not None:
            os.kill(process.pid, signal.SIGTERM)
    deadline = time.monotonic() + GRACE_S + 15
    for process in processes:
        process.join(max(0.0, deadline - time.monotonic()))
        if process.is_alive():
            process.kill()
            process.join()


def listen(host: str, port: int) -> socket.socket:
    """A TCP socket listening on ``host:port`` (inheritable by worker processes); a port another program
    holds is a :class:`UsageError` (exit 2) before the server says it is serving."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise UsageError(
            f"cannot listen on {host}:{port}: {exc.strerror or exc}; choose another --port (or stop what holds it)"
        ) from None
    sock.listen(BACKLOG)
    sock.set_inheritable(True)
    return sock


def _listen_unix(path: str) -> socket.socket:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.bind(path)
    sock.listen(BACKLOG)
    sock.set_inheritable(True)
    return sock


def _worker_main(
    options: ServeOptions, index: int, listener: socket.socket, private: socket.socket, paths: list[str]
) -> None:
    """One worker process: build the app from ``options`` and serve both sockets until told to stop."""
    from teamrun.logs import configure_logging
    from teamrun.serve.launch import build
    from teamrun.serve.routing import RunRouter, run_id_prefix
    from teamrun.serve.security import BodyLimit
    from teamrun.serve.server import serve_app

    configure_logging(options.verbosity, options.log_format)  # type: ignore[arg-type]
    _stop_with_parent(os.getppid())
    built = build(options)
    registry = built.app.state.registry
    registry.id_prefix = run_id_prefix(index)
    routed = BodyLimit(RunRouter(built.app, index=index, sockets=paths), max_bytes=options.max_request_bytes)
    serve_app(
        routed,
        registry=registry,
        host=options.host,
        port=options.port,
        verbosity=options.verbosity,
        sockets=[listener, private],
        forwarded_allow_ips=options.forwarded_allow_ips,
    )


def _stop_with_parent(parent: int) -> None:
    """Stop this worker (as SIGTERM does: runs cancelled, recorded) once the server that started it is gone.

    A SIGKILLed or crashed server cannot stop its workers: without this they would go on serving its port
    unsupervised, and a new server could not listen there.
    """

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(PARENT_POLL_S)
        _log.warning("serve_worker_orphaned", parent=parent, worker=os.getpid())
        os.kill(os.getpid(), signal.SIGTERM)

    threading.Thread(target=watch, name="teamrun-serve-parent-watch", daemon=True).start()
