"""Issue 22, item 13: a resume holds its run exclusively; a second one at the same time refuses in one line.

The lock is the run's row (see :meth:`teamrun.store.journal.StoreJournal.claim_run`): taken by a
compare-and-set, free again once the holder's process is gone. Tested on SQLite and PostgreSQL.
"""

from __future__ import annotations

import json
import os
import subprocess
import threading
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from teamrun.engine.durability.resume import open_resume
from teamrun.errors import UsageError
from teamrun.store import open_store
from teamrun.store.journal import StoreJournal
from teamrun.store.records import JournaledRun
from tests.cli_processes import child_env, killed_run, teamrun_argv
from tests.fakeserver import FakeOpenAI, Reply, text
from tests.killed_store import DEAD_PID


def _env() -> dict[str, str]:
    return child_env(TEAMRUN_TEST_KEY="sk-test-journal")


def _killed_run(store_url: str, run_id: str = "killed1") -> StoreJournal:
    backend = StoreJournal(open_store(store_url))
    backend.save_run(JournaledRun(run_id=run_id, team="t", team_file="/nowhere/team.yaml", input="go", pid=DEAD_PID))
    return backend


def test_a_run_taken_by_one_resume_is_refused_to_the_next(store_url: str) -> None:
    backend = _killed_run(store_url)
    assert backend.get_run("killed1").shown_status() == "interrupted"  # type: ignore[union-attr]

    first = open_resume(backend, "killed1")
    assert first.record.attempts == 2
    with pytest.raises(UsageError) as refused:
        open_resume(StoreJournal(open_store(store_url)), "killed1")  # another backend, as another process has
    message = str(refused.value)
    assert message.startswith("run killed1 is still running (pid ") and "\n" not in message
    assert backend.get_run("killed1").attempts == 2  # type: ignore[union-attr]


def test_of_two_resumes_that_read_the_run_free_at_once_exactly_one_takes_it(store_url: str) -> None:
    _killed_run(store_url)
    backends = [StoreJournal(open_store(store_url)) for _ in range(2)]
    records = [b.get_run("killed1") for b in backends]
    assert all(r is not None and r.shown_status() == "interrupted" for r in records)
    for record in records:  # both read it free; each now takes it for its own attempt
        assert record is not None
        record.attempts += 1
        record.pid = os.getpid()
    taken = [backend.claim_run(record) for backend, record in zip(backends, records, strict=True)]  # type: ignore[arg-type]
    assert sorted(taken) == [False, True]


def test_a_lock_whose_holder_died_is_free(store_url: str) -> None:
    backend = _killed_run(store_url)
    open_resume(backend, "killed1")
    engine = sa.create_engine(store_url.replace("postgresql://", "postgresql+psycopg://", 1))
    with engine.begin() as conn:  # the resuming process is killed in turn
        meta = conn.execute(sa.text("SELECT meta FROM runs WHERE id = 'killed1'")).scalar_one()
        meta = json.loads(meta) if isinstance(meta, str) else meta
        meta["pid"] = DEAD_PID
        conn.execute(sa.text("UPDATE runs SET meta = :meta WHERE id = 'killed1'"), {"meta": json.dumps(meta)})
    engine.dispose()
    assert open_resume(StoreJournal(open_store(store_url)), "killed1").record.attempts == 3


# -- two `teamrun resume` processes started at once ----------------------------------------------------------
WORKERS = 4


def _team(tmp_path: Path, url: str) -> Path:
    names = [f"w{i}" for i in range(1, WORKERS + 1)]
    lines = [
        "version: 1",
        "name: pair",
        "supervisor: lead",
        f"defaults: {{api_base: '{url}', api_key_env: TEAMRUN_TEST_KEY, num_retries: 0, request_timeout_s: 900}}",
        "agents:",
        f"  lead: {{model: openai/lead, delegates_to: [{', '.join(names)}], "
        f"delegation: {{max_concurrency: {WORKERS}}}}}",
    ]
    lines += [f"  {n}: {{model: openai/{n}, description: Answers one question.}}" for n in names]
    path = tmp_path / "team.yaml"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_two_resumes_started_at_once_run_once(tmp_path: Path, store_url: str, fake_openai: FakeOpenAI) -> None:
    hang = threading.Event()
    hang.set()

    def lead(request: dict[str, Any]) -> Reply:
        from tests.fakeserver import tool_calls

        results = [m for m in request["messages"] if m["role"] == "tool"]
        if not results:
            return tool_calls(*((f"ask_w{i}", {"task": f"q{i}"}) for i in range(1, WORKERS + 1)))
        return text("final: " + "; ".join(sorted(json.loads(m["content"])["response"] for m in results)))

    def worker(name: str) -> Any:
        return lambda request: text(f"{name} answers", delay=600.0 if hang.is_set() else 0.3)

    server = fake_openai
    server.handler("lead", lead)
    for i in range(1, WORKERS + 1):
        server.handler(f"w{i}", worker(f"w{i}"))
    team = _team(tmp_path, server.url)
    run = killed_run(team, store_url, lambda: len(server.requests()) >= 1 + WORKERS, where=server.requests, env=_env())
    assert len(server.requests()) == 1 + WORKERS
    hang.clear()
    backend = StoreJournal(open_store(store_url))
    server.log.clear()

    resumes = [
        subprocess.Popen(
            teamrun_argv("resume", run["run_id"], "--store", store_url, "--progress", "none"),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=_env(),
        )
        for _ in range(2)
    ]
    outcomes = [(p.wait(timeout=600), *p.communicate()) for p in resumes]

    codes = sorted(code for code, _, _ in outcomes)
    assert codes == [0, 2], outcomes
    (refused,) = [err for code, _, err in outcomes if code == 2]
    assert len(refused.strip().splitlines()) == 1 and f"run {run['run_id']} is" in refused, refused
    assert sorted(r.model for r in server.requests()) == sorted([f"w{i}" for i in range(1, WORKERS + 1)] + ["lead"])
    done = backend.get_run(run["run_id"])
    assert done is not None and done.status == "done" and done.attempts == 2
