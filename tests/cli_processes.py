"""Running ``teamrun`` in a child process the way the kill/resume tests do, and waiting on what it does.

The child is this interpreter running the CLI (``sys.executable -c ...``), so it uses the checkout under test;
its environment loads LiteLLM's bundled price table, reaches the local fake provider without a proxy and has no
``TEAMRUN_STORE`` of the developer's. Polls take a hang guard, never a timing assertion.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any

__all__ = ["child_env", "eventually", "running", "signal_when", "teamrun_argv"]


def teamrun_argv(*args: str) -> list[str]:
    """The command line of ``teamrun *args`` in a child process."""
    return [sys.executable, "-c", "from teamrun.cli import main; main()", *args]


def child_env(**extra: str) -> dict[str, str]:
    """This process's environment for a ``teamrun`` child, with ``extra`` set (e.g. a provider key)."""
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", **extra}
    env.pop("TEAMRUN_STORE", None)
    for name in ("NO_PROXY", "no_proxy"):
        env[name] = "127.0.0.1,localhost"
    return env


def eventually(condition: Callable[[], bool], guard_s: float = 240) -> bool:
    """Poll ``condition`` until it holds; ``guard_s`` only stops a hang (no timing assertion)."""
    deadline = time.monotonic() + guard_s
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    return True


@contextlib.contextmanager
def running(argv: list[str], **options: Any) -> Iterator[subprocess.Popen[Any]]:
    """``subprocess.Popen(argv, **options)``, killed on the way out if it still runs: a failing test leaves no child."""
    process = subprocess.Popen(argv, **options)
    try:
        yield process
    finally:
        if process.poll() is None:
            process.kill()


def signal_when(
    process: subprocess.Popen[Any],
    ready: Callable[[], bool],
    signum: signal.Signals,
    *,
    where: Callable[[], object],
    guard_s: float = 240,
) -> int:
    """Send ``signum`` to ``process`` once ``ready()`` holds, then wait for it to end; returns its exit code.

    Fails if the process ends first, or if ``ready()`` does not hold within ``guard_s`` (a hang guard, no timing
    assertion): the message shows ``where()``, where the child had got to.
    """
    deadline = time.monotonic() + guard_s
    while not ready():
        assert process.poll() is None, f"the run ended before it was sent {signum.name}"
        assert time.monotonic() < deadline, f"never got there: {where()}"
        time.sleep(0.05)
    os.kill(process.pid, signum)
    return process.wait(timeout=guard_s)
