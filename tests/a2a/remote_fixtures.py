"""The a2a-sdk test agent (tests/a2a/a2a_test_server.py) under uvicorn in a subprocess, and team files for it.

``a2a_agent(mode=..., token=...)`` starts one agent and returns an :class:`A2AAgent`: its URL, and
what it recorded (requests by JSON-RPC method, each ``execute`` with the text it got, each ``cancel``).
Every agent started is stopped when the test ends.
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.cli_processes import free_port
from tests.waiting import answers, wait_until

SERVER = Path(__file__).resolve().parent / "a2a_test_server.py"
REPO = Path(__file__).resolve().parents[2]
START_GUARD_S = 90.0
"""Most seconds an agent may take to start on a loaded machine (a hang guard, not a timing)."""


@dataclass
class A2AAgent:
    url: str
    log: Path
    release: Path
    process: subprocess.Popen[bytes]

    def records(self, event: str | None = None) -> list[dict[str, Any]]:
        if not self.log.exists():
            return []
        lines = [json.loads(line) for line in self.log.read_text(encoding="utf-8").splitlines() if line.strip()]
        return [line for line in lines if event is None or line["event"] == event]

    def methods(self) -> list[str]:
        return [r["method"] for r in self.records("request") if r.get("method")]


def start_server(argv: list[str], url: str, what: str, *, env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
    """Start ``argv``, an A2A agent that serves at ``url``, and wait until its agent card answers.

    ``what`` names it in a failure: it exited at start, or did not answer within ``START_GUARD_S`` (a hang
    guard); either way it is stopped first.
    """
    process = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    try:
        card = f"{url}/.well-known/agent-card.json"
        wait_until(lambda: answers(card), f"{what} answering at {url}", guard_s=START_GUARD_S, alive=process)
    except BaseException:
        stop(process)
        raise
    return process


def stop(process: subprocess.Popen[bytes]) -> None:
    """Stop an agent started by :func:`start_server`: terminate, then kill if it is still there after 30 s."""
    process.terminate()
    with contextlib.suppress(subprocess.TimeoutExpired):
        process.wait(timeout=30)
    if process.poll() is None:
        process.kill()


def start_agent(
    directory: Path,
    *,
    mode: str = "ANSWER",
    token: str | None = None,
    extra: tuple[str, ...] = (),
    port: int | None = None,
) -> A2AAgent:
    """``port``: that one (an agent started again where an earlier one ran), else a free one."""
    port = port or free_port()
    log = directory / f"a2a-{port}.jsonl"
    for again in range(1, 100):  # an agent started again on a port: its own record
        if not log.exists():
            break
        log = directory / f"a2a-{port}-{again}.jsonl"
    release = directory / f"release-{port}"
    argv = [sys.executable, str(SERVER), "--port", str(port), "--mode", mode, "--log", str(log)]
    argv += ["--release", str(release), *extra]
    if token is not None:
        argv += ["--token", token]
    url = f"http://127.0.0.1:{port}"
    agent = A2AAgent(url, log, release, start_server(argv, url, "the a2a test agent"))
    if log.exists():
        log.write_text("", encoding="utf-8")  # the start-up probe is not a request of the test
    return agent


@pytest.fixture
def a2a_agent(tmp_path: Path) -> Iterator[Callable[..., A2AAgent]]:
    started: list[A2AAgent] = []

    def start(**options: Any) -> A2AAgent:
        agent = start_agent(tmp_path, **options)
        started.append(agent)
        return agent

    yield start
    for agent in started:
        stop(agent.process)


def team_file(directory: Path, url: str, *, auth: str | None = None, extra: str = "", name: str = "team") -> Path:
    """A lead (``offline``) delegating to one remote worker ``researcher`` at ``url``."""
    auth_line = f"\n      auth: {{bearer_env: {auth}}}" if auth else ""
    path = directory / f"{name}.yaml"
    path.write_text(
        f"""version: 1
name: remote-test
supervisor: lead
defaults: {{model: offline}}
agents:
  lead:
    description: Delegates to the researcher.
    delegates_to: [researcher]
  researcher:
    description: A remote researcher.
    a2a:
      url: {url}
      timeout_s: 30{auth_line}
{extra}""",
        encoding="utf-8",
    )
    return path
