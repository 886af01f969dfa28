"""Replicas of `teamrun serve` on one PostgreSQL store, a provider that counts what it was paid for, HAProxy.

:class:`Provider` answers a three-call run per task (two lookups, then the answer) on the fake OpenAI server and
logs each request as ``(task, call number)``; its :attr:`Provider.gate` holds every second call until it is set (the
test kills or pauses a replica meanwhile: each run has then finished and acted on its first call). :func:`replica`
starts one `teamrun serve --store URL --lease S` child (:func:`replicas` several, side by side); :func:`haproxy`
puts HAProxy (Debian's package) in front of replicas, round-robin, no stickiness.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import json
import shutil
import subprocess
import threading
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from tests.cli_processes import Serving, child_env, free_port, running, serving
from tests.fakeserver import FakeOpenAI, Reply, hang, text, tool_calls
from tests.waiting import answers, wait_until

__all__ = ["LEASE_S", "TOKEN", "Provider", "haproxy", "replica", "replicas", "team_file"]

LEASE_S = "2"
"""The replicas' ``--lease``: a stopped replica's runs move after 2 s."""
SLOTS = 80
"""Each replica's run slots: the tests hold up to all of their runs in flight on one replica (issue 46's figures:
30 runs in flight at a SIGKILL, 100 runs through the load balancer)."""
TOKEN = "replica-token-0123456789abcdef"
HAPROXY_HINT = "the replica tests need HAProxy: install the Debian package `haproxy` (.ci/install-and-test does)"


def team_file(tmp_path: Path, url: str) -> Path:
    """One agent that looks facts up (a task ``ask ...`` asks a person, ``approve ...`` deploys after approval)."""
    (tmp_path / "facts.py").write_text(
        'def lookup(query: str) -> str:\n    "Look up a fact."\n    return f"fact about {query}"\n\n\n'
        'def deploy(target: str) -> str:\n    "Deploy a target."\n    return f"deployed {target}"\n',
        encoding="utf-8",
    )
    path = tmp_path / "steps.yaml"
    path.write_text(
        "version: 1\nname: steps\nsupervisor: lead\n"
        f"defaults: {{api_base: '{url}', api_key_env: TEAMRUN_TEST_KEY, num_retries: 0, request_timeout_s: 900}}\n"
        "tools:\n  lookup: {python: 'facts:lookup'}\n  deploy: {python: 'facts:deploy', require_approval: true}\n"
        "  ask_owner: {person: {}}\n"
        "agents:\n  lead: {model: openai/steps, description: Looks facts up., tools: [lookup, deploy, ask_owner]}\n",
        encoding="utf-8",
    )
    return path


class Provider:
    """Stateless replies (a resumed run gets the same ones); every request logged as ``(task, call number)``."""

    def __init__(self, server: FakeOpenAI) -> None:
        self.lock = threading.Lock()
        self.arrived: list[tuple[str, int]] = []
        self.gate: threading.Event | None = None
        """While set to an unset event, every second call waits for it before its reply."""
        server.handler("steps", self.answer)

    def answer(self, request: dict[str, Any]) -> Reply:
        task = next(str(m["content"]) for m in request["messages"] if m["role"] == "user")
        call = 1 + sum(1 for m in request["messages"] if m["role"] == "tool")
        with self.lock:
            self.arrived.append((task, call))
            gate = self.gate
        if task.startswith("cancel"):
            return hang(300)  # until the run is cancelled
        if task.startswith(("ask", "approve")):
            if call == 1:
                asked = ("ask_owner", {"question": "how many seats?"}) if task.startswith("ask") else None
                return tool_calls(asked or ("deploy", {"target": task}))
            said = next(m["content"] for m in request["messages"] if m["role"] == "tool")
            return text(f"done: {task}: {said}")
        if call == 2 and gate is not None:
            gate.wait(timeout=300)
        if call < 3:
            return tool_calls(("lookup", {"query": f"{task} {call}"}))
        return text(f"done: {task}")

    def calls(self) -> Counter[tuple[str, int]]:
        with self.lock:
            return Counter(self.arrived)

    def reached(self, tasks: list[str], call: int) -> bool:
        with self.lock:
            return all((task, call) in self.arrived for task in tasks)


def env() -> dict[str, str]:
    return child_env(TEAMRUN_TEST_KEY="sk-test-replicas", TEAMRUN_API_TOKENS=TOKEN)


@contextlib.contextmanager
def replica(
    team: Path, store: str, *, port: int | None = None, slots: int = SLOTS, lease: str = LEASE_S
) -> Iterator[Serving]:
    """One ``teamrun serve --store STORE --lease LEASE --max-concurrent-runs SLOTS`` replica (its warnings on
    stderr, read once it ended)."""
    options = ("--store", store, "--lease", lease, "--max-concurrent-runs", str(slots))
    with serving(str(team), *options, env=env(), cwd=team.parent, port=port) as server:
        yield server


@contextlib.contextmanager
def replicas(team: Path, store: str, count: int, *, lease: str = LEASE_S) -> Iterator[list[Serving]]:
    """``count`` :func:`replica` children started side by side (a start is mostly Python's imports and LiteLLM's
    set-up, several seconds each: one after the other, they add up)."""
    with contextlib.ExitStack() as stack:
        starts = [replica(team, store, lease=lease) for _ in range(count)]
        with concurrent.futures.ThreadPoolExecutor(count) as pool:
            started = [pool.submit(start.__enter__) for start in starts]
        for start, future in zip(starts, started, strict=True):
            if future.exception() is None:  # (one that failed has ended its child already)
                stack.push(start.__exit__)
        yield [future.result() for future in started]


@contextlib.contextmanager
def haproxy(tmp_path: Path, backends: list[str]) -> Iterator[str]:
    """HAProxy on a free port in front of ``backends`` (base URLs), round-robin, no stickiness; its URL. A request
    a replica refuses (it stops: its port is closed, or it answers 503) is sent to the next one (docs/serve.md)."""
    binary = shutil.which("haproxy") or "/usr/sbin/haproxy"
    if not Path(binary).exists():
        raise AssertionError(HAPROXY_HINT)
    port = free_port()
    servers = "\n".join(f"    server r{i} {url.removeprefix('http://')}" for i, url in enumerate(backends))
    config = tmp_path / "haproxy.cfg"
    config.write_text(
        "global\n    maxconn 1000\n"
        "defaults\n    mode http\n    timeout connect 2s\n    timeout client 300s\n    timeout server 300s\n"
        "    retries 3\n    option redispatch 1\n    retry-on conn-failure empty-response response-timeout 503\n"
        f"frontend api\n    bind 127.0.0.1:{port}\n    default_backend replicas\n"
        "backend replicas\n    balance roundrobin\n" + servers + "\n",
        encoding="utf-8",
    )
    with running([binary, "-f", str(config), "-db"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT) as process:
        url = f"http://127.0.0.1:{port}"
        wait_until(lambda: answers(url + "/readyz", status=200), "HAProxy ready", alive=process)
        yield url


class Follower:
    """A client following a run's ``/events`` on the server at ``url``, in a thread of its own, to the stream's end:
    what it read so far is :attr:`text` (:func:`events_of` parses it)."""

    def __init__(self, url: str, run_id: str) -> None:
        import httpx

        self.seen: list[str] = []

        def follow() -> None:
            with (
                httpx.Client(base_url=url, timeout=60) as client,
                client.stream("GET", f"/v1/runs/{run_id}/events") as body,
            ):
                self.seen.extend(body.iter_text())

        self.thread = threading.Thread(target=follow, daemon=True)
        self.thread.start()

    @property
    def text(self) -> str:
        return "".join(self.seen)

    def join(self, timeout_s: float) -> None:
        self.thread.join(timeout_s)

    def is_alive(self) -> bool:
        return self.thread.is_alive()


def events_of(body: str) -> list[tuple[int | None, str, dict[str, Any]]]:
    """An SSE body's messages: ``(id, event, data)``."""
    found = []
    for block in body.split("\n\n"):
        fields: dict[str, str] = {}
        for line in block.splitlines():
            name, _, value = line.partition(": ")
            if name in ("id", "event", "data"):
                fields[name] = value
        if "data" in fields:
            found.append(
                (int(fields["id"]) if "id" in fields else None, fields.get("event", ""), json.loads(fields["data"]))
            )
    return found
