"""Issue 44.2: the resource over HTTP (``POST /v1/runs``, chat completions, A2A message metadata) and
``DELETE /v1/memory/{resource}``, against the app served by uvicorn on a SQLite store, the fake provider answering.

Resource A saves a fact over ``POST /v1/runs``; A's chat completion recalls it; B's run with the same question
recalls nothing of A's, over HTTP and over A2A; a bad resource is a 422 (an A2A invalid-params error) naming what
is wrong, never a 500; DELETE forgets A and nothing of A is found by any query afterwards.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import httpx
import pytest

import teamrun
from teamrun.llm.caching import RUNNER_CONTEXT_HEADER
from teamrun.store import open_store
from teamrun.store.memory import MemoryStore
from tests.a2a.served_agents import AUTH, TOKEN, agent, collect, message, state_name
from tests.fakeserver import FakeOpenAI, text, tool_calls
from tests.serve.conftest import until_status

TEAM = """\
version: 1
name: desk
supervisor: support
defaults: {{api_base: '{url}', api_key_env: TEAMRUN_TEST_KEY, num_retries: 0}}
agents:
  support: {{model: openai/support, instructions: Help the customer.}}
memory:
  embedding: {{model: offline}}
  recall:
    support: {{min_score: 0.05}}
  save: [support]
  search: [support]
"""
FACT = "The customer's parrot is called Zanzibar"
QUESTION = "What is my parrot called?"


def _context(server: FakeOpenAI) -> str:
    """The runner's context in the latest request: its last message, after the conversation."""
    last = server.requests("support")[-1].request["messages"][-1]
    assert last["role"] == "user" and last["content"].startswith(RUNNER_CONTEXT_HEADER)
    return str(last["content"])


def _run(client: httpx.Client, resource: str, task: str) -> dict[str, Any]:
    made = client.post("/v1/runs", json={"team": "desk", "input": task, "resource": resource})
    assert made.status_code == 201, made.text
    return until_status(client, made.json()["id"], "done")


def test_a_resource_over_http_and_a2a_is_scoped_and_forgotten_by_delete(
    serve: Any, tmp_path: Path, fake_openai: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("TEAMRUN_STORE", raising=False)
    path = tmp_path / "desk.yaml"
    path.write_text(TEAM.format(url=fake_openai.url), encoding="utf-8")
    store = open_store(tmp_path / "runs.db")
    server = serve([teamrun.load_team(path, store=store)], store=store, tokens=frozenset({TOKEN}))
    with httpx.Client(base_url=server.url, headers=AUTH, timeout=120) as client:
        fake_openai.script("support", [tool_calls(("memory_save", {"fact": FACT})), text("Noted.")])
        _run(client, "cust-A", "Please remember the name of my parrot.")
        assert [m.fact for m in MemoryStore(store).list("cust-A")] == [FACT]

        fake_openai.script("support", [text("Zanzibar.")])
        chat = {"model": "desk", "messages": [{"role": "user", "content": QUESTION}], "resource": "cust-A"}
        answered = client.post("/v1/chat/completions", json=chat)
        assert answered.status_code == 200, answered.text
        assert FACT in _context(fake_openai)

        fake_openai.script("support", [text("I do not know.")])
        _run(client, "cust-B", QUESTION)
        other = _context(fake_openai)
        assert "Zanzibar" not in other and "Nothing saved about this user matches yet" in other

        async def over_a2a(resource: Any) -> Any:
            async with agent(server.url, "desk", streaming=False) as a2a:
                [sent] = await collect(a2a, message(QUESTION, metadata={"teamrun": {"resource": resource}}))
            return sent.task

        fake_openai.script("support", [text("I do not know.")])
        task = asyncio.run(over_a2a("cust-B"))
        assert state_name(task.status.state) == "COMPLETED"
        other = _context(fake_openai)
        assert "Zanzibar" not in other and "Nothing saved about this user matches yet" in other
        fake_openai.script("support", [text("Zanzibar.")])
        asyncio.run(over_a2a("cust-A"))
        assert FACT in _context(fake_openai)  # the A2A resource is the run's: A's recalls A's

        for bad, said in (("", "is empty"), ("x" * 201, "201 characters"), (5, "not a number"), ("a\tb", "printable")):
            refused = client.post("/v1/runs", json={"team": "desk", "input": QUESTION, "resource": bad})
            assert refused.status_code == 422 and said in refused.text, refused.text
            chat_refused = client.post("/v1/chat/completions", json={**chat, "resource": bad})
            assert chat_refused.status_code == 422 and said in chat_refused.text, chat_refused.text
        body = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "SendMessage",
            "params": {
                "message": {
                    "messageId": "m1",
                    "role": "ROLE_USER",
                    "parts": [{"text": QUESTION}],
                    "metadata": {"teamrun": {"resource": ""}},
                }
            },
        }
        rpc = client.post("/a2a/desk", json=body, headers={"A2A-Version": "1.0"})
        assert rpc.status_code == 200 and rpc.json()["error"]["code"] == -32602, rpc.text
        assert "metadata.teamrun.resource: the resource id is empty" in rpc.json()["error"]["message"]
        blank = client.delete("/v1/memory/%20")
        assert blank.status_code == 422 and blank.json()["error"]["code"] == "invalid_request", blank.text

        gone = client.delete("/v1/memory/cust-A")
        assert gone.status_code == 200, gone.text
        removed = gone.json()
        assert removed["resource"] == "cust-A" and removed["memories"] == 1 and removed["runs"] == 3, removed
        assert MemoryStore(store).list("cust-A") == []
        assert MemoryStore(store).search("cust-A", "parrot Zanzibar", None, k=5, mode="keyword") == []
        fake_openai.script("support", [text("I do not know.")])
        chat["messages"] = [{"role": "user", "content": "parrot Zanzibar"}]
        assert client.post("/v1/chat/completions", json=chat).status_code == 200
        again = _context(fake_openai)
        assert "Zanzibar" not in again.split("<<<MEMORY>>>")[1]
        assert "Nothing saved about this user matches yet" in again
    assert httpx.delete(f"{server.url}/v1/memory/cust-A").status_code == 401  # auth like the others
    fake_openai.assert_complete()


