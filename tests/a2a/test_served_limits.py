"""`--max-concurrent-runs` holds for A2A tasks that continue: an answer that would continue a waiting run in a
server with no free run slot is refused like a new task (A2A: -32603 too_many_runs; the runs API's
`POST /v1/runs/{id}/pending/{item}`: 429), nothing recorded; once a slot frees, the same answer continues it."""

from __future__ import annotations

import asyncio
from pathlib import Path

import httpx
import pytest
from a2a.types import CancelTaskRequest, InternalError

from tests.a2a.served_agents import AUTH, agent, collect, message, served, state_name
from tests.a2a.test_served_agent import hanging_team
from tests.fakeserver import FakeOpenAI, hang, text
from tests.waiting import wait_until_async

pytestmark = pytest.mark.outofprocess("a `teamrun serve` process")


def test_an_answer_that_would_continue_a_task_past_the_run_limit_is_refused(
    tmp_path: Path, fake_openai: FakeOpenAI
) -> None:
    from tests.serve.test_approvals import stamp_team

    stamper = stamp_team(tmp_path)
    stamper.write_text(stamper.read_text(encoding="utf-8") + "defaults: {model: offline}\n", encoding="utf-8")
    fake_openai.script("lead", [hang(600), text("never needed")])
    store = f"sqlite:///{tmp_path / 'runs.db'}"
    args = (str(stamper), str(hanging_team(tmp_path, fake_openai.url)), "--store", store)
    with served(*args, "--max-concurrent-runs", "1", cwd=tmp_path) as server:

        async def scenario() -> None:
            async with agent(server.url, "stamper", streaming=False) as stamp:
                [sent] = await collect(stamp, message("stamp it"))
                waiting = sent.task
                assert state_name(waiting.status.state) == "INPUT_REQUIRED"  # it holds no slot now
            async with agent(server.url, "slow", streaming=False, polling=True) as slow:
                [busy] = await collect(slow, message("take your time"))  # takes the one slot
                await wait_until_async(lambda: fake_openai.requests("lead"), "the slot's run at the provider")
                async with agent(server.url, "stamper", streaming=False) as stamp:
                    with pytest.raises(InternalError, match="run slots are in use"):
                        await collect(stamp, message("deny", task_id=waiting.id))
                [item] = httpx.get(f"{server.url}/v1/pending", headers=AUTH).json()["data"]  # nothing recorded
                assert item["run_id"] == waiting.id and item["status"] == "pending"
                rest = httpx.post(
                    f"{server.url}/v1/runs/{waiting.id}/pending/{item['id']}", headers=AUTH, json={"approve": False}
                )
                assert rest.status_code == 429, rest.text
                assert rest.json()["error"]["code"] == "too_many_runs" and rest.headers["retry-after"]
                ready = httpx.get(f"{server.url}/readyz").json()
                assert ready["active_runs"] == 1, ready
                assert httpx.get(f"{server.url}/v1/pending", headers=AUTH).json()["data"] == [item]
                await slow.cancel_task(CancelTaskRequest(id=busy.task.id))  # the slot frees
            async with agent(server.url, "stamper", streaming=False) as stamp:
                [after] = await collect(stamp, message("deny", task_id=waiting.id))
                assert state_name(after.task.status.state) == "COMPLETED", after.task.status

        asyncio.run(scenario())
