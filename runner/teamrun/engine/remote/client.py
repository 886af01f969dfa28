"""The A2A client a delegation speaks to its remote agent with (a2a-sdk's, over httpx), and what a failure means.

:func:`open_client` reads the agent's card once per run (the copy read when the run started, else now), checks
that a bearer token never leaves the origin of ``a2a.url`` (every request, and the JSON-RPC interface the card
names), and makes a streaming client when the card and ``a2a.stream`` allow it, else a polling one.
:class:`RemoteClient` is what the delegation uses of it (a fake in the tests).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack
from typing import TYPE_CHECKING, Protocol

from teamrun.config.models import RemoteAgent
from teamrun.engine.remote.cards import DEFAULT_REMOTE_TIMEOUT_S, CardCache, card_key, card_location, plain_text
from teamrun.errors import RemoteAgentError

if TYPE_CHECKING:
    from a2a.types.a2a_pb2 import (
        CancelTaskRequest,
        GetTaskRequest,
        SendMessageRequest,
        StreamResponse,
        SubscribeToTaskRequest,
        Task,
    )

__all__ = ["OpenClient", "RemoteClient", "described", "open_client"]


class RemoteClient(Protocol):
    """What a delegation asks of its remote agent (a2a-sdk's ``Client`` has these)."""

    def send_message(self, request: SendMessageRequest) -> AsyncIterator[StreamResponse]: ...

    async def get_task(self, request: GetTaskRequest) -> Task: ...

    def subscribe(self, request: SubscribeToTaskRequest) -> AsyncIterator[StreamResponse]: ...

    async def cancel_task(self, request: CancelTaskRequest) -> Task: ...


OpenClient = Callable[
    [AsyncExitStack, RemoteAgent, str | None, CardCache, Callable[[str], RemoteAgentError]],
    Awaitable[tuple[RemoteClient, bool]],
]
"""How a delegation gets its client (:func:`open_client`, or a fake in the tests): ``(stack, spec, token, cards,
fail)`` → the client, closed with ``stack``, and whether it streams its updates."""


async def open_client(
    stack: AsyncExitStack,
    spec: RemoteAgent,
    token: str | None,
    cards: CardCache,
    fail: Callable[[str], RemoteAgentError],
) -> tuple[RemoteClient, bool]:
    """A client for ``spec``'s agent, closed with ``stack``, and whether it streams; ``fail`` words a refusal."""
    import httpx
    from a2a.client import A2ACardResolver, ClientConfig, ClientFactory

    timeout = spec.timeout_s or DEFAULT_REMOTE_TIMEOUT_S
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    home = _origin(spec.url)

    async def same_origin(request: httpx.Request) -> None:  # the token never leaves a2a.url's origin
        if "authorization" in request.headers and _origin(str(request.url)) != home:
            raise fail(_foreign(str(request.url)))

    http = await stack.enter_async_context(
        httpx.AsyncClient(headers=headers, timeout=timeout, event_hooks={"request": [same_origin]})
    )
    base, path = card_location(spec.url)
    key = card_key(spec)
    card = cards.get(key)  # read when the run started: not fetched again per delegation
    if card is None:  # not read then (the agent was down...): read now, once for the rest of the run
        try:
            card = await A2ACardResolver(http, base, path).get_agent_card()
        except RemoteAgentError:
            raise
        except Exception as exc:
            raise fail(f"cannot read its agent card at {base}{path}: {described(exc, timeout)}") from exc
        cards[key] = card
    if token:
        for interface in card.supported_interfaces:
            if interface.protocol_binding.upper() == "JSONRPC" and _origin(interface.url) != home:
                raise fail(_foreign(interface.url))
    streaming = bool(spec.stream and card.capabilities.streaming)
    try:
        # without streaming: SendMessage returns at once (return_immediately), then GetTask every POLL_S
        config = ClientConfig(httpx_client=http, streaming=streaming, polling=not streaming)
        client = ClientFactory(config).create(card)
    except ValueError as exc:  # no interface this client speaks (JSON-RPC)
        raise fail(f"offers no interface teamrun can use (A2A 1.0 over JSON-RPC): {exc}") from exc
    stack.push_async_callback(client.close)
    return client, streaming


def described(exc: BaseException, timeout: float) -> str:
    """What went wrong, in words (not a traceback)."""
    import httpx

    name = type(exc).__name__
    text = plain_text(" ".join(str(exc).split()))
    if len(text) > 300:
        text = text[:297] + "..."
    if isinstance(exc, httpx.ConnectError) or "ConnectError" in text or "connection attempts failed" in text:
        return f"cannot be reached (is it running?): {text or name}"
    if isinstance(exc, httpx.TimeoutException | TimeoutError) or "Timeout" in name:
        return f"did not answer within {timeout:g}s (a2a.timeout_s): {text or name}"
    return f"answered with an error ({name}): {text}" if text else f"failed ({name})"


def _origin(url: str) -> tuple[str, str, int | None]:
    """A URL's origin: scheme, host and port (the scheme's default port when none is given)."""
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    try:
        port = parts.port
    except ValueError:
        port = None
    return scheme, (parts.hostname or "").lower(), port or {"http": 80, "https": 443}.get(scheme)


def _foreign(url: str) -> str:
    return (
        f"names an interface on another origin ({url}) than a2a.url's: teamrun does not send the bearer token "
        "there; point a2a.url at that agent itself if it is to be trusted with the token"
    )
