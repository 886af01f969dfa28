"""The served A2A agent's corners an attacker found (/work/attack/a2a-serve.md D6, D8, D13), driven with a2a-sdk's
client or JSON-RPC over HTTP against the app served by uvicorn (the ``serve`` fixture) on a SQLite store:

- a question (or an approval's arguments) holding a team secret is stored masked, for a served run and a CLI run;
- ``ListTasks`` with an unknown ``status`` is ``-32602`` naming the states;
- a second answer to an item already answered is ``-32004`` saying who answered it and when;
- an ``interrupted`` task's ``status.timestamp`` is when its run last showed life, not the time of the read;
- a ``rejected`` task (``contextId`` of another team's conversation) says so in A2A's words, naming no team;
- ``SubscribeToTask`` on a task another server runs is refused as ``CancelTask`` is;
- CORS lets a browser send what the a2a-sdk client sends (``A2A-Version``...).
"""

from __future__ import annotations

import asyncio
import datetime
import json
import sqlite3
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest

import teamrun
from teamrun.cli import main
from tests.a2a.served_agents import AUTH, TOKEN, agent, collect, message, state_name, text_of
from tests.serve.conftest import serve
from tests.waiting import wait_until_async

__all__ = ["serve"]

SECRET = "sup3rs3cretvalue99"
ASKER = """version: 1
name: asker
supervisor: lead
tools:
  ask_ops: {person: {choices: [eu, us]}}
  notify:
    command: [echo, "{{ message }}"]
    parameters: {message: {type: string}}
    require_approval: true
agents:
  lead: {description: Asks before it notifies., tools: [ask_ops, notify]}
"""


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / f"{name}.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def stored_items(db: Path) -> list[tuple[str, str, str]]:
    """``(item_id, question, spec)`` of every row of the store's ``pending_items``, as sqlite holds them."""
    with sqlite3.connect(db) as conn:
        return [tuple(row) for row in conn.execute("SELECT item_id, question, spec FROM pending_items ORDER BY 1")]


