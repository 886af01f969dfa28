"""Helpers of the served-agent tests: a real `teamrun serve` process, and a2a-sdk's own client talking to it.

The client is the SDK's (``ClientFactory.create_from_url``): it reads the team's card at
``/a2a/<team>/.well-known/agent-card.json`` and sends its token because the card's security scheme says so
(the SDK's ``AuthInterceptor``), not because the test adds a header.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import httpx
from a2a.client import Client, ClientCallContext, ClientConfig, ClientFactory
from a2a.client.auth import AuthInterceptor, CredentialService
from a2a.types import Message, Part, Role, SendMessageRequest, StreamResponse

from tests.cli_processes import Serving, child_env, serving

TOKEN = "a2a-test-token-0123456789abcdef"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


Served = Serving
"""A `teamrun serve` process: its base URL, and (once stopped) what it wrote on stderr."""


@contextmanager
def served(*args: str, cwd: Path | None = None, port: int | None = None) -> Iterator[Served]:
    """``teamrun serve ARGS --port P`` with a bearer token; stopped with SIGTERM (it must exit 0, and write no
    traceback on stderr)."""
    with serving(*args, env=child_env(TEAMRUN_API_TOKENS=TOKEN), cwd=cwd, port=port) as server:
        yield server
        assert server.stop() == 0
    assert "Traceback" not in server.stderr, server.stderr


class _Token(CredentialService):
    """The token for the card's bearer scheme (what a user's credential store would hold)."""

    def __init__(self, token: str) -> None:
        self.token = token
        self.asked: list[str] = []

    async def get_credentials(self, security_scheme_name: str, context: ClientCallContext | None) -> str | None:
        self.asked.append(security_scheme_name)
        return self.token


@asynccontextmanager
async def agent(url: str, team: str, *, streaming: bool = True, polling: bool = False) -> AsyncIterator[Client]:
    """a2a-sdk's client for ``team`` served at ``url`` (its card resolved from the well-known path)."""
    async with httpx.AsyncClient(timeout=httpx.Timeout(300, connect=30)) as http:
        factory = ClientFactory(ClientConfig(httpx_client=http, streaming=streaming, polling=polling))
        client = await factory.create_from_url(f"{url}/a2a/{team}", interceptors=[AuthInterceptor(_Token(TOKEN))])
        try:
            yield client
        finally:
            await client.close()


def message(text: str, *, task_id: str = "", context_id: str = "", metadata: dict[str, Any] | None = None) -> Any:
    """A ``SendMessageRequest`` of one user text part (answering ``task_id`` when given)."""
    from google.protobuf import json_format, struct_pb2

    sent = Message(message_id=f"m-{time.monotonic_ns()}", role=Role.ROLE_USER, parts=[Part(text=text)])
    if task_id:
        sent.task_id = task_id
    if context_id:
        sent.context_id = context_id
    if metadata:
        sent.metadata.CopyFrom(json_format.ParseDict(metadata, struct_pb2.Struct()))
    return SendMessageRequest(message=sent)


async def collect(client: Client, request: Any) -> list[StreamResponse]:
    """Every event the agent sends for ``request`` (a stream, or the one task of a non-streaming call)."""
    return [event async for event in client.send_message(request)]


def state_name(value: int) -> str:
    from a2a.types import TaskState

    return str(TaskState.Name(value)).removeprefix("TASK_STATE_")  # type: ignore[arg-type]


def states(events: list[StreamResponse]) -> list[str]:
    """The task states a stream reported, in order (the first task's, then each status update's)."""
    seen: list[str] = []
    for event in events:
        kind = event.WhichOneof("payload")
        if kind == "task":
            seen.append(state_name(event.task.status.state))
        elif kind == "status_update":
            seen.append(state_name(event.status_update.status.state))
    return seen


def text_of(parts: Any) -> str:
    return "".join(part.text for part in parts)
