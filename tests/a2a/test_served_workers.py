"""A2A tasks with ``teamrun serve --workers 2 --store``: a task started on one worker is read and cancelled
through the other (the call is forwarded to the worker that runs it), and after a restart the store
answers ``GetTask`` with each finished task and its artifact."""

from __future__ import annotations

import asyncio
import http.client
import json
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import pytest
from a2a.types import GetTaskRequest

from tests.a2a.served_agents import TOKEN, agent, served, state_name, text_of
from tests.a2a.test_served_agent import hanging_team
from tests.fakeserver import FakeOpenAI, Reply, hang, text
from tests.waiting import wait_until

pytestmark = pytest.mark.outofprocess("`teamrun serve --workers 2` processes")


def _lead(request: dict[str, Any]) -> Reply:
    asked = str(request["messages"][-1]["content"])
    return hang(600) if "wait for me" in asked else text(f"answered: {asked[-40:]}")


def _pinned(url: str, worker: str) -> http.client.HTTPConnection:
    """A keep-alive connection the kernel handed to ``worker`` (new connections until one lands there)."""
    address = urlparse(url)

    def landed() -> http.client.HTTPConnection | None:
        connection = http.client.HTTPConnection(address.hostname or "", address.port, timeout=120)
        connection.request("GET", "/healthz")
        response = connection.getresponse()
        response.read()
        if response.headers["x-teamrun-worker"] == worker:
            return connection
        connection.close()
        return None

    return wait_until(landed, f"a connection landing on worker {worker}")


def _rpc(connection: http.client.HTTPConnection, method: str, params: dict[str, Any]) -> tuple[Any, Any]:
    """One A2A v1.0 JSON-RPC call on ``connection``: its ``result`` (or ``error``), and the response headers."""
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
    headers = {"Authorization": f"Bearer {TOKEN}", "A2A-Version": "1.0", "Content-Type": "application/json"}
    connection.request("POST", "/a2a/slow", body=body, headers=headers)
    response = connection.getresponse()
    answer = json.loads(response.read())
    return answer.get("result", answer.get("error")), response.headers


def _send(text_: str, *, at_once: bool = False) -> dict[str, Any]:
    message = {"messageId": f"m-{time.monotonic_ns()}", "role": "ROLE_USER", "parts": [{"text": text_}]}
    return {"message": message, "configuration": {"returnImmediately": at_once}}


def test_tasks_across_two_workers_and_after_a_restart(tmp_path: Path, fake_openai: FakeOpenAI) -> None:
    fake_openai.handler("lead", _lead)
    team = str(hanging_team(tmp_path, fake_openai.url))
    store = f"sqlite:///{tmp_path / 'runs.db'}"
    with served(team, "--workers", "2", "--store", store) as server:
        w0, w1 = _pinned(server.url, "0"), _pinned(server.url, "1")
        first, _ = _rpc(w0, "SendMessage", _send("first question"))
        second, _ = _rpc(w1, "SendMessage", _send("second question"))
        done = {first["task"]["id"]: first["task"], second["task"]["id"]: second["task"]}
        assert [t["id"][:7] for t in done.values()] == ["run_w0_", "run_w1_"]
        assert {t["status"]["state"] for t in done.values()} == {"TASK_STATE_COMPLETED"}

        waiting, _ = _rpc(w0, "SendMessage", _send("wait for me", at_once=True))
        hung = waiting["task"]["id"]
        assert hung.startswith("run_w0_") and waiting["task"]["status"]["state"] == "TASK_STATE_WORKING"
        wait_until(
            lambda: any("wait for me" in json.dumps(r.request) for r in fake_openai.requests("lead")),
            "its model call at the provider (it hangs there now)",
        )
        cancelled, headers = _rpc(w1, "CancelTask", {"id": hung})  # through the other worker
        assert headers["x-teamrun-via"] == "1" and headers["x-teamrun-worker"] == "0"
        assert cancelled["status"]["state"] == "TASK_STATE_CANCELED"
        read, headers = _rpc(w0, "GetTask", {"id": second["task"]["id"]})  # w1's task, read through w0
        assert headers["x-teamrun-via"] == "0" and read["artifacts"] == second["task"]["artifacts"]

        async def read_all() -> dict[str, Any]:
            async with agent(server.url, "slow") as client:
                return {i: await client.get_task(GetTaskRequest(id=i)) for i in [*done, hung]}

        before = asyncio.run(read_all())
        for connection in (w0, w1):
            connection.close()
    assert {i: state_name(t.status.state) for i, t in before.items()} == {
        **dict.fromkeys(done, "COMPLETED"),
        hung: "CANCELED",
    }

    with served(team, "--store", store) as server:  # restarted, one process: the tasks come from the store
        after = asyncio.run(read_all())
    for task_id in done:
        assert state_name(after[task_id].status.state) == "COMPLETED"
        assert text_of(after[task_id].artifacts[0].parts) == text_of(before[task_id].artifacts[0].parts)
        assert text_of(after[task_id].artifacts[0].parts).startswith("answered: ")
        assert after[task_id].context_id == before[task_id].context_id
        assert text_of(after[task_id].history[0].parts) == text_of(before[task_id].history[0].parts)
    assert state_name(after[hung].status.state) == "CANCELED" and not after[hung].artifacts
