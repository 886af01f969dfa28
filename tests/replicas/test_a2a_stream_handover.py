"""Issue 46.3 for A2A: SIGTERM on the replica a client follows a task on (``SubscribeToTask``) ends the stream at
once, after whole events and without a final status; the client subscribes again to another replica and follows
the task, handed over, to its end. Between the handover and the takeover the task was answered "over
(interrupted)" there (A2A's view of a stored run did not ask the lease, as the runs API does): the client could
not follow it any more."""

from __future__ import annotations

import asyncio
import signal
import threading
from pathlib import Path

import pytest

from tests.fakeserver import FakeOpenAI
from tests.pgserver import new_database
from tests.replicas import cluster
from tests.replicas.cluster import Provider, replica, team_file
from tests.waiting import wait_until


def test_a_subscription_on_a_stopping_replica_ends_cleanly_and_goes_on_on_another(
    tmp_path: Path, postgres_server: str, fake_openai: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    from a2a.types import SubscribeToTaskRequest

    from tests.a2a import served_agents
    from tests.a2a.served_agents import agent, collect, message, state_name, states

    monkeypatch.setattr(served_agents, "TOKEN", cluster.TOKEN)  # the replicas' token
    provider = Provider(fake_openai)
    provider.gate = threading.Event()
    team = team_file(tmp_path, fake_openai.url)
    store = new_database(postgres_server)
    with replica(team, store) as a, replica(team, store) as b:

        async def scenario() -> tuple[list[str], list[str]]:
            async with agent(a.url, "steps", streaming=False, polling=True) as client:
                [started] = await collect(client, message("followed"))
            task_id = started.task.id
            await asyncio.to_thread(wait_until, lambda: provider.reached(["followed"], 2), "the task's second call")
            async with agent(a.url, "steps") as client:
                stream = client.subscribe(SubscribeToTaskRequest(id=task_id))
                first = await anext(stream)
                assert state_name(first.task.status.state) == "WORKING"
                a.process.send_signal(signal.SIGTERM)
                on_a = ["WORKING", *states([event async for event in stream])]  # ends: no error, no last status
            assert await asyncio.to_thread(a.process.wait, 120) == 0
            async with agent(b.url, "steps") as client:
                # The gate still holds the task's second call, asked again by B once it takes the task over: the task
                # cannot end before this subscription is made (it was a race B could win on a loaded machine: the
                # subscription then found the task "over (done)").
                stream = client.subscribe(SubscribeToTaskRequest(id=task_id))
                first = await anext(stream)
                provider.gate.set()
                on_b = states([first, *[event async for event in stream]])
            return on_a, on_b

        on_a, on_b = asyncio.run(scenario())
        assert set(on_a) == {"WORKING"}, on_a  # no CANCELED, COMPLETED...: the task was handed over, not ended
        assert on_b[0] == "WORKING" and on_b[-1] == "COMPLETED", on_b
        assert b.stop() == 0
    paid = provider.calls()
    assert paid[("followed", 1)] == 1  # its finished call was not paid again by the replica that took it
