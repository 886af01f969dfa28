"""Blocking real network traffic in tests: only loopback (and Unix sockets) may connect."""

from __future__ import annotations

import ipaddress
import socket
from typing import Any

__all__ = ["NetworkBlockedError", "NetworkGuard", "is_loopback"]


class NetworkBlockedError(RuntimeError):
    """A test tried to connect to a non-loopback address."""


def is_loopback(address: Any) -> bool:
    """Whether a socket address points at this machine (or is not an IP address at all)."""
    if not isinstance(address, tuple) or not address:
        return True  # AF_UNIX paths and the like
    host = str(address[0])
    if host in ("localhost", ""):
        return True
    try:
        return ipaddress.ip_address(host.split("%", 1)[0]).is_loopback
    except ValueError:
        return False  # a host name: resolved elsewhere, so treat as remote


class NetworkGuard:
    """While active, ``socket.connect`` to anything but loopback raises :class:`NetworkBlockedError`.

    Attempts are remembered in :attr:`attempts` even when the caller swallows
    the error (HTTP clients often do), so a test can still be failed for them.
    """

    def __init__(self) -> None:
        self.attempts: list[str] = []
        self._saved: tuple[Any, Any] | None = None

    def _check(self, address: Any) -> None:
        if not is_loopback(address):
            self.attempts.append(repr(address))
            raise NetworkBlockedError(
                f"tests must not reach the network (tried {address!r}); use the offline model, a scripted "
                "model or a cassette, or mark the test @pytest.mark.teamrun_allow_network"
            )

    def __enter__(self) -> NetworkGuard:
        real_connect, real_connect_ex = socket.socket.connect, socket.socket.connect_ex
        self._saved = (real_connect, real_connect_ex)
        guard = self

        def connect(sock: socket.socket, address: Any) -> None:
            guard._check(address)
            real_connect(sock, address)

        def connect_ex(sock: socket.socket, address: Any) -> int:
            guard._check(address)
            return real_connect_ex(sock, address)

        socket.socket.connect = connect  # type: ignore[method-assign,assignment]
        socket.socket.connect_ex = connect_ex  # type: ignore[method-assign,assignment]
        return self

    def __exit__(self, *exc: object) -> None:
        if self._saved is not None:
            socket.socket.connect, socket.socket.connect_ex = self._saved  # type: ignore[method-assign]
            self._saved = None
