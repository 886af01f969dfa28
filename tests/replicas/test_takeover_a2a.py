"""Issue 46: a run taken over by another replica while its remote A2A task works picks that task up again.

A remote agent: a single `teamrun serve` (no store, no lease) whose model is held until the test releases it, so
its task stays ``working``. Two `teamrun serve --lease 2` replicas on one PostgreSQL store run a team whose lead
delegates to that agent (``a2a:``). Once replica A has the remote task's id (its ``remote_update`` event: the
``remote_start`` entry is journaled before it), A is SIGKILLed: replica B takes the run over (``run_moved``),
reattaches to the same remote task (``GetTask``, then ``SubscribeToTask``; the remote agent got one task, its
model was asked once) and, once the test releases the remote's model, ends the run ``done`` with the remote's
answer; the lead's finished model call is not paid again.

The same when A stops otherwise: SIGTERM (a rolling restart: A hands the run over), and SIGSTOP then SIGCONT
once B took the run (A finds it moved). A replica that stopped executing a run for another to continue it
cancelled its remote task on the way out, as a cancelled run does: B then found the task ``canceled``.
"""

from __future__ import annotations

import json
import os
import signal
import threading
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from tests.cli_processes import child_env, serving
from tests.fakeserver import FakeOpenAI, Reply, text, tool_calls
from tests.pgserver import new_database
from tests.replicas.cluster import TOKEN, events_of, replica
from tests.waiting import wait_until

AUTH = {"Authorization": f"Bearer {TOKEN}"}
TASK = "find the facts about Rust"


class Models:
    """The lead's model (on the replicas: delegate, then answer with what the remote said) and the remote agent's
    (held until :attr:`release` is set); every request counted as ``(model, user message, call number)``."""

    def __init__(self, server: FakeOpenAI) -> None:
        self.lock = threading.Lock()
        self.arrived: list[tuple[str, str, int]] = []
        self.release = threading.Event()
        server.handler("lead", self.lead)
        server.handler("held", self.held)

    def _log(self, model: str, request: dict[str, Any]) -> tuple[str, list[dict[str, Any]]]:
        task = next(str(m["content"]) for m in request["messages"] if m["role"] == "user")
        said = [m for m in request["messages"] if m["role"] == "tool"]
        with self.lock:
            self.arrived.append((model, task, 1 + len(said)))
        return task, said

    def lead(self, request: dict[str, Any]) -> Reply:
        task, said = self._log("lead", request)
        if not said:
            return tool_calls(("ask_researcher", {"task": task}))
        result = json.loads(said[0]["content"])
        return text(f"lead reports: {result.get('response') or result.get('error')}")

    def held(self, request: dict[str, Any]) -> Reply:
        task, _ = self._log("held", request)
        self.release.wait(timeout=300)
        return text(f"remote answer: {task}")

    def calls(self) -> Counter[tuple[str, str, int]]:
        with self.lock:
            return Counter(self.arrived)

    def asked(self, model: str) -> bool:
        with self.lock:
            return any(name == model for name, _, _ in self.arrived)


def _remote_team(tmp_path: Path, provider: str) -> Path:
    """The remote agent's team: one agent on the held model (served alone, by its own `teamrun serve`)."""
    (tmp_path / "remote").mkdir()
    remote = tmp_path / "remote" / "remote.yaml"
    remote.write_text(
        "version: 1\nname: remote\nsupervisor: desk\n"
        f"defaults: {{api_base: '{provider}', api_key_env: TEAMRUN_TEST_KEY, num_retries: 0, request_timeout_s: 900}}\n"
        "agents:\n  desk: {model: openai/held, description: Answers questions about languages.}\n",
        encoding="utf-8",
    )
    return remote


def _team(tmp_path: Path, provider: str, remote_url: str) -> Path:
    """The replicas' team: the lead delegates to ``researcher``, the remote agent at ``remote_url``."""
    path = tmp_path / "lead.yaml"
    path.write_text(
        "version: 1\nname: lead\nsupervisor: lead\n"
        f"defaults: {{api_base: '{provider}', api_key_env: TEAMRUN_TEST_KEY, num_retries: 0, request_timeout_s: 900}}\n"
        "agents:\n"
        "  lead: {model: openai/lead, description: Delegates research., delegates_to: [researcher]}\n"
        f"  researcher: {{description: Researches., a2a: {{url: '{remote_url}/a2a/remote/', timeout_s: 300}}}}\n",
        encoding="utf-8",
    )
    return path