def test_a_question_holding_a_team_secret_is_stored_masked_when_served(
    serve: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from teamrun.store import open_store

    monkeypatch.setenv("MY_SECRET_TOKEN", SECRET)
    store = open_store(tmp_path / "runs.db")
    team = teamrun.load_team(write(tmp_path, "asker", ASKER), store=store)
    server = serve([team], store=store, tokens=frozenset({TOKEN}))

    async def scenario() -> tuple[Any, Any]:
        async with agent(server.url, "asker", streaming=False) as client:
            [sent] = await collect(client, message(f"Deploy with the key {SECRET}"))
            [answered] = await collect(client, message("eu", task_id=sent.task.id))  # then `notify` asks
        return sent.task, answered.task

    for task in asyncio.run(scenario()):
        assert state_name(task.status.state) == "INPUT_REQUIRED"
        shown = text_of(task.status.message.parts[:1])
        assert "***" in shown and SECRET not in shown, shown
    rows = stored_items(tmp_path / "runs.db")
    assert [row[0] for row in rows] == ["a2", "q1"], rows  # the question and the approval of `notify`
    assert all("***" in question for _, question, _ in rows), rows
    assert SECRET not in json.dumps(rows), rows  # neither the questions nor the approval's arguments


def test_a_question_holding_a_team_secret_is_stored_masked_by_a_cli_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("MY_SECRET_TOKEN", SECRET)
    team = write(tmp_path, "asker", ASKER)
    db = tmp_path / "runs.db"
    args = ["execute", str(team), "-i", f"Deploy with the key {SECRET}", "--store", str(db), "--detach"]
    assert main([*args, "--json", "--progress", "none"]) == 4, capsys.readouterr().err  # 4: waits for people
    run_id = json.loads(capsys.readouterr().out)["run_id"]
    assert main(["answer", run_id, "q1", "eu", "--store", str(db), "--progress", "none"]) == 4  # `notify` asks
    rows = stored_items(db)
    assert [row[0] for row in rows] == ["a2", "q1"], rows
    assert all("***${MY_SECRET_TOKEN}***" in question for _, question, _ in rows), rows
    assert SECRET not in json.dumps(rows), rows
    capsys.readouterr()
    assert main(["runs", "show", run_id, "--store", str(db), "--json"]) == 0
    [item] = json.loads(capsys.readouterr().out)["pending"]
    assert item["item"] == "a2" and item["question"].startswith("may notify run with"), item
    assert SECRET not in json.dumps(item) and "***" in item["question"]


def rpc(server: Any, team: str, method: str, params: dict[str, Any], **headers: str) -> dict[str, Any]:
    """One v1.0 JSON-RPC call over HTTP, as a client without the SDK sends it; the answer's body."""
    sent = {**AUTH, "A2A-Version": "1.0", **headers}
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
    answer = httpx.post(f"{server.url}/a2a/{team}", json=body, headers=sent, timeout=120)
    assert answer.status_code == 200, answer.text
    found: dict[str, Any] = answer.json()
    return found


def test_list_tasks_with_a_status_that_names_no_state_is_invalid_params(serve: Any, tmp_path: Path) -> None:
    from tests.serve.conftest import solo_team

    server = serve([teamrun.load_team(solo_team(tmp_path))], tokens=frozenset({TOKEN}))

    async def scenario() -> str:
        async with agent(server.url, "solo", streaming=False) as client:
            [sent] = await collect(client, message("hello"))
        return str(sent.task.id)

    task_id = asyncio.run(scenario())
    completed = rpc(server, "solo", "ListTasks", {"status": "TASK_STATE_COMPLETED"})["result"]
    failed = rpc(server, "solo", "ListTasks", {"status": "TASK_STATE_FAILED"})["result"]
    assert [t["id"] for t in completed["tasks"]] == [task_id] and failed.get("tasks", []) == []
    for bogus in ("BOGUS", "completed", 99, {"state": 3}):
        error = rpc(server, "solo", "ListTasks", {"status": bogus})["error"]
        assert error["code"] == -32602, error
        assert "params.status: " + json.dumps(bogus) in error["message"], error
        assert "one of: TASK_STATE_SUBMITTED, TASK_STATE_WORKING, TASK_STATE_COMPLETED" in error["message"]
    unversioned = httpx.post(  # no A2A-Version: the version is the first thing wrong (the SDK's -32009)
        f"{server.url}/a2a/solo",
        json={"jsonrpc": "2.0", "id": 2, "method": "ListTasks", "params": {"status": "BOGUS"}},
        headers=AUTH,
    )
    assert unversioned.json()["error"]["code"] == -32009


def test_a_second_answer_to_an_answered_item_says_who_answered_it_and_when(serve: Any, tmp_path: Path) -> None:
    from a2a.types import UnsupportedOperationError

    from teamrun.store import open_store
    from tests.serve.conftest import REPO

    store = open_store(tmp_path / "runs.db")
    team = teamrun.load_team(REPO / "teams" / "launch-signoff.yaml", model="offline", store=store)
    server = serve([team], store=store, tokens=frozenset({TOKEN}))

    async def scenario() -> None:
        async with agent(server.url, "launch-signoff", streaming=False) as client:
            [sent] = await collect(client, message("Launch Falcon"))
            task = sent.task
            assert state_name(task.status.state) == "INPUT_REQUIRED"
            asked = {item["agent"]: item["id"] for item in json.loads(_data_json(task.status.message.parts[1]))}
            infra = asked["infra"]
            [again] = await collect(client, message("eu-west-1", task_id=task.id, metadata={"item": infra}))
            assert state_name(again.task.status.state) == "INPUT_REQUIRED"  # the two others still wait
            with pytest.raises(UnsupportedOperationError) as refused:  # -32004, as the loser of a race is told
                await collect(client, message("us-east-1", task_id=task.id, metadata={"item": infra}))
            said = str(refused.value)
            assert f"item {infra} of task {task.id} was already answered by a2a at 20" in said, said
            assert "UTC; the task waits for: " in said and asked["legal"] in said, said
            with pytest.raises(Exception, match="waits for no item 'q9'") as unknown:  # never asked: -32602
                await collect(client, message("eu-west-1", task_id=task.id, metadata={"item": "q9"}))
            assert type(unknown.value).__name__ == "InvalidParamsError"

    asyncio.run(scenario())
    raw = rpc(server, "launch-signoff", "GetTask", {"id": "run_x"})  # (the raw code of a refusal, for the docs)
    assert raw["error"]["code"] == -32001


def _data_json(part: Any) -> str:
    from google.protobuf import json_format

    return json.dumps(json_format.MessageToDict(part.data))


def test_an_interrupted_task_is_stamped_when_its_run_last_showed_life(serve: Any, tmp_path: Path) -> None:
    import time

    from a2a.types import GetTaskRequest

    from teamrun.store import open_store
    from teamrun.store.journal import StoreJournal
    from teamrun.store.records import JournaledRun
    from tests.serve.conftest import solo_team

    store = open_store(tmp_path / "runs.db")
    path = solo_team(tmp_path)
    last_beat = round(time.time() - 7200, 3)  # its process (on another host) went silent two hours ago
    gone = JournaledRun(
        run_id="run_0123456789abcdef",
        team="solo",
        team_file=str(path),
        input="a long job",
        host="a-host-that-is-gone",
        pid=1,
        started_at=last_beat - 60,
        heartbeat_at=last_beat,
    )
    StoreJournal(store).save_run(gone)
    server = serve([teamrun.load_team(path, store=store)], store=store, tokens=frozenset({TOKEN}))

    async def scenario() -> list[Any]:
        async with agent(server.url, "solo", streaming=False) as client:
            first = await client.get_task(GetTaskRequest(id=gone.run_id))
            await asyncio.sleep(1.1)  # a read a second later: the same stamp
            return [first, await client.get_task(GetTaskRequest(id=gone.run_id))]

    reads = asyncio.run(scenario())
    for task in reads:
        assert state_name(task.status.state) == "FAILED"
        assert "interrupted" in text_of(task.status.message.parts)
        assert abs(task.status.timestamp.ToNanoseconds() / 1e9 - last_beat) < 0.01, task.status.timestamp
    listed = httpx.get(f"{server.url}/v1/runs/{gone.run_id}", headers=AUTH).json()
    assert listed["status"] == "interrupted"


def test_a_task_rejected_for_another_agents_context_says_so_in_a2a_words(serve: Any, tmp_path: Path) -> None:
    from a2a.types import GetTaskRequest, TaskNotFoundError

    from teamrun.store import open_store
    from tests.serve.conftest import solo_team

    store = open_store(tmp_path / "runs.db")
    teams = [solo_team(tmp_path), solo_team(tmp_path, name="falcon-crew")]

    def start() -> Any:
        return serve([teamrun.load_team(p, store=store) for p in teams], store=store, tokens=frozenset({TOKEN}))

    server = start()

    async def scenario() -> Any:
        async with agent(server.url, "falcon-crew", streaming=False) as crew:
            [theirs] = await collect(crew, message("hello", context_id="launch-7"))
            assert state_name(theirs.task.status.state) == "COMPLETED"
        async with agent(server.url, "solo", streaming=False) as solo:
            [ours] = await collect(solo, message("hello", context_id="launch-7"))
            read = await solo.get_task(GetTaskRequest(id=ours.task.id))
        return ours.task, read

    task, read = asyncio.run(scenario())
    for seen in (task, read):
        assert state_name(seen.status.state) == "REJECTED"
        said = text_of(seen.status.message.parts)
        assert said == (
            "contextId 'launch-7' is a conversation of another agent of this server: send the message again "
            "with another contextId (or none: a new conversation starts)"
        ), said
        assert "falcon-crew" not in json.dumps(_data_json_task(seen))  # the other team is not named
    server.stop()
    server = start()  # a restart: a rejected task is not kept (it never ran; the store has no run of it)

    async def after_restart() -> None:
        async with agent(server.url, "solo", streaming=False) as solo:
            with pytest.raises(TaskNotFoundError):
                await solo.get_task(GetTaskRequest(id=task.id))

    asyncio.run(after_restart())


def _data_json_task(task: Any) -> Any:
    from google.protobuf import json_format

    return json_format.MessageToDict(task)


def test_subscribing_to_a_task_another_server_runs_is_refused_as_cancelling_it_is(serve: Any, tmp_path: Path) -> None:
    from a2a.types import CancelTaskRequest, SubscribeToTaskRequest, TaskNotCancelableError, UnsupportedOperationError

    from teamrun.store import open_store
    from tests.serve.conftest import GatedModel, solo_team

    path = solo_team(tmp_path)
    gated = GatedModel()
    store_a, store_b = open_store(tmp_path / "runs.db"), open_store(tmp_path / "runs.db")  # one store, two servers
    here = serve([teamrun.load_team(path, chat_model=gated, store=store_a)], store=store_a, tokens=frozenset({TOKEN}))
    there = serve([teamrun.load_team(path, store=store_b)], store=store_b, tokens=frozenset({TOKEN}))

    async def scenario() -> None:
        async with agent(here.url, "solo", streaming=False, polling=True) as client:
            [sent] = await collect(client, message("take your time"))
        task_id = sent.task.id
        await wait_until_async(lambda: gated.waiting, "the run at its model call, on server A")
        async with agent(there.url, "solo") as other:
            with pytest.raises(TaskNotCancelableError, match="runs in another process on the same store"):
                await other.cancel_task(CancelTaskRequest(id=task_id))
            with pytest.raises(UnsupportedOperationError, match="runs in another server; subscribe there"):
                [event async for event in other.subscribe(SubscribeToTaskRequest(id=task_id))]
        async with agent(here.url, "solo") as owner:  # where it runs, it is followed to its end
            stream = owner.subscribe(SubscribeToTaskRequest(id=task_id))
            first = await anext(stream)
            assert state_name(first.task.status.state) == "WORKING"
            gated.gate.set()
            events = [event async for event in stream]
        assert state_name(events[-1].status_update.status.state) == "COMPLETED", events[-1]

    asyncio.run(scenario())


def test_cors_lets_a_browser_send_what_the_a2a_sdk_client_sends(serve: Any, tmp_path: Path) -> None:
    from a2a.client import ClientConfig, ClientFactory

    from teamrun.serve.app import CORS_HEADERS
    from tests.serve.conftest import solo_team

    origin = "https://agents.example.org"
    server = serve([teamrun.load_team(solo_team(tmp_path))], tokens=frozenset({TOKEN}), cors_origins=[origin])
    sent: set[str] = set()

    async def record(request: httpx.Request) -> None:
        if request.method == "POST":
            sent.update(name.lower() for name in request.headers)

    async def scenario() -> None:
        hooks = {"request": [record]}
        async with httpx.AsyncClient(headers=AUTH, timeout=120, event_hooks=hooks) as http:
            for streaming in (False, True):
                client = await ClientFactory(ClientConfig(httpx_client=http, streaming=streaming)).create_from_url(
                    f"{server.url}/a2a/solo"
                )
                await collect(client, message("hello"))

    asyncio.run(scenario())
    set_by_the_browser = {"host", "accept", "accept-encoding", "connection", "user-agent", "content-length"}
    asked = sorted(sent - set_by_the_browser)
    assert {"a2a-version", "authorization", "content-type", "cache-control"} <= set(asked), asked
    assert set(asked) <= {h.lower() for h in CORS_HEADERS}, asked
    preflight = httpx.options(
        f"{server.url}/a2a/solo",
        headers={
            "Origin": origin,
            "Access-Control-Request-Method": "POST",
            "Access-Control-Request-Headers": ", ".join(asked),
        },
    )
    assert preflight.status_code == 200, preflight.text
    allowed = {h.strip().lower() for h in preflight.headers["access-control-allow-headers"].split(",")}
    assert set(asked) <= allowed
    refused = httpx.post(  # what a browser script may read of an answer: the token's scheme
        f"{server.url}/a2a/solo", json={"jsonrpc": "2.0", "id": 1, "method": "GetTask"}, headers={"Origin": origin}
    )
    assert refused.status_code == 401 and refused.headers["access-control-allow-origin"] == origin
    assert "www-authenticate" in refused.headers["access-control-expose-headers"].lower()


def test_the_card_names_https_behind_a_trusted_proxy_only(tmp_path: Path) -> None:
    from tests.a2a.served_agents import served
    from tests.serve.conftest import solo_team

    team = str(solo_team(tmp_path))
    behind_tls = {"X-Forwarded-Proto": "https", "X-Forwarded-For": "203.0.113.7"}
    urls: dict[str, set[str]] = {}
    for trusted in ("", "127.0.0.1", "10.9.8.7"):  # none; this host (the proxy is the loopback client); another
        with served(team, *(["--forwarded-allow-ips", trusted] if trusted else [])) as server:
            card = httpx.get(f"{server.url}/a2a/solo/.well-known/agent-card.json", headers=behind_tls).json()
            plain = httpx.get(f"{server.url}/a2a/solo/.well-known/agent-card.json").json()
        urls[trusted] = {i["url"] for i in card["supportedInterfaces"]} | {card["url"]}
        assert plain["url"] == f"{server.url}/a2a/solo"  # a request without the headers: as it came
    schemes = {key: {url.split("://", 1)[0] for url in found} for key, found in urls.items()}
    assert schemes == {"": {"http"}, "127.0.0.1": {"https"}, "10.9.8.7": {"http"}}, urls
    assert all(url.endswith("/a2a/solo") and "203.0.113.7" not in url for found in urls.values() for url in found)


def _seconds(stamp: str) -> float:
    """An RFC 3339 timestamp of a task's status (``...T05:35:07.623456789Z``) in seconds since the epoch."""
    whole, _, fraction = stamp.rstrip("Z").partition(".")
    return datetime.datetime.fromisoformat(whole + "+00:00").timestamp() + float("0." + (fraction or "0"))


def test_cancel_task_ends_an_input_required_task_held_or_read_from_the_store(serve: Any, tmp_path: Path) -> None:
    """CancelTask on a task waiting for a person cancels it as the runs API's cancel does: its run is cancelled in
    the store, its questions take no answer any more; the same after a restart, from the store alone."""
    from teamrun.store import open_store
    from tests.serve.conftest import REPO

    db = tmp_path / "runs.db"
    asked_at: dict[str, float] = {}

    def served() -> Any:
        store = open_store(db)
        team = teamrun.load_team(REPO / "teams" / "launch-signoff.yaml", model="offline", store=store)
        return serve([team], store=store, tokens=frozenset({TOKEN}))

    def waiting(server: Any) -> str:
        sent = rpc(
            server,
            "launch-signoff",
            "SendMessage",
            {
                "message": {
                    "messageId": uuid.uuid4().hex,
                    "role": "ROLE_USER",
                    "parts": [{"text": "Launch Falcon"}],
                }
            },
        )
        task = sent["result"]["task"]
        assert task["status"]["state"] == "TASK_STATE_INPUT_REQUIRED", sent
        asked_at[str(task["id"])] = _seconds(task["status"]["timestamp"])
        return str(task["id"])

    def check_cancelled(server: Any, task_id: str, cancelled: dict[str, Any]) -> None:
        status = cancelled["result"]["status"]
        assert status["state"] == "TASK_STATE_CANCELED", cancelled
        assert "while waiting for a person" in json.dumps(status["message"]), status
        read = rpc(server, "launch-signoff", "GetTask", {"id": task_id})["result"]
        assert read["status"]["state"] == "TASK_STATE_CANCELED", read
        assert _seconds(read["status"]["timestamp"]) > asked_at[task_id], (read, asked_at)  # stamped when cancelled
        answer = {"messageId": "a-" + task_id, "taskId": task_id, "role": "ROLE_USER", "parts": [{"text": "eu-west-1"}]}
        refused = rpc(server, "launch-signoff", "SendMessage", {"message": answer})
        assert (
            refused.get("error", {}).get("code") == -32004 and "is over (cancelled)" in refused["error"]["message"]
        ), refused
        with sqlite3.connect(db) as conn:
            (run_status,) = conn.execute("SELECT status FROM runs WHERE id = ?", (task_id,)).fetchone()
            items = {row[0] for row in conn.execute("SELECT status FROM pending_items WHERE run_id = ?", (task_id,))}
        assert run_status == "cancelled" and items == {"expired"}, (run_status, items)

    first = served()
    held = waiting(first)
    check_cancelled(first, held, rpc(first, "launch-signoff", "CancelTask", {"id": held}))
    kept = waiting(first)
    first.stop()

    second = served()  # the task is known from the store only
    check_cancelled(second, kept, rpc(second, "launch-signoff", "CancelTask", {"id": kept}))
    again = rpc(second, "launch-signoff", "CancelTask", {"id": kept})  # over now: not cancelable
    assert again["error"]["code"] == -32002 and "already over (cancelled)" in again["error"]["message"], again
