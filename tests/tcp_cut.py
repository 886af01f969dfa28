"""A TCP relay the tests can cut and mend: one process's way to a server (a replica's to PostgreSQL), broken while
the server itself stays up for everyone else — a network partition between the two, as a test can make it.

``cut()`` resets every relayed connection and refuses new ones (each is accepted and reset at once, as a
firewall's reject would); ``mend()`` relays again.
"""

from __future__ import annotations

import contextlib
import selectors
import socket
import struct
import threading
from collections.abc import Iterator

__all__ = ["TcpCut", "tcp_cut"]


class TcpCut:
    """Relays ``127.0.0.1:<port>`` to ``target`` (host, port) until :meth:`cut`."""

    def __init__(self, target: tuple[str, int]) -> None:
        self.target = target
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self._listener.getsockname()[1]
        self._lock = threading.Lock()
        self._open: set[socket.socket] = set()
        self._cut = False
        self._closed = threading.Event()
        self._accepting = threading.Thread(target=self._accept, name="tcp-cut-accept", daemon=True)
        self._accepting.start()

    def cut(self) -> None:
        """Reset every relayed connection; refuse new ones until :meth:`mend`."""
        with self._lock:
            self._cut = True
            for sock in list(self._open):
                _reset(sock)
            self._open.clear()

    def mend(self) -> None:
        with self._lock:
            self._cut = False

    def close(self) -> None:
        self._closed.set()
        self.cut()
        self._listener.close()

    def _accept(self) -> None:
        while not self._closed.is_set():
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            with self._lock:
                refused = self._cut
            if refused:
                _reset(client)
                continue
            try:
                server = socket.create_connection(self.target, timeout=10)
            except OSError:
                _reset(client)
                continue
            with self._lock:
                self._open.update((client, server))
            threading.Thread(target=self._relay, args=(client, server), name="tcp-cut-relay", daemon=True).start()

    def _relay(self, client: socket.socket, server: socket.socket) -> None:
        peer = {client: server, server: client}
        with selectors.DefaultSelector() as selector:
            for sock in peer:
                sock.setblocking(True)
                selector.register(sock, selectors.EVENT_READ)
            try:
                while True:
                    for key, _ in selector.select(timeout=1.0):
                        data = key.fileobj.recv(65536)  # type: ignore[union-attr]
                        if not data:
                            return
                        peer[key.fileobj].sendall(data)  # type: ignore[index]
                    with self._lock:
                        if client not in self._open:
                            return
            except (OSError, ValueError):  # reset by cut(), or by an end
                return
            finally:
                with self._lock:
                    self._open.discard(client)
                    self._open.discard(server)
                for sock in peer:
                    _reset(sock)


def _reset(sock: socket.socket) -> None:
    """Close with a reset (RST), as a broken network path does, not an orderly end."""
    with contextlib.suppress(OSError):
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    with contextlib.suppress(OSError):
        sock.close()


@contextlib.contextmanager
def tcp_cut(url: str) -> Iterator[tuple[TcpCut, str]]:
    """A relay to the database of SQLAlchemy ``url``, and the same URL through the relay."""
    from sqlalchemy.engine import make_url

    parsed = make_url(url)
    relay = TcpCut((parsed.host or "127.0.0.1", parsed.port or 5432))
    try:
        yield relay, parsed.set(host="127.0.0.1", port=relay.port).render_as_string(hide_password=False)
    finally:
        relay.close()