def _until_event(url: str, run_id: str, wanted: Callable[[str, dict[str, Any]], bool]) -> dict[str, Any]:
    """Follow the run's events on ``url`` until one ``wanted(kind, data)`` accepts; that event's data."""
    block: list[str] = []
    with (
        httpx.Client(base_url=url, headers=AUTH, timeout=300) as client,
        client.stream("GET", f"/v1/runs/{run_id}/events") as response,
    ):
        for line in response.iter_lines():
            if line:
                block.append(line)
                continue
            for _, kind, data in events_of("\n".join(block) + "\n\n"):
                if wanted(kind, data):
                    return data
            block = []
    raise AssertionError(f"the run's events ended without the event awaited: {block}")


def _remote_update(kind: str, data: dict[str, Any], *, reattached: bool) -> bool:
    return kind == "remote_update" and data["data"].get("reattached") is reattached


@dataclass
class Seen:
    """What the test saw: the run's record and events on the survivor, the remote task A started, the remote
    agent's runs (its tasks)."""

    record: dict[str, Any]
    events: list[tuple[int | None, str, dict[str, Any]]]
    task_id: str
    remote_runs: list[dict[str, Any]]


def _runs_active(url: str) -> float:
    """The replica's ``teamrun_runs_active`` gauge (runs it executes) for the team, from ``/metrics``."""
    scraped = httpx.get(url + "/metrics", headers=AUTH, timeout=60).text
    (line,) = [line for line in scraped.splitlines() if line.startswith('teamrun_runs_active{team="lead"}')]
    return float(line.rsplit(" ", 1)[1])


def _moved_while_remote_task_works(
    tmp_path: Path, postgres_server: str, fake_openai: FakeOpenAI, models: Models, stop_a: signal.Signals
) -> Seen:
    """The run starts on A; once its remote task works (held), A gets ``stop_a``; B reattaches, the test releases
    the remote's model, and the run ends on B. A SIGSTOPped A gets SIGCONT once B reattached, and the model is
    released only once A stopped executing the run (it learned it moved)."""
    store = new_database(postgres_server)
    remote_env = child_env(TEAMRUN_TEST_KEY="sk-test-remote")
    remote_env.pop("TEAMRUN_API_TOKENS", None)  # a loopback server without tokens
    remote_team = _remote_team(tmp_path, fake_openai.url)
    with serving(str(remote_team), env=remote_env, cwd=remote_team.parent) as remote:
        team = _team(tmp_path, fake_openai.url, remote.url)
        with replica(team, store) as a, replica(team, store) as b:
            with httpx.Client(base_url=a.url, headers=AUTH, timeout=60) as client:
                answer = client.post("/v1/runs", json={"team": "lead", "input": TASK})
                assert answer.status_code == 201, answer.text
                run_id = answer.json()["id"]
            on_a = _until_event(a.url, run_id, lambda k, d: _remote_update(k, d, reattached=False))
            wait_until(lambda: models.asked("held"), "the remote agent's model asked (and held)")
            assert on_a["data"]["state"] == "working", on_a
            os.kill(a.process.pid, stop_a)
            if stop_a != signal.SIGSTOP:
                assert a.process.wait(timeout=120) == (0 if stop_a == signal.SIGTERM else -signal.SIGKILL)

            on_b = _until_event(b.url, run_id, lambda k, d: _remote_update(k, d, reattached=True))
            assert on_b["data"]["task_id"] == on_a["data"]["task_id"], (on_a, on_b)  # the same remote task
            if stop_a == signal.SIGSTOP:
                os.kill(a.process.pid, signal.SIGCONT)
                wait_until(lambda: _runs_active(a.url) == 0, "the resumed replica no longer executing the run")
            models.release.set()
            with httpx.Client(base_url=b.url, headers=AUTH, timeout=60) as client:
                wait_until(
                    lambda: client.get(f"/v1/runs/{run_id}").json()["status"] != "running",
                    "the run over on the survivor",
                    where=lambda: client.get(f"/v1/runs/{run_id}").json(),
                )
                record = client.get(f"/v1/runs/{run_id}").json()
                events = events_of(client.get(f"/v1/runs/{run_id}/events").text)
            if stop_a == signal.SIGSTOP:
                assert a.stop() == 0
            assert b.stop() == 0
        with httpx.Client(base_url=remote.url, timeout=60) as client:
            remote_runs = client.get("/v1/runs").json()["data"]
        assert remote.stop() == 0
    return Seen(record, events, on_a["data"]["task_id"], remote_runs)