WM_TEAM = (
    TEAM
    + """\
workspace:
  persist: resource
  entries:
    notes: {{schema: {{type: array, items: {{type: string}}}}, merge: append, write: [support]}}
"""
)
NOTE = "Pet-Quokka-Nimbus"


def _kept_events(store_path: Path) -> str:
    """Every kept event of the store, decompressed (a byte grep of the file misses them)."""
    import sqlite3
    import zlib

    with sqlite3.connect(store_path) as conn:
        return "".join(zlib.decompress(body).decode() for (body,) in conn.execute("SELECT body FROM run_events"))


def test_forget_over_http_reaches_served_events_and_held_runs_and_a_resource_with_a_slash(
    serve: Any, tmp_path: Path, fake_openai: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Attack a44b D3, D4, D8: a served run's events hold no fact, query or working-memory value without
    --trace-content; DELETE redacts the resource's runs' kept events and the server stops serving what it held of
    them (record, workspace, events); a resource with '/' is forgotten as org%2Facme; a bad id is 422
    invalid_request like POST /v1/runs, a path that is not UTF-8 a 400 invalid_text."""
    monkeypatch.delenv("TEAMRUN_STORE", raising=False)
    path = tmp_path / "desk.yaml"
    path.write_text(WM_TEAM.format(url=fake_openai.url), encoding="utf-8")
    store = open_store(tmp_path / "runs.db")
    server = serve([teamrun.load_team(path, store=store)], store=store, tokens=frozenset({TOKEN}))
    resource = "org/acme"
    with httpx.Client(base_url=server.url, headers=AUTH, timeout=120) as client:
        fake_openai.script(
            "support",
            [
                tool_calls(("memory_save", {"fact": FACT}), ("workspace_write_notes", {"items": [NOTE]})),
                text("Noted."),
            ],
        )
        first = _run(client, resource, "Please remember the name of my parrot.")["id"]
        fake_openai.script("support", [tool_calls(("memory_search", {"query": "parrot name"})), text("As saved.")])
        second = _run(client, resource, QUESTION)["id"]
        for run_id in (first, second):
            lines = client.get(f"/v1/runs/{run_id}/events").text.splitlines()
            events = "\n".join(line for line in lines if '"kind": ' in line)  # the events, not the run's record
            assert '"memory_save"' in events or '"memory_recall"' in events
            assert "Zanzibar" not in events and "parrot name" not in events and NOTE not in events, run_id
        assert NOTE in client.get(f"/v1/runs/{second}/workspace").text
        assert "Zanzibar" in _kept_events(tmp_path / "runs.db") or NOTE in client.get(f"/v1/runs/{first}").text

        refused = client.delete("/v1/memory/a%0Ab")
        assert refused.status_code == 422 and refused.json()["error"]["code"] == "invalid_request", refused.text
        assert "printable" in refused.text
        not_text = client.delete("/v1/memory/%FF%FE")
        assert not_text.status_code == 400 and not_text.json()["error"]["code"] == "invalid_text", not_text.text

        gone = client.delete("/v1/memory/org%2Facme")
        assert gone.status_code == 200, gone.text
        removed = gone.json()
        assert removed["resource"] == resource and removed["memories"] == 1 and removed["runs"] == 2, removed
        assert removed["working_memory"] == 1, removed
        assert MemoryStore(store).list(resource) == []
        for run_id in (first, second):
            for part in ("", "/workspace", "/events"):
                shown = client.get(f"/v1/runs/{run_id}{part}")
                assert shown.status_code == 200, (part, shown.text)
                assert "Zanzibar" not in shown.text and NOTE not in shown.text, (run_id, part, shown.text)
        kept = _kept_events(tmp_path / "runs.db")
        assert "Zanzibar" not in kept and NOTE not in kept and "parrot name" not in kept
    fake_openai.assert_complete()


def test_an_a2a_message_s_teamrun_metadata_with_an_unknown_key_is_refused(
    serve: Any, tmp_path: Path, fake_openai: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Attack a44b D8: `{"teamrun": {"resorce": "A"}}` ran without a resource, silently: it is -32602 naming the key."""
    monkeypatch.delenv("TEAMRUN_STORE", raising=False)
    path = tmp_path / "desk.yaml"
    path.write_text(TEAM.format(url=fake_openai.url), encoding="utf-8")
    store = open_store(tmp_path / "runs.db")
    server = serve([teamrun.load_team(path, store=store)], store=store, tokens=frozenset({TOKEN}))
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "SendMessage",
        "params": {
            "message": {
                "messageId": "m1",
                "role": "ROLE_USER",
                "parts": [{"text": QUESTION}],
                "metadata": {"teamrun": {"resorce": "cust-A"}},
            }
        },
    }
    with httpx.Client(base_url=server.url, headers=AUTH, timeout=120) as client:
        rpc = client.post("/a2a/desk", json=body, headers={"A2A-Version": "1.0"})
    assert rpc.status_code == 200 and rpc.json()["error"]["code"] == -32602, rpc.text
    assert "metadata.teamrun.resorce" in rpc.json()["error"]["message"], rpc.text
    assert fake_openai.requests("support") == []
