"""Running ``teamrun`` in a child process the way the kill/resume tests do, and waiting on what it does.

The child is this interpreter running the CLI (``sys.executable -c ...``), so it uses the checkout under test;
its environment loads LiteLLM's bundled price table, reaches the local fake provider without a proxy and has no
``TEAMRUN_STORE`` of the developer's. Polls take a hang guard, never a timing assertion.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable

__all__ = ["child_env", "eventually", "teamrun_argv"]


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