def _ended_done_on_the_same_remote_task(seen: Seen, models: Models, why: str) -> None:
    record, events = seen.record, seen.events
    assert record["status"] == "done", record
    assert record["final_text"] == f"lead reports: remote answer: {TASK}", record
    (move,) = [data for _, kind, data in events if kind == "run_moved"]
    assert move["data"]["why"] == why and move["data"]["from"] != move["data"]["to"], move
    updates = [data["data"] for _, kind, data in events if kind == "remote_update"]
    assert {update["task_id"] for update in updates} == {seen.task_id}, updates  # one task, reattached
    assert "canceled" not in [update["state"] for update in updates], updates
    assert updates[-1]["state"] == "completed" and updates[-1]["reattached"] is True, updates
    assert events[-1][1] == "result" and events[-1][2]["status"] == "done", events[-1]
    (delegation,) = record["result"]["delegations"]
    assert (delegation["agent"], delegation["status"]) == ("researcher", "ok"), delegation
    assert delegation["response"] == f"remote answer: {TASK}", delegation
    assert record["result"]["warnings"] == [], record["result"]["warnings"]  # (no "sent again")

    paid = models.calls()  # each finished call once: the lead's first, the remote's one
    assert paid == Counter({("lead", TASK, 1): 1, ("held", TASK, 1): 1, ("lead", TASK, 2): 1}), paid
    # one task at the remote agent (the run it served: its id is the task's), done: nothing was sent anew
    assert [(run["id"], run["status"]) for run in seen.remote_runs] == [(seen.task_id, "done")], seen.remote_runs


def test_a_killed_replicas_run_reattaches_to_its_remote_a2a_task_and_ends_done_on_the_survivor(
    tmp_path: Path, postgres_server: str, fake_openai: FakeOpenAI
) -> None:
    models = Models(fake_openai)
    seen = _moved_while_remote_task_works(tmp_path, postgres_server, fake_openai, models, signal.SIGKILL)
    _ended_done_on_the_same_remote_task(seen, models, "lease expired")


def test_a_run_handed_over_leaves_its_remote_a2a_task_working_for_the_next_replica(
    tmp_path: Path, postgres_server: str, fake_openai: FakeOpenAI
) -> None:
    """SIGTERM (a rolling restart): A hands the run over; the remote task is not cancelled on the way out (B
    picks it up, working) -- it was: A's run, stopped as handed over, sent ``CancelTask`` as a cancelled run does,
    and B found the task ``canceled``."""
    models = Models(fake_openai)
    seen = _moved_while_remote_task_works(tmp_path, postgres_server, fake_openai, models, signal.SIGTERM)
    _ended_done_on_the_same_remote_task(seen, models, "handover")


def test_a_paused_replica_that_resumes_leaves_the_remote_a2a_task_to_the_replica_that_took_its_run(
    tmp_path: Path, postgres_server: str, fake_openai: FakeOpenAI
) -> None:
    """SIGSTOP, B takes the run over and reattaches, SIGCONT: A learns the run moved and stops executing it
    without cancelling the remote task B follows (it did: its run, stopped as moved, sent ``CancelTask``)."""
    models = Models(fake_openai)
    seen = _moved_while_remote_task_works(tmp_path, postgres_server, fake_openai, models, signal.SIGSTOP)
    _ended_done_on_the_same_remote_task(seen, models, "lease expired")
