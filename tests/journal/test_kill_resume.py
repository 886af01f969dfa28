"""Done-when of issue 14 (durable runs): a 40-worker fan-out SIGKILLed mid-run, then resumed in a new process.

Against the local fake server, on SQLite and on PostgreSQL. The server's request log shows that the calls
finished before the kill are not made again, that the completed model calls of both processes add up to an
uninterrupted run's, and the final answer is the same.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import sqlalchemy as sa

from tests.cli_processes import child_env, killed_run, resume, teamrun
from tests.fakeserver import FakeOpenAI, Reply, text, tool_calls


def _env() -> dict[str, str]:
    return child_env(TEAMRUN_TEST_KEY="sk-test-journal")


WORKERS = 40
FAST = 20
"""w1..w20 answer at once; w21..w40 call their tool at once, then their final reply hangs until the kill."""
HUNG_S = 600.0


def _team(tmp_path: Path, url: str) -> Path:
    (tmp_path / "facts.py").write_text(
        'def lookup(query: str) -> str:\n    "Look up a fact."\n    return f"fact about {query}"\n', encoding="utf-8"
    )
    names = [f"w{i}" for i in range(1, WORKERS + 1)]
    lines = [
        "version: 1",
        "name: fan40",
        "supervisor: lead",
        f"defaults: {{api_base: '{url}', api_key_env: TEAMRUN_TEST_KEY, num_retries: 0, request_timeout_s: 900}}",
        "tools:",
        "  lookup: {python: 'facts:lookup'}",
        "agents:",
        f"  lead: {{model: openai/lead, delegates_to: [{', '.join(names)}], "
        f"delegation: {{max_concurrency: {WORKERS}}}, budget: {{max_delegations: {WORKERS}}}}}",
    ]
    lines += [f"  {n}: {{model: openai/{n}, description: Looks up one fact., tools: [lookup]}}" for n in names]
    path = tmp_path / "team.yaml"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _serve(server: FakeOpenAI, hanging: threading.Event) -> None:
    """Stateless handlers: a reply depends only on the request, so a resumed run gets the same answers."""

    def lead(request: dict[str, Any]) -> Reply:
        results = [m for m in request["messages"] if m["role"] == "tool"]
        if not results:
            return tool_calls(*((f"ask_w{i}", {"task": f"fact {i}"}) for i in range(1, WORKERS + 1)))
        answers = sorted(json.loads(m["content"])["response"] for m in results)
        return text("final: " + "; ".join(answers))

    def worker(name: str) -> Callable[[dict[str, Any]], Reply]:
        slow = int(name[1:]) > FAST

        def answer(request: dict[str, Any]) -> Reply:
            results = [m for m in request["messages"] if m["role"] == "tool"]
            if not results:
                return tool_calls(("lookup", {"query": name}))
            return text(f"{name}: {results[-1]['content']}", delay=HUNG_S if slow and hanging.is_set() else 0.0)

        return answer

    server.handler("lead", lead)
    for i in range(1, WORKERS + 1):
        server.handler(f"w{i}", worker(f"w{i}"))


def _finals(server: FakeOpenAI, records: list[Any] | None = None) -> list[str]:
    """Workers whose final reply was delivered (a request carrying a tool result, answered 200)."""
    records = server.requests() if records is None else records
    return sorted(
        r.model
        for r in records
        if r.model != "lead" and r.status == 200 and r.end and any(m["role"] == "tool" for m in r.request["messages"])
    )


def _journaled_replies(store_url: str) -> int:
    engine = sa.create_engine(store_url.replace("postgresql://", "postgresql+psycopg://", 1))
    try:
        with engine.connect() as conn:
            return int(conn.execute(sa.text("SELECT count(*) FROM journal WHERE kind = 'model'")).scalar_one())
    except sa.exc.OperationalError:
        return 0  # not created yet
    except sa.exc.ProgrammingError:
        return 0
    finally:
        engine.dispose()


def test_a_killed_fan_out_resumes_without_repeating_finished_calls(
    tmp_path: Path, store_url: str, fake_openai: FakeOpenAI
) -> None:
    hanging = threading.Event()
    server = fake_openai
    _serve(server, hanging)
    team = _team(tmp_path, server.url)

    # the uninterrupted run, for comparison (no store: nothing is written)
    whole = teamrun("execute", str(team), "-i", "go", "--json", "--progress", "none", env=_env())
    assert whole.returncode == 0, whole.stderr
    uninterrupted = server.requests()
    assert len(uninterrupted) == 2 + 2 * WORKERS and all(r.status == 200 for r in uninterrupted)
    expected = json.loads(whole.stdout)["final_text"]
    server.log.clear()

    # the journaled run, killed once the fast workers have answered and the slow ones' last calls hang
    hanging.set()

    def ready() -> bool:
        log = server.requests()
        hung = [r for r in log if r.model != "lead" and r.end == 0.0]
        done = [r for r in log if r.status == 200 and r.end]
        return (
            len(_finals(server)) == FAST and len(hung) == WORKERS - FAST and _journaled_replies(store_url) == len(done)
        )

    run = killed_run(team, store_url, ready, where=lambda: f"{len(server.requests())} requests", env=_env())
    first = server.requests()
    finished_before = _finals(server, first)
    assert len(finished_before) == FAST >= 10
    assert run["stored_status"] == "running"

    # resumed in a new process
    hanging.clear()
    server.log.clear()
    resumed = resume(run["run_id"], store_url, env=_env())
    assert resumed.returncode == 0, resumed.stderr
    second = server.requests()

    assert {r.model for r in second} & set(finished_before) == set(), "a finished worker was asked again"
    completed_first = [r for r in first if r.status == 200 and r.end]
    assert len(completed_first) + len(second) == len(uninterrupted)
    # only the hung final replies and the supervisor's last call were made again
    assert sorted(r.model for r in second) == sorted([f"w{i}" for i in range(FAST + 1, WORKERS + 1)] + ["lead"])
    result = json.loads(resumed.stdout)
    assert result["status"] == "done" and result["run_id"] == run["run_id"]
    assert result["final_text"] == expected
    shown = teamrun("runs", "show", run["run_id"], "--store", store_url, "--json", env=_env())
    record = json.loads(shown.stdout)
    assert record["status"] == "done" and record["attempts"] == 2
    assert record["replayed_calls"] == 1 + FAST * 2 + (WORKERS - FAST)
    assert record["usage"]["requests"] == len(uninterrupted)  # replayed calls count toward the run's usage
