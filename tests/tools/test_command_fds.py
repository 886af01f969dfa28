"""A command tool's program gets no descriptor of the process that runs it but its own three standard ones.

`teamrun serve` runs on uvloop, whose ``subprocess_exec`` ignores ``close_fds``: a command inherited the server's
listening socket (inheritable, for ``--workers``), and one left running by a SIGKILLed server kept its port.
"""

from __future__ import annotations

import asyncio
import os
import socket
from collections.abc import Callable, Coroutine
from typing import Any

import pytest
import uvloop

from teamrun.tools import CommandTool

LOOPS: dict[str, Callable[[Coroutine[Any, Any, str]], str]] = {"asyncio": asyncio.run, "uvloop": uvloop.run}


def _links(fd_dir: str) -> dict[int, str]:
    return {
        int(name): os.readlink(f"{fd_dir}/{name}") for name in os.listdir(fd_dir) if os.path.exists(f"{fd_dir}/{name}")
    }


@pytest.mark.parametrize("loop", sorted(LOOPS))
def test_a_command_inherits_no_socket_of_the_process_that_runs_it(loop: str) -> None:
    listener = socket.create_server(("127.0.0.1", 0))
    listener.set_inheritable(True)  # as `teamrun serve` leaves its listening socket, for its workers
    try:
        ours = {link for link in _links("/proc/self/fd").values() if link.startswith("socket:")}
        assert f"socket:[{os.fstat(listener.fileno()).st_ino}]" in ours
        tool = CommandTool("fds", ["ls", "-l", "/proc/self/fd"])
        listing = LOOPS[loop](tool.run({}))
    finally:
        listener.close()
    targets = [line.split(" -> ")[1] for line in listing.splitlines() if " -> " in line]
    assert not set(targets) & ours, f"the command kept the parent's sockets: {sorted(set(targets) & ours)}"
    # 0 stdin (/dev/null), 1 and 2 the output pipes, and ls's own reading of /proc/self/fd: nothing inherited beyond.
    assert len(targets) <= 4, targets
