"""Running ``teamrun`` in a child process the way the kill/resume tests do: start it, kill it at a point, list the
run it left, resume it.

The child is this interpreter running the CLI (``sys.executable -c ...``), so it uses the checkout under test;
its environment loads LiteLLM's bundled price table, reaches the local fake provider without a proxy and has no
``TEAMRUN_STORE`` of the developer's. Waits take a hang guard (tests/waiting.py), never a timing assertion.

A kill/resume test reads::

    run = killed_run(team, store, ready, where=lambda: ...)  # SIGKILLed once ready() holds; listed interrupted
    resumed = resume(run["run_id"], store)                    # `teamrun resume ... --json`, run to its end
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.waiting import GUARD_S, answers, wait_until

__all__ = [
    "Serving",
    "child_env",
    "execute_argv",
    "free_port",
    "killed_run",
    "listed_run",
    "resume",
    "running",
    "serving",
    "signal_when",
    "stop_when",
    "teamrun",
    "teamrun_argv",
]


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
    guard_s: float = GUARD_S,
) -> int:
    """Send ``signum`` to ``process`` once ``ready()`` holds, then wait for it to end; returns its exit code.

    Fails if the process ends first, or if ``ready()`` does not hold within ``guard_s`` (a hang guard, no timing
    assertion): the message shows ``where()``, where the child had got to.
    """
    wait_until(ready, f"the point to send {signum.name} at", guard_s=guard_s, where=where, alive=process)
    os.kill(process.pid, signum)
    process.communicate(timeout=guard_s)
    return process.returncode


def stop_when(
    argv: list[str],
    ready: Callable[[], bool],
    signum: signal.Signals = signal.SIGKILL,
    *,
    where: Callable[[], object],
    env: dict[str, str] | None = None,
    guard_s: float = GUARD_S,
) -> int:
    """Start ``argv`` (a :func:`teamrun_argv`, or any command), send it ``signum`` once ``ready()`` holds and
    return its exit code.

    Its output is dropped and its stderr kept aside: a failure (it ended first, it never got there) shows where
    the child had got to (``where()``) and the end of what it wrote to stderr.
    """
    with tempfile.TemporaryFile("w+", encoding="utf-8") as stderr:

        def stood() -> str:
            stderr.seek(0)
            return f"{where()}; its stderr ends: {stderr.read()[-2000:]!r}"

        with running(argv, stdout=subprocess.DEVNULL, stderr=stderr, env=child_env() if env is None else env) as child:
            return signal_when(child, ready, signum, where=stood, guard_s=guard_s)


def teamrun(*args: str, env: dict[str, str] | None = None, timeout_s: float = 600) -> subprocess.CompletedProcess[str]:
    """``teamrun *args`` run to its end in a child process (:func:`child_env` unless ``env``), output captured."""
    env = child_env() if env is None else env
    return subprocess.run(teamrun_argv(*args), capture_output=True, text=True, env=env, timeout=timeout_s)


def execute_argv(team: Path, store: str, *, task: str = "go") -> list[str]:
    """``teamrun execute TEAM -i TASK --store STORE``, journaled and without progress output."""
    return teamrun_argv("execute", str(team), "-i", task, "--store", store, "--progress", "none")


def listed_run(store: str, *, env: dict[str, str] | None = None) -> dict[str, Any]:
    """The one run of ``store``, as ``teamrun runs list --json`` shows it."""
    listed = teamrun("runs", "list", "--store", store, "--json", env=env, timeout_s=120)
    assert listed.returncode == 0, listed.stderr
    runs = json.loads(listed.stdout)
    assert len(runs) == 1, f"the store holds {len(runs)} runs, not one: {runs}"
    run: dict[str, Any] = runs[0]
    return run


def killed_run(
    team: Path,
    store: str,
    ready: Callable[[], bool],
    *,
    where: Callable[[], object],
    task: str = "go",
    env: dict[str, str] | None = None,
) -> dict[str, Any]:
    """Execute ``team`` journaled in ``store``, SIGKILL it once ``ready()`` holds, and return the run it left as
    ``teamrun runs list --json`` shows it: interrupted, since its process is gone."""
    code = stop_when(execute_argv(team, store, task=task), ready, where=where, env=env)
    assert code == -signal.SIGKILL, f"the run ended with exit code {code} instead of being killed"
    run = listed_run(store, env=env)
    assert run["status"] == "interrupted", run
    return run


def resume(run_id: str, store: str, *extra: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """``teamrun resume RUN --store STORE --json`` (no progress output, then ``extra``) run to its end."""
    return teamrun("resume", run_id, "--store", store, "--json", "--progress", "none", *extra, env=env)


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class Serving:
    """A ``teamrun serve`` child process (:func:`serving`): its base URL and, once it has ended, its output."""

    url: str
    process: subprocess.Popen[str]
    stdout: str = ""
    stderr: str = ""

    def stop(self, timeout_s: float = 120) -> int:
        """SIGTERM, as a process manager stops it; returns its exit code."""
        self.process.send_signal(signal.SIGTERM)
        return self.process.wait(timeout=timeout_s)


@contextlib.contextmanager
def serving(
    *args: str,
    env: dict[str, str] | None = None,
    options: Sequence[str] = (),
    cwd: Path | None = None,
    port: int | None = None,
    ready: str = "/readyz",
    ready_status: int | None = 200,
) -> Iterator[Serving]:
    """``teamrun OPTIONS serve ARGS --port P`` in a child process, yielded once ``ready`` answers ``ready_status``
    (``None``: answers at all).

    It is killed on the way out if it still runs (stop it with :meth:`Serving.stop` to see it end cleanly); its
    output is then in ``.stdout`` and ``.stderr``. A server that exits at start fails the wait at once, with what
    it wrote.
    """
    port = port or free_port()
    argv = teamrun_argv(*options, "serve", *args, "--port", str(port))
    env = child_env() if env is None else env
    process = subprocess.Popen(argv, env=env, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    server = Serving(f"http://127.0.0.1:{port}", process)

    output: list[tuple[str, str]] = []

    def finish() -> tuple[str, str]:
        """Its stdout and stderr, read once (it has ended)."""
        if not output:
            output.append(process.communicate())
        return output[0]

    def where() -> str:
        return f"its stderr: {finish()[1]!r}" if process.poll() is not None else "it still runs"

    try:
        up = f"`teamrun serve` answering at {ready}"
        wait_until(lambda: answers(server.url + ready, status=ready_status), up, where=where, alive=process)
        yield server
    finally:
        if process.poll() is None:
            process.kill()
        server.stdout, server.stderr = finish()
