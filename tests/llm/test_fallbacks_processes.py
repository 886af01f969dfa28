"""Issue 45's done-when for fallbacks, through real processes against two fake providers that count requests:

* a run SIGKILLed after a call fell back, then ``teamrun resume``: the finished calls are not paid again, and the
  calls after the kill go where the journal says the run was answered (docs/models.md, "Resume and replay": the
  model that failed in the journaled call is skipped for the rest of its cool-down, counted from that call);
* the circuit breaker of a ``teamrun serve`` process, shared by 20 concurrent served runs: once open, no request
  goes to the failing provider during its cool-down.
"""

from __future__ import annotations

import json
import sqlite3
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest

from teamrun.llm.breaker import DEFAULT_COOL_DOWN_S
from tests.cli_processes import child_env, killed_run, resume, serving
from tests.fakeserver import FakeOpenAI, Reply, http_error, text, tool_calls
from tests.serve.conftest import TOKEN

AUTH = {"Authorization": f"Bearer {TOKEN}"}
HUNG_S = 600.0


@pytest.fixture
def second(second_openai: FakeOpenAI) -> FakeOpenAI:
    """The second provider (the fallback's): tests/conftest.py's ``second_openai``."""
    return second_openai


def _team(tmp_path: Path, first: FakeOpenAI, second: FakeOpenAI) -> Path:
    """A lead delegating to a writer, both on ``openai/primary`` at ``first`` falling back to ``openai/backup`` at
    ``second`` (no retries: each failure falls back at once)."""
    path = tmp_path / "falls.yaml"
    path.write_text(
        "\n".join(
            [
                "version: 1",
                "name: falls",
                "supervisor: lead",
                "defaults:",
                "  model: openai/primary",
                f"  api_base: {first.url}",
                "  api_key_env: TEAMRUN_TEST_KEY",
                "  num_retries: 0",
                "  request_timeout_s: 900",
                "  fallbacks:",
                f"    - {{model: openai/backup, api_base: '{second.url}', api_key_env: TEAMRUN_TEST_KEY, "
                "num_retries: 0, request_timeout_s: 900}",
                "agents:",
                "  lead: {instructions: Lead the work., delegates_to: [writer]}",
                "  writer: {instructions: Write a haiku., description: Writes haiku.}",
                "",
            ]
        ),
        encoding="utf-8",
    )
    return path


def _who(request: dict[str, Any]) -> str:
    """Which agent sent ``request`` (its system prompt), and at which of its calls: ``lead 1``, ``writer 1``..."""
    system = str(request["messages"][0]["content"])
    agent = "lead" if "Lead the work." in system else "writer"
    return f"{agent} {sum(1 for m in request['messages'] if m['role'] == 'assistant') + 1}"


def _answer(request: dict[str, Any], *, by: str, hang: bool = False) -> Reply:
    """The same answers from either provider (stateless: a resumed run gets what the first process would have)."""
    match _who(request):
        case "lead 1":
            return tool_calls(("ask_writer", {"task": "a haiku"}))
        case "writer 1":
            return text(f"an old pond ({by})", delay=HUNG_S if hang else 0.0)
        case _:
            written = json.loads(request["messages"][-1]["content"])["response"]
            return text(f"the writer wrote: {written}")


def _journaled_replies(db: Path) -> int:
    try:
        with sqlite3.connect(db) as conn:
            return int(conn.execute("SELECT count(*) FROM journal WHERE kind = 'model'").fetchone()[0])
    except sqlite3.OperationalError:
        return 0  # not created yet


