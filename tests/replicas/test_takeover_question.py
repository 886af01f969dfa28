"""Issue 46: a run taken over while a question to a person is pending keeps that question, asked once.

Two `teamrun serve --lease 2` replicas on one PostgreSQL store. A supervisor delegates to two workers in one
reply (parallel calls): the first asks a person (a ``person:`` tool), the second's model call is held by the
provider. A worker that waits for a person lets its sibling go on (docs/people.md), so the run runs, holding its
lease, with a question pending. Replica A is SIGKILLed then, and replica B takes the run over (``run_moved``) and
resumes it as ``teamrun resume`` does: the question is the same pending item (same id, asked at the same time; the
asking worker's finished model call is not paid again). The person answers through B, either while the run runs
on B again (its held call asked again there: the run takes the answer where it runs), or between the two replicas
(A dead, its lease not yet expired: the run shows ``running`` there, the answer too, and B's resumed run finds
the question answered). The run ends ``done`` with the answer in its final text; every finished call was paid
once, the call in flight at the kill twice.
"""

from __future__ import annotations

import os
import signal
import threading
from collections import Counter
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.fakeserver import FakeOpenAI, Reply, text, tool_calls
from tests.pgserver import new_database
from tests.replicas.cluster import TOKEN, events_of, replica
from tests.waiting import wait_until

AUTH = {"Authorization": f"Bearer {TOKEN}"}


def _team(tmp_path: Path, url: str) -> Path:
    path = tmp_path / "crew.yaml"
    path.write_text(
        "version: 1\nname: crew\nsupervisor: lead\n"
        f"defaults: {{api_base: '{url}', api_key_env: TEAMRUN_TEST_KEY, num_retries: 0, request_timeout_s: 900}}\n"
        "tools:\n  ask_owner: {person: {}}\n"
        "agents:\n"
        "  lead: {model: openai/lead, description: Books flights., delegates_to: [asker, holder]}\n"
        "  asker: {model: openai/asker, description: Asks the owner., tools: [ask_owner]}\n"
        "  holder: {model: openai/holder, description: Finds the plane.}\n",
        encoding="utf-8",
    )
    return path


class Crew:
    """Stateless replies per agent (a resumed run gets the same ones), every request logged as ``(who, call
    number)``. The lead delegates to both workers in its first reply; the asker asks the owner; the holder's
    calls wait for :attr:`gate`."""

    def __init__(self, server: FakeOpenAI) -> None:
        self.lock = threading.Lock()
        self.arrived: list[tuple[str, int]] = []
        self.gate = threading.Event()
        for who in ("lead", "asker", "holder"):
            server.handler(who, lambda request, who=who: self.answer(who, request))

    def answer(self, who: str, request: dict[str, Any]) -> Reply:
        messages = request["messages"]
        call = 1 + sum(1 for m in messages if m["role"] == "assistant")
        said = [str(m["content"]) for m in messages if m["role"] == "tool"]
        with self.lock:
            self.arrived.append((who, call))
        if who == "lead":
            if call == 1:
                return tool_calls(
                    ("ask_asker", {"task": "ask the owner how many seats"}), ("ask_holder", {"task": "find the plane"})
                )
            return text("booked: " + " / ".join(said))
        if who == "asker":
            if call == 1:
                return tool_calls(("ask_owner", {"question": "how many seats?"}))
            return text(f"the owner wants {said[0]}")
        self.gate.wait(timeout=300)
        return text("the plane is found")

    def calls(self) -> Counter[tuple[str, int]]:
        with self.lock:
            return Counter(self.arrived)

    def count(self, who: str, call: int) -> int:
        return self.calls()[(who, call)]


def _pending(client: httpx.Client, run_id: str) -> list[dict[str, Any]]:
    answer = client.get("/v1/pending", params={"run_id": run_id})
    assert answer.status_code == 200, answer.text
    return list(answer.json()["data"])


def _status(client: httpx.Client, run_id: str) -> str:
    return str(client.get(f"/v1/runs/{run_id}").json()["status"])


@pytest.mark.parametrize("answered", ["while it runs on B", "between the replicas"])
def test_a_run_taken_over_with_a_question_pending_keeps_it_and_ends_done_with_its_answer(
    tmp_path: Path, postgres_server: str, fake_openai: FakeOpenAI, answered: str
) -> None:
    crew = Crew(fake_openai)
    team = _team(tmp_path, fake_openai.url)
    store = new_database(postgres_server)
    try:
        with replica(team, store) as a, replica(team, store) as b:
            with httpx.Client(base_url=a.url, headers=AUTH, timeout=60) as on_a:
                started = on_a.post("/v1/runs", json={"team": "crew", "input": "book a flight"})
                assert started.status_code == 201, started.text
                run_id = started.json()["id"]
                (asked,) = wait_until(lambda: _pending(on_a, run_id), "the asker's question pending")
                wait_until(lambda: crew.count("holder", 1) == 1, "the holder's call in flight")
                assert _status(on_a, run_id) == "running"  # not waiting: the holder still works
            os.kill(a.process.pid, signal.SIGKILL)
            a.process.wait(timeout=60)

            with httpx.Client(base_url=b.url, headers=AUTH, timeout=60) as on_b:
                if answered == "while it runs on B":
                    wait_until(lambda: crew.count("holder", 1) == 2, "the run taken over by B (the held call again)")
                assert _status(on_b, run_id) == "running"
                assert _pending(on_b, run_id) == [asked]  # the same item, asked once
                said = on_b.post(f"/v1/runs/{run_id}/pending/{asked['id']}", json={"answer": "12 seats"})
                assert said.status_code == 200, said.text
                item = said.json()
                assert (item["id"], item["asked_at"], item["status"]) == (asked["id"], asked["asked_at"], "answered")
                assert item["run_status"] == "running", item  # as GET /v1/runs/{id} says it: not interrupted
                wait_until(lambda: crew.count("asker", 2) == 1, "the asker took the answer where the run runs")
                wait_until(lambda: crew.count("holder", 1) == 2, "the held call asked again on B")
                crew.gate.set()
                done = wait_until(
                    lambda: (shown := on_b.get(f"/v1/runs/{run_id}").json())["status"] != "running" and shown,
                    "the run's end on B",
                )
                events = events_of(on_b.get(f"/v1/runs/{run_id}/events").text)
                assert _pending(on_b, run_id) == []
            assert b.stop() == 0
    finally:
        crew.gate.set()
    assert done["status"] == "done" and "the owner wants 12 seats" in done["final_text"], done
    (move,) = [data["data"] for _, kind, data in events if kind == "run_moved"]
    assert move["why"] == "lease expired" and move["from"] != move["to"], move
    people = [(kind, data["data"]["item"]) for _, kind, data in events if kind.startswith("person_")]
    assert {item for _, item in people} == {"q1"}, people  # nobody was asked anything else
    assert people.count(("person_answered", "q1")) == 1, people  # taken once
    (took,) = [data["data"] for _, kind, data in events if kind == "person_answered"]
    assert (took["answer"], took["by"], took["status"]) == ("12 seats", "http", "answered"), took
    assert events[-1][1] == "result" and events[-1][2]["status"] == "done", events[-1]
    assert crew.calls() == {
        ("lead", 1): 1,
        ("asker", 1): 1,  # finished on A: answered from the journal on B, not paid again
        ("holder", 1): 2,  # in flight at the kill: asked again on B
        ("asker", 2): 1,
        ("lead", 2): 1,
    }
