"""Issue 35, part 2: every team `teamrun serve` serves is an A2A agent, driven by a2a-sdk's own client.

The card at the well-known path, a message sent and one streamed (working → completed, the answer as
the artifact), the task read back, the same run seen by the runs API (task id = run id), a task
cancelled while its model hangs, and a question of a person answered as an ``input-required`` task.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import httpx
import pytest
from a2a.client import A2ACardResolver
from a2a.types import CancelTaskRequest, GetTaskRequest, InvalidParamsError, TaskNotCancelableError

from tests.a2a.served_agents import AUTH, TOKEN, agent, collect, message, served, state_name, states, text_of
from tests.fakeserver import FakeOpenAI, hang, text
from tests.serve.conftest import REPO
from tests.waiting import wait_until_async

pytestmark = pytest.mark.outofprocess("`teamrun serve` processes")

RESEARCH = REPO / "teams" / "research-report.yaml"
SIGNOFF = REPO / "teams" / "launch-signoff.yaml"


def test_a_served_team_is_an_agent_the_sdk_client_reads_sends_to_streams_and_reads_back() -> None:
    with served(str(RESEARCH), "--model", "offline") as server:

        async def scenario() -> None:
            async with httpx.AsyncClient(timeout=120) as http:
                card = await A2ACardResolver(http, f"{server.url}/a2a/research-report").get_agent_card()
                unknown = await http.get(f"{server.url}/a2a/nope/.well-known/agent-card.json")
                no_token = await http.post(
                    f"{server.url}/a2a/research-report",
                    json={"jsonrpc": "2.0", "id": 7, "method": "GetTask", "params": {"id": "x"}},
                )
            assert card.name == "research-report"
            assert card.description.startswith("Researches several subjects in parallel")
            assert [s.id for s in card.skills] == ["research-report"]
            assert {i.protocol_version for i in card.supported_interfaces} == {"1.0", "0.3"}
            assert {i.url for i in card.supported_interfaces} == {f"{server.url}/a2a/research-report"}
            assert card.capabilities.streaming
            assert card.security_schemes["bearer"].http_auth_security_scheme.scheme == "bearer"
            assert [list(r.schemes) for r in card.security_requirements] == [["bearer"]]
            assert unknown.status_code == 404 and "research-report" in unknown.json()["error"]["message"]
            assert no_token.status_code == 401 and no_token.headers["www-authenticate"] == "Bearer"
            assert no_token.json()["error"]["data"] == {"reason": "UNAUTHENTICATED"}

            async with agent(server.url, "research-report", streaming=False) as client:  # message/send: waits
                [sent] = await collect(client, message("Compare Rust and Go"))
            task = sent.task
            assert state_name(task.status.state) == "COMPLETED"
            [artifact] = task.artifacts
            answer = text_of(artifact.parts)
            assert "Compare Rust and Go" in answer
            assert text_of(task.history[0].parts) == "Compare Rust and Go"
            run = httpx.get(f"{server.url}/v1/runs/{task.id}", headers=AUTH).json()  # the task is the run
            assert run["status"] == "done" and run["final_text"] == answer and run["team"] == "research-report"

            async with agent(server.url, "research-report") as client:  # message/stream: SSE
                events = await collect(client, message("Compare Python and Ruby"))
                seen = states(events)
                assert seen[0] in ("SUBMITTED", "WORKING") and seen[-1] == "COMPLETED"
                assert set(seen[:-1]) <= {"SUBMITTED", "WORKING"} and len(seen) >= 3  # progress: delegations
                progress = [
                    text_of(e.status_update.status.message.parts)
                    for e in events
                    if e.WhichOneof("payload") == "status_update" and e.status_update.status.HasField("message")
                ]
                assert any("asked researcher" in line for line in progress), progress
                kinds = [e.WhichOneof("payload") for e in events]
                assert kinds[0] == "task" and kinds[-2:] == ["artifact_update", "status_update"]
                streamed = events[-2].artifact_update.artifact
                task_id = events[0].task.id
                read = await client.get_task(GetTaskRequest(id=task_id))
                assert state_name(read.status.state) == "COMPLETED"
                assert text_of(read.artifacts[0].parts) == text_of(streamed.parts)
                assert "Compare Python and Ruby" in text_of(streamed.parts)
                with pytest.raises(TaskNotCancelableError, match="already over"):
                    await client.cancel_task(CancelTaskRequest(id=task_id))
            events_seen = httpx.get(f"{server.url}/v1/runs/{task_id}/events", headers=AUTH, timeout=60).text
            assert "event: run_end" in events_seen  # the runs API follows the task's run

        asyncio.run(scenario())


def hanging_team(tmp_path: Path, url: str) -> Path:
    path = tmp_path / "slow.yaml"
    path.write_text(
        "version: 1\nname: slow\ndescription: Thinks for a long time.\nsupervisor: lead\n"
        f"defaults: {{api_base: '{url}', api_key_env: TEAMRUN_TEST_KEY, num_retries: 0}}\n"
        "agents:\n  lead: {model: openai/lead, instructions: Answer.}\n",
        encoding="utf-8",
    )
    return path


def test_cancelling_a_task_cancels_its_run(tmp_path: Path, fake_openai: FakeOpenAI) -> None:
    fake_openai.script("lead", [hang(600), text("never needed")])
    with served(str(hanging_team(tmp_path, fake_openai.url))) as server:

        async def scenario() -> None:
            async with agent(server.url, "slow", streaming=False, polling=True) as client:
                [sent] = await collect(client, message("take your time"))  # polling: answered at once
                task = sent.task
                assert state_name(task.status.state) == "WORKING"
                await wait_until_async(
                    lambda: fake_openai.requests("lead"), "the model call at the provider (it hangs)"
                )
                cancelled = await client.cancel_task(CancelTaskRequest(id=task.id))
                assert state_name(cancelled.status.state) == "CANCELED"
                assert "A2A CancelTask" in text_of(cancelled.status.message.parts)
                read = await client.get_task(GetTaskRequest(id=task.id))
                assert state_name(read.status.state) == "CANCELED" and not read.artifacts
            run = httpx.get(f"{server.url}/v1/runs/{task.id}", headers=AUTH).json()
            assert run["status"] == "cancelled" and "A2A CancelTask" in run["cancel_reason"]

        asyncio.run(scenario())
    assert len(fake_openai.requests("lead")) == 1


def test_a_question_for_a_person_is_input_required_and_the_next_message_answers_it(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'runs.db'}"
    with served(str(SIGNOFF), "--model", "offline", "--store", store) as server:

        async def scenario() -> None:
            async with agent(server.url, "launch-signoff") as client:
                events = await collect(client, message("Launch Falcon", context_id="falcon"))
                assert states(events)[-1] == "INPUT_REQUIRED"
                last = events[-1].status_update
                task_id, asked = last.task_id, text_of(last.status.message.parts)
                assert last.context_id == "falcon"
                assert "q1" in asked and "eu-west-1 | us-east-1 | ap-south-1" in asked, asked
                pending = httpx.get(f"{server.url}/v1/pending", headers=AUTH).json()["data"]
                assert sorted(i["id"] for i in pending) == ["q1", "q2", "q3"]  # the same items as the runs API's
                items = {i["agent"]: i["id"] for i in pending}

                with pytest.raises(InvalidParamsError, match="one of: eu-west-1"):  # refused, nothing recorded
                    await collect(client, message("mars-1", task_id=task_id, metadata={"item": items["infra"]}))
                answers = {"infra": "eu-west-1", "legal": "approved", "comms": "2027-03-01"}
                for who in ("infra", "legal", "comms"):
                    events = await collect(
                        client, message(answers[who], task_id=task_id, metadata={"item": items[who]})
                    )
                    assert {e.WhichOneof("payload") for e in events} <= {"task", "status_update", "artifact_update"}
                done = states(events)[-1]
                assert done == "COMPLETED", states(events)
                answer = text_of(events[-2].artifact_update.artifact.parts)
                read = await client.get_task(GetTaskRequest(id=task_id))
                assert state_name(read.status.state) == "COMPLETED" and read.context_id == "falcon"
                assert text_of(read.artifacts[0].parts) == answer
            assert httpx.get(f"{server.url}/v1/pending", headers=AUTH).json()["data"] == []
            run = httpx.get(f"{server.url}/v1/runs/{task_id}", headers=AUTH).json()
            assert run["status"] == "done" and run["final_text"] == answer and run["thread"] == "falcon"

        asyncio.run(scenario())
        said = {
            "role": "user",
            "messageId": "v03",
            "kind": "message",
            "parts": [{"kind": "text", "text": "Launch Orca"}],
        }
        v03 = {"jsonrpc": "2.0", "id": 3, "method": "message/stream", "params": {"message": said}}
        stream = httpx.post(f"{server.url}/a2a/launch-signoff", json=v03, headers=AUTH, timeout=300)
        *_, last = [json.loads(line[5:]) for line in stream.text.splitlines() if line.startswith("data:")]
        assert last["result"]["kind"] == "status-update" and last["result"]["status"]["state"] == "input-required"
        assert last["result"]["final"] is True, last  # v0.3: the interaction is over until the caller answers


def test_the_token_rules_are_the_servers(tmp_path: Path) -> None:
    with served(str(RESEARCH), "--model", "offline") as server:
        wrong = httpx.post(
            f"{server.url}/a2a/research-report",
            headers={"Authorization": "Bearer not-the-token-0123456789"},
            json={"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "x"}},
        )
        right = httpx.post(
            f"{server.url}/a2a/research-report",
            headers={"Authorization": f"Bearer {TOKEN}", "A2A-Version": "1.0"},
            json={"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "run_nope"}},
        )
        unversioned = httpx.post(  # a v1.0 method without the header: taken for v0.3 (the SDK's rule)
            f"{server.url}/a2a/research-report",
            headers={"Authorization": f"Bearer {TOKEN}"},
            json={"jsonrpc": "2.0", "id": 2, "method": "GetTask", "params": {"id": "run_nope"}},
        )
        legacy = httpx.post(  # a v0.3 client: its method names, no A2A-Version header
            f"{server.url}/a2a/research-report",
            headers={"Authorization": f"Bearer {TOKEN}"},
            json={"jsonrpc": "2.0", "id": "g", "method": "tasks/get", "params": {"id": "run_nope"}},
        )
    assert wrong.status_code == 401 and wrong.json()["error"]["code"] == -32600
    assert right.status_code == 200 and right.json()["error"]["code"] == -32001  # TaskNotFound
    assert unversioned.json()["error"]["code"] == -32009  # version not supported
    assert legacy.json()["id"] == "g" and legacy.json()["error"]["code"] == -32001


def test_an_approval_is_input_required_and_deny_answers_it(tmp_path: Path) -> None:
    from tests.serve.test_approvals import stamp_team

    team = stamp_team(tmp_path)
    store = f"sqlite:///{tmp_path / 'runs.db'}"
    before = set(tmp_path.iterdir())
    with served(str(team), "--model", "offline", "--store", store, cwd=tmp_path) as server:

        async def scenario() -> None:
            async with agent(server.url, "stamper", streaming=False) as client:
                [sent] = await collect(client, message("stamp it"))
                assert state_name(sent.task.status.state) == "INPUT_REQUIRED"
                asked = text_of(sent.task.status.message.parts[:1])
                assert "asks to run tool 'stamp'; one of: approve | deny" in asked, asked
                with pytest.raises(InvalidParamsError, match='"approve" or "deny"'):
                    await collect(client, message("perhaps", task_id=sent.task.id))
                [after] = await collect(client, message("deny", task_id=sent.task.id))
                assert state_name(after.task.status.state) == "COMPLETED", after.task.status
            events = httpx.get(f"{server.url}/v1/runs/{sent.task.id}/events", headers=AUTH, timeout=60).text
            assert "event: person_answered" in events and '"a2a"' in events

        asyncio.run(scenario())
    assert {p for p in set(tmp_path.iterdir()) - before if not p.name.startswith("runs.db")} == set()  # no stamp
