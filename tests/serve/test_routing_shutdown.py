"""``teamrun serve --workers N``: a worker's clients to the other workers are closed as its app shuts down, before
the server hears the shutdown is complete (attack a4243b 8). The server stops its loop once told and cancels what
is left: a close still under way then ended in "Exception in 'lifespan' protocol" and a CancelledError traceback
on a clean SIGTERM (5 runs in 8, after streams had been forwarded). Driven here as uvicorn drives the lifespan, so
the order is checked, not a race."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx

from teamrun.serve.routing import RunRouter


class _Transport(httpx.AsyncBaseTransport):
    def __init__(self, said: list[str]) -> None:
        self.said = said

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        return httpx.Response(200)

    async def aclose(self) -> None:
        await asyncio.sleep(0)  # a close awaits (the pool's connections)
        self.said.append("client closed")


async def _app(scope: Any, receive: Any, send: Any) -> None:
    """An app's lifespan, as Starlette answers it."""
    assert scope["type"] == "lifespan"
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            await send({"type": "lifespan.shutdown.complete"})
            return


def test_the_clients_to_other_workers_are_closed_before_the_shutdown_is_said_complete() -> None:
    said: list[str] = []
    router = RunRouter(_app, index=0, sockets=["/tmp/w0.sock", "/tmp/w1.sock"])
    router._clients[1] = httpx.AsyncClient(
        transport=_Transport(said), base_url="http://worker1"
    )  # a stream was forwarded

    async def lifespan() -> None:
        inbox: asyncio.Queue[dict[str, str]] = asyncio.Queue()
        for kind in ("lifespan.startup", "lifespan.shutdown"):
            inbox.put_nowait({"type": kind})

        async def send(message: dict[str, Any]) -> None:
            said.append(message["type"])

        await router(({"type": "lifespan"}), inbox.get, send)

    asyncio.run(lifespan())

    assert said == ["lifespan.startup.complete", "client closed", "lifespan.shutdown.complete"], said
    assert router._clients == {}