def test_a_run_killed_after_a_fallback_resumes_without_paying_again_and_keeps_off_the_failed_model(
    tmp_path: Path, fake_openai: FakeOpenAI, second: FakeOpenAI
) -> None:
    first = fake_openai
    hanging = threading.Event()
    hanging.set()
    first.handler("primary", lambda _request: http_error(500))
    second.handler("backup", lambda r: _answer(r, by="backup", hang=hanging.is_set() and _who(r) == "writer 1"))
    db = tmp_path / "teamrun.db"
    store = f"sqlite:///{db}"
    env = child_env(TEAMRUN_TEST_KEY="sk-test-fallbacks")

    def writer_waits() -> bool:  # the lead's call fell back and is journaled; the writer's hangs on the fallback
        asked = [_who(r.request) for r in second.requests("backup")]
        return asked == ["lead 1", "writer 1"] and _journaled_replies(db) == 1

    run = killed_run(
        _team(tmp_path, first, second),
        store,
        writer_waits,
        where=lambda: (first.requests(), second.requests(), _journaled_replies(db)),
        env=env,
    )
    before = {"first": len(first.requests()), "second": len(second.requests())}
    assert [(_who(r.request), r.status) for r in first.requests()] == [("lead 1", 500), ("writer 1", 500)]
    journaled = second.requests("backup")[0]  # the lead's call, answered by the fallback after the first failed

    hanging.clear()
    resumed = resume(run["run_id"], store, env=env)  # a new process: its breakers know only what the journal says

    assert resumed.returncode == 0, resumed.stderr
    result = json.loads(resumed.stdout)
    assert result["status"] == "done", result
    assert result["final_text"] == "the writer wrote: an old pond (backup)"
    after_first = first.requests()[before["first"] :]
    after_second = [_who(r.request) for r in second.requests()[before["second"] :]]
    # the lead's first call, answered by the fallback before the kill, is not asked again of either provider; the
    # calls the journal did not hold go where it says the run was answered: the first model failed in the journaled
    # call, so it is skipped for the rest of its cool-down counted from that call (docs/models.md, "Resume and
    # replay") — not one request reaches it before then (a machine slow enough to pass the cool-down lets it be
    # asked again, and it fails again)
    assert [r for r in after_first if r.start < journaled.end + DEFAULT_COOL_DOWN_S] == []
    assert after_second == ["writer 1", "lead 2"]
    assert "openai/primary" not in result["models"]
    assert result["models"]["openai/backup"]["calls"] == 3  # the journaled call, counted under who answered it
    assert result["models"]["openai/backup"]["fallback_calls"] == 3


def _solo(tmp_path: Path, first: FakeOpenAI, second: FakeOpenAI) -> Path:
    path = tmp_path / "solo.yaml"
    path.write_text(
        "\n".join(
            [
                "version: 1",
                "name: solo",
                "supervisor: solo",
                "agents:",
                "  solo:",
                "    model: openai/primary",
                f"    api_base: {first.url}",
                "    api_key_env: TEAMRUN_TEST_KEY",
                "    num_retries: 0",
                "    fallbacks:",
                f"      - {{model: openai/backup, api_base: '{second.url}',",
                "         api_key_env: TEAMRUN_TEST_KEY, num_retries: 0}",
                "",
            ]
        ),
        encoding="utf-8",
    )
    return path


def _served_run(client: httpx.Client, task: str) -> dict[str, Any]:
    """POST a run, read its events to its end, and return its record."""
    run_id = client.post("/v1/runs", json={"team": "solo", "input": task}).json()["id"]
    client.get(f"/v1/runs/{run_id}/events")  # until the run is over
    record: dict[str, Any] = client.get(f"/v1/runs/{run_id}").json()
    return record


def test_the_breaker_of_a_served_process_keeps_20_concurrent_runs_off_the_failing_provider(
    tmp_path: Path, fake_openai: FakeOpenAI, second: FakeOpenAI
) -> None:
    first = fake_openai
    first.handler("primary", lambda _request: http_error(500))
    second.handler("backup", lambda _request: text("from backup"))
    team = _solo(tmp_path, first, second)
    env = child_env(TEAMRUN_API_TOKENS=TOKEN, TEAMRUN_TEST_KEY="sk-test-breaker")
    with (
        serving(str(team), env=env) as server,
        httpx.Client(base_url=server.url, headers=AUTH, timeout=300) as client,
    ):
        opening = [_served_run(client, f"question {i}") for i in range(3)]  # one at a time: three failures open it
        assert [r["status"] for r in opening] == ["done"] * 3, opening
        assert len(first.requests("primary")) == 3

        with ThreadPoolExecutor(20) as pool:  # 20 runs at once, in the cool-down
            during = list(pool.map(lambda i: _served_run(client, f"concurrent {i}"), range(20)))

    assert [r["status"] for r in during] == ["done"] * 20, during
    assert {r["result"]["final_text"] for r in during} == {"from backup"}, during[0]
    assert len(second.requests("backup")) == 23
    # The breaker opened once the server had answered the third failure, so its 30 s cool-down lasts at least until
    # 30 s after that answer: no request of the 20 runs reached the first provider before then. (A machine slow
    # enough to pass the cool-down lets one probe out, which fails and opens it again: at most one.)
    third, *later = first.requests("primary")[2:]
    assert [r for r in later if r.start < third.end + DEFAULT_COOL_DOWN_S] == []
    assert len(later) <= 1
