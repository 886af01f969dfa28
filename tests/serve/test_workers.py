"""``teamrun serve --workers 2``: one port, two processes; a run's events, approvals and cancel reach it
whichever process a connection lands on."""

from __future__ import annotations

import contextlib
import http.client
import json
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

from teamrun.cli import main
from tests.cli_processes import Serving, child_env, serving
from tests.serve.conftest import REPO
from tests.serve.sse import sse_events
from tests.serve.test_approvals import stamp_team
from tests.waiting import wait_until


def _env() -> dict[str, str]:
    env = child_env()
    env.pop("TEAMRUN_API_TOKENS", None)
    return env


@contextlib.contextmanager
def served(team: Path, *more: str) -> Iterator[Serving]:
    """A ``teamrun serve`` process (``--model offline``) on ``team``, started by the shared helper; its cwd is the
    team's folder (the offline model's tool calls write their stamp files there)."""
    with serving(str(team), "--model", "offline", *more, env=_env(), cwd=team.parent) as server:
        yield server


def port(server: Serving) -> int:
    return int(server.url.rsplit(":", 1)[1])


def connection(server: Serving) -> tuple[http.client.HTTPConnection, str, str]:
    """A new keep-alive connection, and the worker (index, pid) that took it."""
    connection = http.client.HTTPConnection("127.0.0.1", port(server), timeout=60)
    connection.request("GET", "/healthz")
    response = connection.getresponse()
    response.read()
    return connection, response.headers["x-teamrun-worker"], response.headers["x-teamrun-worker-pid"]


def connection_to(server: Serving, worker: str) -> http.client.HTTPConnection:
    """A connection the kernel handed to ``worker`` (new connections until one lands there: a worker still
    starting takes none)."""

    def landed() -> http.client.HTTPConnection | None:
        one, at, _pid = connection(server)
        if at == worker:
            return one
        one.close()
        return None

    return wait_until(landed, f"a connection landing on worker {worker}", alive=server.process)


@pytest.fixture
def two_workers(tmp_path: Path) -> Iterator[Serving]:
    with served(stamp_team(tmp_path), "--workers", "2") as server:
        yield server


def call(
    connection: http.client.HTTPConnection, method: str, path: str, body: dict[str, Any] | None = None
) -> tuple[int, dict[str, str], Any]:
    connection.request(
        method, path, body=json.dumps(body) if body is not None else None, headers={"Content-Type": "application/json"}
    )
    response = connection.getresponse()
    return response.status, {k.lower(): v for k, v in response.headers.items()}, json.loads(response.read())


def events_until(connection: http.client.HTTPConnection, path: str, last: str) -> tuple[dict[str, str], Any]:
    """GET an SSE stream, read events up to the first named ``last``: (headers, events so far)."""
    connection.request("GET", path)
    response = connection.getresponse()
    headers = {k.lower(): v for k, v in response.headers.items()}
    assert response.status == 200, response.read()

    def lines() -> Iterator[str]:
        while True:
            raw = response.fp.readline()
            if not raw:
                return
            yield raw.decode().rstrip("\r\n")

    seen = []
    for name, data in sse_events(lines()):
        seen.append((name, data))
        if name == last:
            break
    return headers, seen


def test_a_run_is_reached_from_either_process_events_approvals_and_cancel(two_workers: Serving) -> None:
    served = two_workers
    pids = {}

    def both() -> bool:  # both processes take connections on the one port (once started)
        one, worker, pid = connection(served)
        one.close()
        pids[worker] = pid
        return len(pids) == 2

    wait_until(both, "connections landing on both workers", where=lambda: pids, alive=served.process)
    assert sorted(pids) == ["0", "1"]
    children = {str(p.pid) for p in psutil.Process(served.process.pid).children()}
    assert set(pids.values()) <= children and len(set(pids.values())) == 2

    # a run started on one process...
    status, headers, run = call(connection_to(served, "0"), "POST", "/v1/runs", {"team": "stamper", "input": "go"})
    assert status == 201 and run["id"].startswith("run_w0_") and headers["x-teamrun-worker"] == "0"
    # ...streams its events to a connection on the other one, approval request included
    events_on_1 = connection_to(served, "1")
    headers, seen = events_until(events_on_1, f"/v1/runs/{run['id']}/events", "approval_request")
    assert headers["x-teamrun-via"] == "1" and headers["x-teamrun-worker"] == "0"
    assert headers["x-teamrun-worker-pid"] == pids["0"]
    approval = seen[-1][1]["data"]
    # the approval, answered through the other process, reaches the run
    status, headers, answered = call(
        connection_to(served, "1"), "POST", f"/v1/runs/{run['id']}/approvals/{approval['id']}", {"approve": True}
    )
    assert status == 200 and answered["status"] == "approved" and headers["x-teamrun-via"] == "1"

    def ended() -> tuple[dict[str, str], Any] | None:
        _, headers, record = call(connection_to(served, "1"), "GET", f"/v1/runs/{run['id']}")
        return (headers, record) if record["status"] != "running" else None

    headers, record = wait_until(ended, "the approved run's end")
    assert record["status"] == "done" and record["approvals"][0]["status"] == "approved"
    assert headers["x-teamrun-worker"] == "0" and headers["x-teamrun-via"] == "1"

    # a run on process 1, cancelled through process 0 while it waits for its approval
    status, _, second = call(connection_to(served, "1"), "POST", "/v1/runs", {"team": "stamper", "input": "go"})
    assert second["id"].startswith("run_w1_")
    events_until(connection_to(served, "1"), f"/v1/runs/{second['id']}/events", "approval_request")
    status, headers, cancelled = call(connection_to(served, "0"), "POST", f"/v1/runs/{second['id']}/cancel")
    assert cancelled["id"] == second["id"]
    assert status == 202 and headers["x-teamrun-worker"] == "1" and headers["x-teamrun-via"] == "0"
    headers, seen = events_until(connection_to(served, "0"), f"/v1/runs/{second['id']}/events", "result")
    assert seen[-1][1]["status"] == "cancelled" and seen[-1][1]["cancel_reason"] == "cancelled by request"
    assert headers["x-teamrun-worker"] == "1"


