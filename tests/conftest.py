"""Fixtures shared by every test. Keep each owner's fixtures in its own marked block."""

from __future__ import annotations

# ---- llm: fake OpenAI server and network guard (owner: runner/llm) ----------------------
import ipaddress
import socket
from collections.abc import Iterator
from typing import Any

import pytest

from fakeserver import FakeOpenAI

_real_connect = socket.socket.connect
_real_connect_ex = socket.socket.connect_ex


def _is_loopback(address: Any) -> bool:
    """Whether a socket address points at this machine (or is not an IP address at all)."""
    if not isinstance(address, tuple) or not address:
        return True  # AF_UNIX paths and the like
    host = str(address[0])
    if host in ("localhost", ""):
        return True
    try:
        return ipaddress.ip_address(host.split("%", 1)[0]).is_loopback
    except ValueError:
        return False


def pytest_configure(config: pytest.Config) -> None:
    """LiteLLM's streaming types trip a harmless pydantic warning; keep reports clean."""
    config.addinivalue_line("filterwarnings", r"ignore:.*`ReadOnly` qualifier:UserWarning")


@pytest.fixture(autouse=True)
def _no_network(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """Fail the test if anything connects to a non-loopback address (no real providers)."""
    attempts: list[str] = []

    def guard(address: Any) -> None:
        if not _is_loopback(address):
            attempts.append(repr(address))
            raise RuntimeError(f"tests must not reach the network (tried {address!r})")

    def connect(self: socket.socket, address: Any) -> None:
        guard(address)
        _real_connect(self, address)

    def connect_ex(self: socket.socket, address: Any) -> int:
        guard(address)
        return _real_connect_ex(self, address)

    monkeypatch.setattr(socket.socket, "connect", connect)
    monkeypatch.setattr(socket.socket, "connect_ex", connect_ex)
    yield attempts
    if attempts:
        pytest.fail(f"test tried to reach the network: {', '.join(attempts)}")


@pytest.fixture
def fake_openai(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeOpenAI]:
    """A scripted OpenAI-compatible server on 127.0.0.1; ``.url`` is the ``api_base``.

    Sets a dummy ``OPENAI_API_KEY`` (the OpenAI client refuses to send without one).
    Call ``fake_openai.assert_complete()`` in the test to check the script was used up.
    """
    monkeypatch.setenv("OPENAI_API_KEY", "sk-fake-openai-test-key")
    for name in ("NO_PROXY", "no_proxy"):  # never send loopback traffic through a proxy
        monkeypatch.setenv(name, "127.0.0.1,localhost")
    server = FakeOpenAI().start()
    try:
        yield server
    finally:
        server.stop()


# ---- end llm block ----------------------------------------------------------------------
