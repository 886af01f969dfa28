"""Issue 46.2: a replica that stops renewing loses its runs to another, which resumes each from its journal.

Two `teamrun serve --lease` replicas on one PostgreSQL store. Runs start on replica A; once every run has
finished its first model call and acted on it (its second call is held by the provider), A is SIGKILLed and
restarted at once on its port: once A's leases expire, replica B and the new A process (a new owner) take each run
over exactly once between them and finish it, without paying any finished call again. A SIGSTOPped replica's runs
move the same way, and on SIGCONT its writes for them are refused and it says so. A rolling restart of three
replicas behind HAProxy, one after the other while 50 clients send requests, fails no request and hands every run
over.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import re
import signal
import threading
from collections import Counter
from pathlib import Path

import httpx

from tests.cli_processes import Serving
from tests.fakeserver import FakeOpenAI
from tests.pgserver import new_database
from tests.replicas.cluster import TOKEN, Provider, events_of, haproxy, replica, replicas, team_file
from tests.waiting import wait_until

RUNS = 30
"""Runs in flight on the replica that is killed (issue 46's figure)."""
KILLED_LEASE_S = "15"
"""The ``--lease`` of the replicas in the SIGKILL test (teamrun's default): the killed one's restarted process is
up before its runs move (it starts in 3 to 9 s on 2 busy cores; later, it takes them all, B being paused)."""
ROLLING_RUNS = 10
"""Runs in flight during the rolling restart."""
REPLICAS = 3
"""Replicas behind HAProxy in the rolling restart (issue 46's rolling deploy of three replicas)."""
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


def _port(server: Serving) -> int:
    return int(server.url.rsplit(":", 1)[1])


def _taken(*servers: Serving, why: bool = False) -> list[tuple[str, str]]:
    """The runs the replicas' logs say they took over (``serve_run_taken_over``), each with the owner that took it
    (``why``: with why it moved, ``handover`` or ``lease``)."""
    found = []
    for server in servers:
        for line in server.stderr.splitlines():
            if "serve_run_taken_over" in line:
                fields = dict(re.findall(r"(\w+)=(\S+)", line))
                found.append((fields["run"], fields["why" if why else "to"]))
    return found


def _all_done(client: httpx.Client, ids: list[str]) -> bool:
    return all(client.get(f"/v1/runs/{run_id}").json().get("status") == "done" for run_id in ids)


def test_a_killed_replicas_runs_end_done_on_the_survivor_without_paying_a_finished_call_twice(
    tmp_path: Path, postgres_server: str, fake_openai: FakeOpenAI
) -> None:
    """A is SIGKILLed with 30 runs in flight and restarted at once on its port, a new process (a new lease owner)
    while the dead one's leases still hold: once they expire, the new process and B take the runs between them,
    each run exactly once, and every run ends ``done`` without a finished call paid twice."""
    provider = Provider(fake_openai)
    provider.gate = threading.Event()
    team = team_file(tmp_path, fake_openai.url)
    store = new_database(postgres_server)
    tasks = [f"task {i}" for i in range(RUNS)]
    with contextlib.ExitStack() as stack:
        a, b = stack.enter_context(replicas(team, store, 2, lease=KILLED_LEASE_S))
        with httpx.Client(base_url=a.url, headers=AUTH, timeout=60) as client:
            ids = _start(client, tasks)
        wait_until(lambda: provider.reached(tasks, 2), "every run's second call (its first one acted on)")
        os.kill(b.process.pid, signal.SIGSTOP)  # B (idle: it holds no lease) takes nothing until A is back
        try:
            os.kill(a.process.pid, signal.SIGKILL)
            a.process.wait(timeout=60)
            # at once, on its port: a new process (a new lease owner) while the dead one's leases still hold
            again = stack.enter_context(replica(team, store, port=_port(a), lease=KILLED_LEASE_S))
        finally:
            os.kill(b.process.pid, signal.SIGCONT)
        provider.gate.set()
        with httpx.Client(base_url=again.url, headers=AUTH, timeout=60) as client:
            wait_until(lambda: _all_done(client, ids), "every run done on the new A process and B")
            timelines = {run_id: events_of(client.get(f"/v1/runs/{run_id}/events").text) for run_id in ids}
        paid = provider.calls()
        assert again.stop() == 0 and b.stop() == 0
    assert provider.calls() == paid  # nothing was executed again once the runs were done
    assert {task: paid[(task, 1)] for task in tasks} == dict.fromkeys(tasks, 1)  # finished: never paid again
    assert {task: paid[(task, 3)] for task in tasks} == dict.fromkeys(tasks, 1)
    moves = {
        run_id: [data["data"] for _, kind, data in events if kind == "run_moved"]
        for run_id, events in timelines.items()
    }
    assert {run_id: len(found) for run_id, found in moves.items()} == dict.fromkeys(ids, 1), moves  # once each
    taken = _taken(b, again)
    assert sorted(run_id for run_id, _ in taken) == sorted(ids), taken  # each run by one replica, once
    (killed,) = {move["from"] for (move,) in moves.values()}  # the dead process's
    for run_id, (move,) in moves.items():
        assert move["why"] == "lease expired" and move["to"] == dict(taken)[run_id] != killed, move
        assert timelines[run_id][-1][1] == "result" and timelines[run_id][-1][2]["status"] == "done", run_id


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
        olds = stack.enter_context(replicas(team, store, REPLICAS))
        url = stack.enter_context(haproxy(tmp_path, [server.url for server in olds]))
        stack.callback(stop.set)
        load = [threading.Thread(target=clients, args=(url,), daemon=True) for _ in range(CLIENTS)]
        for thread in load:
            thread.start()
        tasks = [f"rolling {i}" for i in range(ROLLING_RUNS)]
        wait_until(lambda: len(ids) == ROLLING_RUNS and provider.reached(tasks, 2), "every run's second call")
        new = []
        for old in olds:  # one replica after the other, as a deploy does, the runs still in flight
            assert old.stop() == 0
            new.append(stack.enter_context(replica(team, store, port=_port(old))))  # back on its port (ready)
        provider.gate.set()
        with httpx.Client(base_url=url, headers=AUTH, timeout=60) as client:
            wait_until(lambda: _all_done(client, ids), "every run done after the restart")
        stop.set()
        for thread in load:
            thread.join(timeout=120)
        for replaced in new:
            assert replaced.stop() == 0
    logs = [server.stderr for server in (*olds, *new)]  # read as each one's context ended
    assert failures == []
    # each old replica handed its runs over as it stopped (round-robin started 3 or 4 of the 10 on each)
    assert [server.stderr.count("serve_runs_handed_over") for server in olds] == [1] * REPLICAS, logs
    taken = [run_id for run_id, why in _taken(*olds, *new, why=True) if why == "handover"]
    assert set(taken) == set(ids), logs  # every run moved by a handover (the last one to a new replica)
    given = [line for log in logs for line in log.splitlines() if "serve_runs_handed_over" in line]
    handovers = {run_id: sum(line.count(run_id) for line in given) for run_id in ids}
    counted = Counter(taken)
    twice = {run_id: (counted[run_id], times) for run_id, times in handovers.items() if counted[run_id] != times}
    assert twice == {}, logs  # each handover of a run taken by one replica, once: (takes, handovers) of any other
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
