"""With ``--workers N``: a request about a run reaches the process that runs it.

Each worker process starts its runs under ids that name it (``run_w1_<hex>``)
and also listens on a Unix socket of its own. The listening TCP socket is shared,
so the kernel hands a connection to any worker; :class:`RunRouter`, in front of
the app, forwards a request for ``/v1/runs/{id}[/...]`` whose id names another
worker to that worker's socket and streams the answer back (SSE events
included). A run's events, cancel and approvals thus live in one process, as
with one server, and need no store. Everything else is answered where it lands
(threads are in the store, which every worker opens). If the owner cannot be
reached (it died; a run of an earlier server), the request is answered here:
from the store, else 404. An A2A call (``POST /a2a/<team>``) names its task, a
run, in its JSON-RPC body (``params.id``, ``params.message.taskId``): it is
forwarded the same way.

Every response carries ``X-Teamrun-Worker`` and ``X-Teamrun-Worker-Pid`` (the
worker that answered, and its process id), and a forwarded one also
``X-Teamrun-Via`` (the worker the connection landed on).
"""

from __future__ import annotations

import asyncio
import json
import os
import re
from collections.abc import Sequence
from typing import Any

import httpx
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from teamrun.logs import get_logger

__all__ = ["PID_HEADER", "VIA_HEADER", "WORKER_HEADER", "RunRouter", "run_id_prefix"]

_log = get_logger(__name__)

WORKER_HEADER = "x-teamrun-worker"
PID_HEADER = "x-teamrun-worker-pid"
VIA_HEADER = "x-teamrun-via"
_RUN_PATH = re.compile(r"^/v1/runs/run_w(\d+)_[0-9a-f]+(?:/|$)")
_A2A_PATH = re.compile(r"^/a2a/[^/]+/?$")
_RUN_ID = re.compile(r"^run_w(\d+)_[0-9a-f]+$")
_HOP_BY_HOP = {
    b"connection",
    b"keep-alive",
    b"transfer-encoding",
    b"te",
    b"trailer",
    b"upgrade",
    b"proxy-connection",
    b"host",
    b"content-length",
    b"date",
}


def run_id_prefix(index: int) -> str:
    """The prefix of the run ids worker ``index`` starts runs under."""
    return f"run_w{index}_"


