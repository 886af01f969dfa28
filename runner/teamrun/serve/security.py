"""Who may call the server, and how much they may send.

Bearer tokens come from an environment variable and/or a file (one token per
line, or comma-separated). Auth is on whenever tokens are configured, and a
server bound to anything but a loopback address refuses to start without them.
"""

from __future__ import annotations

import hmac
import ipaddress
import os
from collections.abc import Awaitable, Callable, Iterable, Mapping, MutableMapping
from pathlib import Path
from typing import Any

from teamrun.bounds import LONE_SURROGATE, lone_surrogate, printable  # the rules of what a sender may send
from teamrun.errors import UsageError

__all__ = [
    "DEFAULT_TOKEN_ENV",
    "LONE_SURROGATE",
    "BearerAuth",
    "BodyLimit",
    "is_loopback",
    "load_tokens",
    "lone_surrogate",
    "printable",
    "token_matches",
]

DEFAULT_TOKEN_ENV = "TEAMRUN_API_TOKENS"
"""The environment variable read for bearer tokens unless ``--token-env`` names another."""

_MIN_TOKEN_CHARS = 16


def is_loopback(host: str) -> bool:
    """Whether ``host`` only accepts connections from this machine."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _split(text: str) -> list[str]:
    return [
        t.strip() for line in text.splitlines() for t in line.split(",") if t.strip() and not t.strip().startswith("#")
    ]


def load_tokens(
    *, env_name: str = DEFAULT_TOKEN_ENV, file: str | Path | None = None, environ: Mapping[str, str] | None = None
) -> frozenset[str]:
    """The bearer tokens from ``$env_name`` and ``file``; a token shorter than 16 characters is refused."""
    env = os.environ if environ is None else environ
    tokens = _split(env.get(env_name, ""))
    if file is not None:
        try:
            tokens += _split(Path(file).read_text(encoding="utf-8"))
        except OSError as exc:
            raise UsageError(f"cannot read the token file {file}: {exc.strerror}") from None
    short = [t for t in tokens if len(t) < _MIN_TOKEN_CHARS]
    if short:
        raise UsageError(
            f"{len(short)} API token(s) shorter than {_MIN_TOKEN_CHARS} characters "
            f"(from ${env_name}{' or ' + str(file) if file else ''}): use long random tokens, "
            "e.g. `python -c 'import secrets; print(secrets.token_urlsafe(32))'`"
        )
    return frozenset(tokens)


def token_matches(header: str | None, tokens: Iterable[str]) -> bool:
    """Whether an ``Authorization: Bearer ...`` header carries one of ``tokens`` (constant-time compare)."""
    if not header:
        return False
    scheme, _, given = header.partition(" ")
    if scheme.lower() != "bearer" or not given.strip():
        return False
    given_bytes = given.strip().encode()
    found = False
    for token in tokens:
        found |= hmac.compare_digest(given_bytes, token.encode())
    return found


Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


class BodyLimit:
    """ASGI middleware: a request body larger than ``max_bytes`` is answered 413, whatever its framing."""

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope.get("headers") or []).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.max_bytes:
            await self._refuse(send, scope)
            return
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            body = message.get("body", b"")
            size += len(body)
            if size > self.max_bytes:
                await self._refuse(send, scope)
                return
            chunks.append(body)
            if not message.get("more_body", False):
                break
        whole = b"".join(chunks)
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": whole, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)

    async def _refuse(self, send: Send, scope: Scope) -> None:
        said = b"request body larger than " + str(self.max_bytes).encode() + b" bytes"
        if str(scope.get("path", "")).startswith("/a2a/"):  # A2A answers in JSON-RPC's error shape
            body = (
                b'{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"'
                + said
                + b'","data":{"reason":"REQUEST_TOO_LARGE"}}}'
            )
        else:
            body = b'{"error":{"message":"' + said + b'","type":"invalid_request_error","code":"request_too_large"}}'

        await send(
            {
                "type": "http.response.start",
                "status": 413,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())],
            }
        )
        await send({"type": "http.response.body", "body": body})


class BearerAuth:
    """ASGI middleware: every HTTP request needs ``Authorization: Bearer <token>`` (401 in the OpenAI shape).

    Guards an app whose routes are not ours (the MCP SDK's streamable HTTP endpoint)
    the way :func:`teamrun.serve.app.create_app` guards its own.
    """

    def __init__(self, app: ASGIApp, tokens: frozenset[str]) -> None:
        self.app = app
        self.tokens = tokens

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        given = dict(scope.get("headers") or []).get(b"authorization")
        if token_matches(given.decode("latin-1") if given is not None else None, self.tokens):
            await self.app(scope, receive, send)
            return
        body = (
            b'{"error":{"message":"missing or invalid bearer token (send `Authorization: Bearer <token>`)",'
            b'"type":"authentication_error","code":"invalid_api_key"}}'
        )
        await send(
            {
                "type": "http.response.start",
                "status": 401,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"www-authenticate", b"Bearer"),
                    (b"content-length", str(len(body)).encode()),
                ],
            }
        )
        await send({"type": "http.response.body", "body": body})