def test_an_unknown_run_is_404_from_its_named_worker_or_where_it_lands(two_workers: Serving) -> None:
    status, headers, body = call(
        served_connection := connection_to(two_workers, "0"), "GET", "/v1/runs/run_w1_0123456789abcdef"
    )
    assert status == 404 and body["error"]["code"] == "run_not_found" and headers["x-teamrun-via"] == "0"
    served_connection.close()
    status, headers, body = call(connection_to(two_workers, "0"), "GET", "/v1/runs/run_w7_0123456789abcdef")
    assert status == 404 and headers["x-teamrun-worker"] == "0" and "x-teamrun-via" not in headers


def test_sigterm_stops_every_worker_and_exits_0(tmp_path: Path) -> None:
    with served(stamp_team(tmp_path), "--workers", "2") as server:
        workers = psutil.Process(server.process.pid).children()
        code = server.stop()
    assert code == 0 and "2 worker processes" in server.stderr
    _gone, alive = psutil.wait_procs(workers, timeout=10)  # the workers, and multiprocessing's resource tracker
    assert alive == [] and len(workers) >= 2


def test_workers_with_mcp_is_a_usage_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["serve", str(stamp_team(tmp_path)), "--mcp", "stdio", "--workers", "2"])
    assert code == 2 and "--workers serves HTTP" in capsys.readouterr().err


def test_an_idle_keep_alive_connection_is_still_served_after_6_seconds(tmp_path: Path) -> None:
    with served(stamp_team(tmp_path)) as server:
        kept = http.client.HTTPConnection("127.0.0.1", port(server), timeout=30)
        kept.request("GET", "/healthz")
        kept.getresponse().read()
        time.sleep(6)  # uvicorn closed idle connections after 5 s: a client reusing one then got a read error
        kept.request("GET", "/healthz")
        assert kept.getresponse().status == 200


def test_a_thread_continues_on_the_other_process_through_the_store(tmp_path: Path) -> None:
    with served(REPO / "teams" / "research-report.yaml", "--workers", "2", "--store", str(tmp_path / "t.db")) as server:
        answers = {}
        for worker, question in (("0", "Compare Rust and Go"), ("1", "Which one compiles faster?")):
            status, headers, reply = call(
                connection_to(server, worker),
                "POST",
                "/v1/chat/completions",
                {"model": "research-report", "messages": [{"role": "user", "content": question}], "user": "conv-1"},
            )
            assert status == 200 and headers["x-teamrun-worker"] == worker and "x-teamrun-via" not in headers
            answers[worker] = reply["choices"][0]["message"]["content"]
        assert "Earlier in this conversation" not in answers["0"]
        assert "Earlier in this conversation (1 turn(s)); it began with: Compare Rust and Go" in answers["1"]
        code = server.stop()
    assert code == 0


def test_workers_of_a_killed_server_stop_and_free_its_port(tmp_path: Path) -> None:
    """A SIGKILLed (or crashed) server cannot stop its workers: they see it gone and stop themselves, so the port
    is free for the next server."""
    with served(stamp_team(tmp_path), "--workers", "2") as server:
        children = psutil.Process(server.process.pid).children()  # the workers, and multiprocessing's resource tracker
        assert len(children) >= 2
        server.process.kill()
        server.process.communicate(timeout=60)
    _gone, alive = psutil.wait_procs(children, timeout=120)  # each looks every second, then stops gracefully
    assert alive == [], [(p.pid, p.cmdline()) for p in alive]
    with socket.socket() as sock:  # nobody listens on the port any more
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", port(server)))
        sock.listen()