class RunRouter:
    """ASGI middleware of worker ``index``: forwards requests about other workers' runs to their sockets."""

    def __init__(self, app: ASGIApp, *, index: int, sockets: Sequence[str]) -> None:
        self.app = app
        self.index = index
        self.sockets = list(sockets)
        self._clients: dict[int, httpx.AsyncClient] = {}
        self._marks = [(WORKER_HEADER.encode(), str(index).encode()), (PID_HEADER.encode(), str(os.getpid()).encode())]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            if scope["type"] == "lifespan":
                await self._lifespan(scope, receive, send)
                return
            await self.app(scope, receive, send)
            return
        match = _RUN_PATH.match(scope["path"])
        owner = int(match.group(1)) if match else self.index
        body: bytes | None = None
        if match is None and scope["method"] == "POST" and _A2A_PATH.match(scope["path"]):
            body = await _whole_body(receive)  # an A2A call names its task (a run) in its JSON-RPC body
            if body is None:
                return  # the client went away
            owner = _a2a_owner(body, self.index)
        if owner != self.index and owner < len(self.sockets):
            if body is None:
                body = await _whole_body(receive)
            if body is None:
                return  # the client went away
            if await self._forward(owner, scope, body, receive, send):
                return
        await self.app(scope, _replay(body, receive) if body is not None else receive, self._marked(send))

    def _marked(self, send: Send) -> Send:
        async def marked(message: Message) -> None:
            if message["type"] == "http.response.start":
                message = {**message, "headers": [*message.get("headers", []), *self._marks]}
            await send(message)

        return marked

    async def _lifespan(self, scope: Scope, receive: Receive, send: Send) -> None:
        """The app's lifespan, the clients to other workers closed when it has shut down and *before* the server
        hears so: once told, the server stops its loop and cancels what is left, and a close still under way
        then (a forwarded stream's connection) ended in a CancelledError traceback on a clean stop."""

        async def closing(message: Message) -> None:
            if message["type"] in ("lifespan.shutdown.complete", "lifespan.shutdown.failed"):
                await self._close_clients()
            await send(message)

        try:
            await self.app(scope, receive, closing)
        finally:
            await self._close_clients()  # the app ended otherwise (its startup failed): nothing is cancelling

    async def _close_clients(self) -> None:
        clients = list(self._clients.values())
        self._clients.clear()
        for client in clients:
            try:
                await client.aclose()
            except (httpx.HTTPError, OSError) as exc:  # a worker already gone: nothing to close cleanly
                _log.debug("serve_worker_client_close_failed", error=str(exc) or type(exc).__name__)

    def _client(self, owner: int) -> httpx.AsyncClient:
        client = self._clients.get(owner)
        if client is None:
            transport = httpx.AsyncHTTPTransport(uds=self.sockets[owner])
            client = httpx.AsyncClient(
                transport=transport, base_url=f"http://worker{owner}", timeout=httpx.Timeout(None, connect=5.0)
            )
            self._clients[owner] = client
        return client

    async def _forward(self, owner: int, scope: Scope, body: bytes, receive: Receive, send: Send) -> bool:
        """Forward to worker ``owner`` and stream its answer; ``False`` if it could not be reached."""
        headers = [(k, v) for k, v in scope["headers"] if k.lower() not in _HOP_BY_HOP]
        headers.append((VIA_HEADER.encode(), str(self.index).encode()))
        path = scope.get("raw_path") or scope["path"].encode()
        if scope.get("query_string"):
            path += b"?" + scope["query_string"]
        request = self._client(owner).build_request(
            scope["method"], path.decode("latin-1"), headers=headers, content=body
        )
        try:
            upstream = await self._client(owner).send(request, stream=True)
        except (httpx.TransportError, OSError) as exc:
            _log.warning("serve_worker_unreachable", worker=owner, error=str(exc) or type(exc).__name__)
            return False
        try:
            await send(
                {
                    "type": "http.response.start",
                    "status": upstream.status_code,
                    "headers": [
                        *((k, v) for k, v in upstream.headers.raw if k.lower() not in _HOP_BY_HOP),
                        (VIA_HEADER.encode(), str(self.index).encode()),
                    ],
                }
            )
            relay = asyncio.ensure_future(self._relay(upstream, send))
            gone = asyncio.ensure_future(_disconnected(receive))
            done, _ = await asyncio.wait({relay, gone}, return_when=asyncio.FIRST_COMPLETED)
            for task in (relay, gone):
                if task not in done:
                    task.cancel()
            await asyncio.gather(relay, gone, return_exceptions=True)
            if relay in done and relay.exception() is not None:
                _log.warning("serve_forward_failed", worker=owner, error=str(relay.exception()))
        finally:
            await upstream.aclose()
        return True

    @staticmethod
    async def _relay(upstream: httpx.Response, send: Send) -> None:
        async for chunk in upstream.aiter_raw():
            await send({"type": "http.response.body", "body": chunk, "more_body": True})
        await send({"type": "http.response.body", "body": b"", "more_body": False})


def _a2a_owner(body: bytes, default: int) -> int:
    """The worker running the task an A2A JSON-RPC request names (``params.id``, or ``params.message.taskId``
    for a message answering a task); ``default`` when it names none of a worker's runs."""
    try:
        request = json.loads(body)
    except (ValueError, RecursionError):
        return default
    params = request.get("params") if isinstance(request, dict) else None
    if not isinstance(params, dict):
        return default
    message = params.get("message")
    task_id = params.get("id")
    if not isinstance(task_id, str) and isinstance(message, dict):
        task_id = message.get("taskId", message.get("task_id"))
    match = _RUN_ID.match(task_id) if isinstance(task_id, str) else None
    return int(match.group(1)) if match else default


async def _whole_body(receive: Receive) -> bytes | None:
    """The request's body (already bounded by the app's body limit in front); ``None`` on a disconnect."""
    chunks: list[bytes] = []
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return None
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            return b"".join(chunks)


def _replay(body: bytes, receive: Receive) -> Receive:
    replayed = False

    async def replay() -> Message:
        nonlocal replayed
        if not replayed:
            replayed = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay


async def _disconnected(receive: Receive) -> Any:
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return message
