"""Issue 46.2: a replica that stops renewing loses its runs to another, which resumes each from its journal.

Two `teamrun serve --lease 2` replicas on one PostgreSQL store. Runs start on replica A; once every run has
finished its first model call and acted on it (its second call is held by the provider), A is SIGKILLed: replica
B takes each run over when its lease expires and finishes it, without paying any finished call again; a restarted
A executes none of them again. A SIGSTOPped replica's runs move the same way, and on SIGCONT its writes for them
are refused and it says so.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import signal
import threading
from pathlib import Path

import httpx

from tests.fakeserver import FakeOpenAI
from tests.pgserver import new_database
from tests.replicas.cluster import TOKEN, Provider, events_of, haproxy, replica, team_file
from tests.waiting import wait_until

RUNS = 30
"""Runs in flight on the replica that is killed (issue 46's figure)."""
ROLLING_RUNS = 10
"""Runs in flight during the rolling restart."""
CLIENTS = 50
"""Clients sending requests all along the rolling restart (issue 46's figure)."""
AUTH = {"Authorization": f"Bearer {TOKEN}"}


def _start(client: httpx.Client, tasks: list[str]) -> list[str]:
    ids = []
    for task in tasks:
        answer = client.post("/v1/runs", json={"team": "steps", "input": task})
        assert answer.status_code == 201, answer.text
        ids.append(answer.json()["id"])
    return ids


def _all_done(client: httpx.Client, ids: list[str]) -> bool:
    return all(client.get(f"/v1/runs/{run_id}").json().get("status") == "done" for run_id in ids)


def test_a_killed_replicas_runs_end_done_on_the_survivor_without_paying_a_finished_call_twice(
    tmp_path: Path, postgres_server: str, fake_openai: FakeOpenAI
) -> None:
    provider = Provider(fake_openai)
    provider.gate = threading.Event()
    team = team_file(tmp_path, fake_openai.url)
    store = new_database(postgres_server)
    tasks = [f"task {i}" for i in range(RUNS)]
    with replica(team, store) as a, replica(team, store) as b:
        with httpx.Client(base_url=a.url, headers=AUTH, timeout=60) as client:
            ids = _start(client, tasks)
        wait_until(lambda: provider.reached(tasks, 2), "every run's second call (its first one acted on)")
        os.kill(a.process.pid, signal.SIGKILL)
        a.process.wait(timeout=60)
        provider.gate.set()
        with httpx.Client(base_url=b.url, headers=AUTH, timeout=60) as client:
            wait_until(lambda: _all_done(client, ids), "every run done on the survivor")
            moved = events_of(client.get(f"/v1/runs/{ids[0]}/events").text)
        paid = provider.calls()
        assert {task: paid[(task, 1)] for task in tasks} == dict.fromkeys(tasks, 1)  # finished: never paid again
        assert {task: paid[(task, 3)] for task in tasks} == dict.fromkeys(tasks, 1)
        (move,) = [data for _, kind, data in moved if kind == "run_moved"]
        assert move["data"]["why"] == "lease expired" and move["data"]["from"] != move["data"]["to"]
        assert moved[-1][1] == "result" and moved[-1][2]["status"] == "done"

        with replica(team, store) as again, httpx.Client(base_url=again.url, headers=AUTH, timeout=60) as client:
            assert _all_done(client, ids)  # the restarted replica finds them over
            assert again.stop() == 0
        assert provider.calls() == paid  # and executed none of them again
        assert "serve_run_taken_over" not in again.stderr
        assert b.stop() == 0


def test_a_paused_replicas_runs_move_and_its_writes_are_refused_when_it_resumes(
    tmp_path: Path, postgres_server: str, fake_openai: FakeOpenAI
) -> None:
    provider = Provider(fake_openai)
    provider.gate = threading.Event()
    team = team_file(tmp_path, fake_openai.url)
    store = new_database(postgres_server)
    tasks = [f"paused {i}" for i in range(3)]
    with replica(team, store) as a, replica(team, store) as b:
        with httpx.Client(base_url=a.url, headers=AUTH, timeout=60) as client:
            ids = _start(client, tasks)
        wait_until(lambda: provider.reached(tasks, 2), "every run's second call")
        os.kill(a.process.pid, signal.SIGSTOP)  # partitioned: alive, silent
        try:
            provider.gate.set()  # its replies wait in A's sockets; B asks again once it took the runs
            with httpx.Client(base_url=b.url, headers=AUTH, timeout=60) as client:
                wait_until(lambda: _all_done(client, ids), "every run done on the other replica")
        finally:
            os.kill(a.process.pid, signal.SIGCONT)
        with httpx.Client(base_url=a.url, headers=AUTH, timeout=60) as client:
            wait_until(
                lambda: _all_done(client, ids),
                "the resumed replica answering the store's record",
                where=lambda: [client.get(f"/v1/runs/{run_id}").json() for run_id in ids],
            )
        assert a.stop() == 0 and b.stop() == 0
    refused = [line for line in a.stderr.splitlines() if "serve_writes_refused" in line]
    assert len(refused) == len(ids), a.stderr  # said once per run
    for run_id in ids:
        (said,) = [line for line in refused if f"run={run_id}" in line]
        assert "no longer owns it (its generation 1 is stale" in said and "stops executing the run" in said
    assert "serve_run_error" not in a.stderr
    paid = provider.calls()
    assert {task: paid[(task, 1)] for task in tasks} == dict.fromkeys(tasks, 1)
    assert {task: paid[(task, 3)] for task in tasks} == dict.fromkeys(tasks, 1)  # only B finished them


def test_a_rolling_restart_hands_the_runs_over_and_fails_no_request(
    tmp_path: Path, postgres_server: str, fake_openai: FakeOpenAI
) -> None:
    provider = Provider(fake_openai)
    provider.gate = threading.Event()
    team = team_file(tmp_path, fake_openai.url)
    store = new_database(postgres_server)
    failures: list[str] = []
    ids: list[str] = []
    stop = threading.Event()
    named = itertools.count()
    naming = threading.Lock()

    def next_task() -> str | None:
        with naming:
            number = next(named)
        return f"rolling {number}" if number < ROLLING_RUNS else None

    def clients(url: str) -> None:
        """Requests all along the restart: new runs, and reads of every run so far, each on a new connection."""
        limits = httpx.Limits(max_keepalive_connections=0)
        with httpx.Client(base_url=url, headers=AUTH, timeout=60, limits=limits) as client:
            while not stop.is_set():
                try:
                    task = next_task()
                    if task is not None:
                        answer = client.post("/v1/runs", json={"team": "steps", "input": task})
                        if answer.status_code != 201:
                            failures.append(f"POST {answer.status_code} {answer.text}")
                        else:
                            ids.append(answer.json()["id"])
                    for run_id in list(ids):
                        got = client.get(f"/v1/runs/{run_id}")
                        if got.status_code != 200:
                            failures.append(f"GET {got.status_code} {got.text}")
                except httpx.HTTPError as exc:
                    failures.append(f"{type(exc).__name__}: {exc}")

    with contextlib.ExitStack() as stack:
        a = stack.enter_context(replica(team, store))
        b = stack.enter_context(replica(team, store))
        url = stack.enter_context(haproxy(tmp_path, [a.url, b.url]))
        stack.callback(stop.set)
        load = [threading.Thread(target=clients, args=(url,), daemon=True) for _ in range(CLIENTS)]
        for thread in load:
            thread.start()
        tasks = [f"rolling {i}" for i in range(ROLLING_RUNS)]
        wait_until(lambda: len(ids) == ROLLING_RUNS and provider.reached(tasks, 2), "every run's second call")
        new = []
        for old in (a, b):  # one replica after the other, as a deploy does, its runs still in flight
            assert old.stop() == 0
            new.append(stack.enter_context(replica(team, store, port=int(old.url.rsplit(":", 1)[1]))))
        provider.gate.set()
        with httpx.Client(base_url=url, headers=AUTH, timeout=60) as client:
            wait_until(lambda: _all_done(client, ids), "every run done after the restart")
        stop.set()
        for thread in load:
            thread.join(timeout=120)
        for replaced in new:
            assert replaced.stop() == 0
    logs = [server.stderr for server in (a, b, *new)]  # read as each one's context ended
    assert failures == []
    assert sum(log.count("serve_runs_handed_over") for log in logs) == 2, logs  # each old replica handed over
    assert sum(log.count("why=handover") for log in logs) >= ROLLING_RUNS, logs
    assert failures == []
    paid = provider.calls()
    assert {task: paid[(task, 1)] for task in tasks} == dict.fromkeys(tasks, 1)
    assert {task: paid[(task, 3)] for task in tasks} == dict.fromkeys(tasks, 1)


def test_a_stream_on_a_stopping_replica_ends_cleanly_and_reads_on_from_another(
    tmp_path: Path, postgres_server: str, fake_openai: FakeOpenAI
) -> None:
    """SIGTERM on the replica a client follows a run on: its stream ends at once, at a message's end and without
    a result (the run is handed over); reconnected to another replica with ``Last-Event-ID``, the client reads on
    and sees every event once, to the run's result."""
    provider = Provider(fake_openai)
    provider.gate = threading.Event()
    team = team_file(tmp_path, fake_openai.url)
    store = new_database(postgres_server)
    with replica(team, store) as a, replica(team, store) as b:
        with httpx.Client(base_url=a.url, headers=AUTH, timeout=60) as client:
            [run_id] = _start(client, ["streamed"])
        wait_until(lambda: provider.reached(["streamed"], 2), "the run's second call")
        lines: list[str] = []
        failed: list[BaseException] = []

        def follow() -> None:
            try:
                with (
                    httpx.Client(base_url=a.url, headers=AUTH, timeout=120) as client,
                    client.stream("GET", f"/v1/runs/{run_id}/events") as response,
                ):
                    lines.extend(response.iter_lines())  # iter_lines: whole lines, each as it comes
            except httpx.HTTPError as exc:  # cut off mid-body (a chunked body without its end)
                failed.append(exc)

        reader = threading.Thread(target=follow)
        reader.start()
        wait_until(lambda: any(line.startswith("id: ") for line in list(lines)), "the first events read on A")
        a.process.send_signal(signal.SIGTERM)
        reader.join(timeout=300)
        assert failed == [] and not reader.is_alive()
        first = events_of("\n".join(lines) + "\n\n")
        assert lines[-1] == "" and first and all(kind != "result" for _, kind, _ in first), lines[-5:]
        assert a.process.wait(timeout=120) == 0
        provider.gate.set()
        with httpx.Client(base_url=b.url, headers=AUTH, timeout=120) as client:
            headers = {"Last-Event-ID": str(first[-1][0])}
            rest = events_of(client.get(f"/v1/runs/{run_id}/events", headers=headers).text)
        ids = [index for index, _, _ in first + rest if index is not None]
        assert ids == list(range(len(ids))), ids  # each event once, none missing, across the two replicas
        assert rest[-1][1] == "result" and rest[-1][2]["status"] == "done", rest[-1]
        assert "run_moved" in [kind for _, kind, _ in rest]
        assert b.stop() == 0
