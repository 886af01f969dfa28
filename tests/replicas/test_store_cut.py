"""Issue 46 (attack a46c, item 2's last part): a replica cut off from the store holds its runs instead of going on
unjournaled.

Two `teamrun serve --lease 2` replicas on one PostgreSQL store; replica A reaches it through a relay the test cuts
(tests/tcp_cut.py: a partition between A and the database, which B still reaches). A's runs have finished their
first model call when the relay is cut and their second call is answered: its reply cannot be journaled, so
each run holds there. A's leases expire, B takes the runs over and finishes them from their journals; once the
relay is mended, A's held writes are refused and A stops the runs. Before, A went on unjournaled and finished
each run too: every third call was paid twice, once by each replica.
"""

from __future__ import annotations

import threading
from pathlib import Path

import httpx

from tests.fakeserver import FakeOpenAI
from tests.pgserver import new_database
from tests.replicas.cluster import TOKEN, Provider, replica, team_file
from tests.tcp_cut import tcp_cut
from tests.waiting import wait_until

AUTH = {"Authorization": f"Bearer {TOKEN}"}


def _statuses(client: httpx.Client, ids: list[str]) -> list[str]:
    return [str(client.get(f"/v1/runs/{run_id}").json().get("status")) for run_id in ids]


def test_a_replica_cut_off_from_the_store_holds_its_runs_and_pays_no_finished_call_twice(
    tmp_path: Path, postgres_server: str, fake_openai: FakeOpenAI
) -> None:
    provider = Provider(fake_openai)
    provider.gate = threading.Event()
    team = team_file(tmp_path, fake_openai.url)
    store = new_database(postgres_server)
    tasks = [f"cut {i}" for i in range(3)]
    with tcp_cut(store) as (relay, through), replica(team, through) as a, replica(team, store) as b:
        with httpx.Client(base_url=a.url, headers=AUTH, timeout=60) as client:
            ids = [client.post("/v1/runs", json={"team": "steps", "input": task}).json()["id"] for task in tasks]
        wait_until(lambda: provider.reached(tasks, 2), "every run's second call (its first one journaled)")
        relay.cut()
        provider.gate.set()  # A gets the second replies and cannot journal them
        with httpx.Client(base_url=b.url, headers=AUTH, timeout=60) as client:
            wait_until(
                lambda: _statuses(client, ids) == ["done"] * len(ids),
                "every run taken over and done on B",
                where=lambda: _statuses(client, ids),
            )
            relay.mend()
            finals = [client.get(f"/v1/runs/{run_id}").json()["final_text"] for run_id in ids]
        with httpx.Client(base_url=a.url, headers=AUTH, timeout=60) as client:
            wait_until(
                lambda: _statuses(client, ids) == ["done"] * len(ids),
                "A answering the store's record once it reaches the store again",
                where=lambda: _statuses(client, ids),
            )
        assert a.stop() == 0 and b.stop() == 0
    assert finals == [f"done: {task}" for task in tasks]
    paid = provider.calls()
    assert {task: paid[(task, 1)] for task in tasks} == dict.fromkeys(tasks, 1)  # journaled: never paid again
    assert {task: paid[(task, 3)] for task in tasks} == dict.fromkeys(tasks, 1)  # only B finished them
    said = a.stderr.splitlines()
    for run_id in ids:  # held at the write, then told it runs elsewhere (by a refused write or its heartbeat)
        assert any("journal_write_held" in line and f"run_id={run_id}" in line for line in said), a.stderr
        stopped = ("serve_writes_refused", "serve_run_moved_away")
        assert any(f"run={run_id}" in line and any(word in line for word in stopped) for line in said), a.stderr
    assert "serve_run_error" not in a.stderr
