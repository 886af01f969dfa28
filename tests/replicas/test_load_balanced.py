"""Issue 46.1 and 46.4-5: two replicas on one PostgreSQL store behind HAProxy (round-robin, no stickiness).

Every request goes through the load balancer on a new connection, so each lands on either replica: runs are
started, followed over SSE (the stream broken off and resumed with ``Last-Event-ID``, most likely on the other
replica), answered (a person's question), approved and cancelled. Each run ends as it would on one server, and
the client sees each event id once, none missing.
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx

from tests.fakeserver import FakeOpenAI
from tests.pgserver import new_database
from tests.replicas.cluster import TOKEN, Provider, events_of, haproxy, replica, team_file
from tests.waiting import wait_until

AUTH = {"Authorization": f"Bearer {TOKEN}"}
FOLLOWED, ASKED, APPROVED, CANCELLED = 40, 20, 20, 20
"""100 runs, issue 46's figure."""
READERS = 10
"""Clients reading streams at once."""


def _client(url: str) -> httpx.Client:
    """A new connection per request: HAProxy balances each one."""
    return httpx.Client(base_url=url, headers=AUTH, timeout=60, limits=httpx.Limits(max_keepalive_connections=0))


def _status(client: httpx.Client, run_id: str) -> str:
    return str(client.get(f"/v1/runs/{run_id}").json().get("status"))


def _read(client: httpx.Client, run_id: str, last: int | None, stop: int | None = None) -> list[Any]:
    """The run's SSE messages after event ``last`` (all: ``None``), broken off after ``stop`` events."""
    headers = {"Last-Event-ID": str(last)} if last is not None else {}
    lines: list[str] = []
    with client.stream("GET", f"/v1/runs/{run_id}/events", headers=headers) as response:
        assert response.status_code == 200, response.read()
        count = 0
        for line in response.iter_lines():
            lines.append(line)
            count += line.startswith("id: ")
            if stop is not None and count >= stop and line == "":
                break
    return events_of("\n".join(lines) + "\n\n")


def _pending(client: httpx.Client, run_ids: list[str]) -> dict[str, dict[str, Any]]:
    items = client.get("/v1/pending").json()["data"]
    return {item["run_id"]: item for item in items if item["run_id"] in run_ids}


def test_runs_started_followed_answered_approved_and_cancelled_through_a_round_robin_balancer(
    tmp_path: Path, postgres_server: str, fake_openai: FakeOpenAI
) -> None:
    provider = Provider(fake_openai)
    provider.gate = threading.Event()
    team = team_file(tmp_path, fake_openai.url)
    store = new_database(postgres_server)
    with (
        replica(team, store) as a,
        replica(team, store) as b,
        haproxy(tmp_path, [a.url, b.url]) as url,
        _client(url) as client,
    ):
        started: dict[str, list[str]] = {}
        for kind, count in (("follow", FOLLOWED), ("ask", ASKED), ("approve", APPROVED), ("cancel", CANCELLED)):
            for i in range(count):
                answer = client.post("/v1/runs", json={"team": "steps", "input": f"{kind} {i}"})
                assert answer.status_code == 201, answer.text
                started.setdefault(kind, []).append(answer.json()["id"])
        followed = started["follow"]

        # followed: the first events while the runs wait on the provider, the rest after a reconnect
        tasks = [f"follow {i}" for i in range(FOLLOWED)]
        wait_until(lambda: provider.reached(tasks, 2), "every followed run's second call")
        with ThreadPoolExecutor(READERS) as pool:
            began = pool.map(lambda run_id: _read(client, run_id, None, stop=2), followed)
            first = dict(zip(followed, began, strict=True))
            provider.gate.set()
            read_on = pool.map(lambda run_id: _read(client, run_id, first[run_id][-1][0]), followed)
            rests = dict(zip(followed, read_on, strict=True))
        for run_id, seen in first.items():
            rest = rests[run_id]
            ids = [index for index, _, _ in seen + rest if index is not None]
            assert ids == list(range(len(ids))), ids  # each event once, none missing, across replicas
            assert rest[-1][1] == "result" and rest[-1][2]["status"] == "done", rest[-1]
            assert rest[-2][1] == "run_end"

        # answered and approved: each answer lands on either replica, which continues the run
        waiting = started["ask"] + started["approve"]
        wait_until(lambda: len(_pending(client, waiting)) == len(waiting), "every question and approval pending")
        for run_id, item in _pending(client, waiting).items():
            body = {"answer": "3"} if item["kind"] == "question" else {"approve": True}
            said = client.post(f"/v1/runs/{run_id}/pending/{item['id']}", json=body)
            assert said.status_code == 200, said.text

        # cancelled: the cancel lands on either replica; the one running it applies it
        cancelled = started["cancel"]
        wait_until(lambda: provider.reached([f"cancel {i}" for i in range(CANCELLED)], 1), "the cancelled runs' calls")
        for run_id in cancelled:
            answer = client.post(f"/v1/runs/{run_id}/cancel")
            assert answer.status_code == 202, answer.text

        for run_id in followed + waiting:
            wait_until(lambda run_id=run_id: _status(client, run_id) == "done", f"run {run_id} done")  # type: ignore[misc]
        for run_id in cancelled:
            wait_until(lambda run_id=run_id: _status(client, run_id) == "cancelled", f"run {run_id} cancelled")  # type: ignore[misc]
        finals = {client.get(f"/v1/runs/{run_id}").json()["final_text"] for run_id in waiting}
        assert finals == {f"done: ask {i}: 3" for i in range(ASKED)} | {
            f"done: approve {i}: deployed approve {i}" for i in range(APPROVED)
        }, finals
        assert a.stop() == 0 and b.stop() == 0
    paid = provider.calls()
    assert all(count == 1 for (task, call), count in paid.items() if not task.startswith("cancel")), paid
