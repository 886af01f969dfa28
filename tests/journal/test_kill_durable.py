"""Issue 22, items 17 and 18: a reply is durable before the engine acts on it, and a killed run shows what it spent.

A 30-worker fan-out against the fake server, with latency, journaled to SQLite or PostgreSQL. The server
SIGKILLs the teamrun process the moment it receives the 10th worker's second request: that request carries
the tool result the worker got by acting on its first reply, so every first reply acted on by then must
already be in the journal. Resumed in a new process, none of them is asked for again; only requests that
were in flight at the kill are.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.cli_processes import child_env, execute_argv, listed_run, resume, running, teamrun
from tests.fakeserver import FakeOpenAI, Reply, text, tool_calls


def _env() -> dict[str, str]:
    return child_env(TEAMRUN_TEST_KEY="sk-test-journal")


WORKERS = 30
LATENCY_S = 0.15
STAGGER_S = 0.01
"""Worker wN's first reply comes N * 10 ms later than the latency: the workers act on them one after another."""
KILL_AT = 10
"""The server kills the run when this many workers have sent their second request."""


def _team(tmp_path: Path, url: str) -> Path:
    (tmp_path / "facts.py").write_text(
        'def lookup(query: str) -> str:\n    "Look up a fact."\n    return f"fact about {query}"\n', encoding="utf-8"
    )
    names = [f"w{i}" for i in range(1, WORKERS + 1)]
    lines = [
        "version: 1",
        "name: fan30",
        "supervisor: lead",
        f"defaults: {{api_base: '{url}', api_key_env: TEAMRUN_TEST_KEY, num_retries: 0, request_timeout_s: 900}}",
        "tools:",
        "  lookup: {python: 'facts:lookup'}",
        "agents:",
        f"  lead: {{model: openai/gpt-4o-mini, delegates_to: [{', '.join(names)}], "
        f"delegation: {{max_concurrency: {WORKERS}}}, budget: {{max_delegations: {WORKERS}}}}}",
    ]
    lines += [f"  {n}: {{model: openai/gpt-4o-mini, description: Looks up one fact., tools: [lookup]}}" for n in names]
    path = tmp_path / "team.yaml"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


class Server:
    """Stateless replies (a resumed run gets the same answers); ``arrived`` logs each request as it comes."""

    def __init__(self, server: FakeOpenAI) -> None:
        self.lock = threading.Lock()
        self.arrived: list[tuple[str, int]] = []
        """``(agent, call number)`` in arrival order: ``("w3", 2)`` is worker w3's second request."""
        self.kill: Callable[[], None] | None = None
        self.killed_after: list[tuple[str, int]] | None = None
        server.handler("gpt-4o-mini", self.answer)

    def answer(self, request: dict[str, Any]) -> Reply:
        system = str(request["messages"][0]["content"])
        results = [m for m in request["messages"] if m["role"] == "tool"]
        agent = "lead" if "ask_w1" in json.dumps(request.get("tools") or []) else _worker(system)
        with self.lock:
            self.arrived.append((agent, 2 if results else 1))
            seconds = sum(1 for a, n in self.arrived if a != "lead" and n == 2)
            if self.kill is not None and self.killed_after is None and seconds == KILL_AT:
                self.killed_after = list(self.arrived)
                self.kill()
        if agent == "lead":
            if not results:
                return tool_calls(
                    *((f"ask_w{i}", {"task": f"fact {i}"}) for i in range(1, WORKERS + 1)), delay=LATENCY_S
                )
            answers = sorted(json.loads(m["content"])["response"] for m in results)
            return text("final: " + "; ".join(answers), delay=LATENCY_S)
        if not results:
            return tool_calls(("lookup", {"query": agent}), delay=LATENCY_S + STAGGER_S * int(agent[1:]))
        return text(f"{agent}: {results[-1]['content']}", delay=LATENCY_S)


def _worker(system: str) -> str:
    for i in range(WORKERS, 0, -1):
        if f"w{i}" in system:
            return f"w{i}"
    raise AssertionError(f"no worker named in {system[:200]!r}")


def test_a_kill_re_pays_only_the_replies_that_were_not_acted_on(
    tmp_path: Path, store_url: str, fake_openai: FakeOpenAI
) -> None:
    fake = fake_openai
    server = Server(fake)
    team = _team(tmp_path, fake.url)
    argv = execute_argv(team, store_url)
    with running(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=_env()) as process:
        server.kill = lambda: os.kill(process.pid, signal.SIGKILL)
        _, err = process.communicate(timeout=600)
    assert process.returncode == -signal.SIGKILL, err
    before = server.killed_after
    assert before is not None
    acted_on = {agent for agent, call in before if call == 2} | {"lead"}
    """Agents whose first reply the engine had acted on when it was killed (the lead delegated)."""

    # item 18: the killed run shows what its journaled replies spent
    run = listed_run(store_url, env=_env())
    assert run["status"] == "interrupted"
    assert run["usage"]["requests"] >= len(acted_on) and run["usage"]["total_tokens"] > 0 and run["cost"] > 0
    shown = teamrun("runs", "show", run["run_id"], "--store", store_url, env=_env())
    assert f"{run['usage']['requests']} model calls" in shown.stdout
    assert "$0.0000" not in shown.stdout

    server.arrived.clear()
    server.kill = None
    resumed = resume(run["run_id"], store_url, env=_env())
    assert resumed.returncode == 0, resumed.stderr
    again = list(server.arrived)

    asked_again = {agent for agent, call in again if call == 1}
    assert asked_again & acted_on == set(), "a reply the engine had acted on was paid for again"
    # what was asked again had not been acted on: in flight at the kill, or not asked yet
    assert asked_again <= {f"w{i}" for i in range(1, WORKERS + 1)} - acted_on
    result = json.loads(resumed.stdout)
    assert result["status"] == "done" and result["final_text"].count("fact about w") == WORKERS
