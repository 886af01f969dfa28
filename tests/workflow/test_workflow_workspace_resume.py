"""A workflow that reads and writes the workspace, SIGKILLed mid-run, then ``teamrun resume`` in a new process.

A step's ``write:`` applied before the kill is not applied again (the appended item is there once, its event is
``replayed``), and a step whose template read an entry it then wrote is rendered from the value it read, not from
the workspace the killed attempt left: its call is answered from the journal (the fake's request log shows only
the call in flight at the kill), and the run ends with the same workspace as an uninterrupted one. (That a
replayed write's event says ``replayed`` is checked in-process, in ``test_workflow_workspace_journal.py``.)
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import sqlalchemy as sa

from tests.cli_processes import child_env, killed_run, resume, teamrun
from tests.fakeserver import FakeOpenAI, Reply, text


def _env() -> dict[str, str]:
    return child_env(TEAMRUN_TEST_KEY="sk-test-workflow")


def _team(tmp_path: Path, url: str) -> Path:
    path = tmp_path / "team.yaml"
    path.write_text(
        f"""\
version: 1
name: wf-ws-resume
defaults: {{api_base: '{url}', api_key_env: TEAMRUN_TEST_KEY, num_retries: 0, request_timeout_s: 900}}
workspace:
  entries:
    findings: {{schema: {{type: array, items: {{type: string}}}}, merge: append}}
    draft: {{schema: {{type: string}}}}
workflow:
  steps:
    - agent: collector
      write: findings
    - id: polish
      loop:
        max_iterations: 3
        until: [{{contains: final}}]
        steps:
          - agent: writer
            input: "previous: {{{{ workspace.draft or 'none' }}}}; findings: {{{{ workspace.findings | join(', ') }}}}"
            write: draft
  output: "{{{{ workspace.draft }}}}"
agents:
  collector: {{model: openai/collector}}
  writer: {{model: openai/writer}}
""",
        encoding="utf-8",
    )
    return path


def _task(request: dict[str, Any]) -> str:
    return next(m["content"] for m in request["messages"] if m["role"] == "user")


def _serve(server: FakeOpenAI, hanging: threading.Event) -> None:
    server.handler("collector", lambda request: text("Rust is fast"))

    def writer(request: dict[str, Any]) -> Reply:
        task = _task(request)
        if task.startswith("previous: none"):
            return text("draft one")
        return text("final draft", delay=600.0 if hanging.is_set() else 0.0)

    server.handler("writer", writer)


def _journaled(store: Path, kind: str) -> int:
    engine = sa.create_engine(f"sqlite:///{store}")
    try:
        with engine.connect() as conn:
            query = sa.text("SELECT count(*) FROM journal WHERE kind = :kind")
            return int(conn.execute(query, {"kind": kind}).scalar_one())
    except sa.exc.OperationalError:
        return 0
    finally:
        engine.dispose()


def test_a_killed_workflow_resumes_without_writing_twice_or_reading_what_it_wrote(
    tmp_path: Path, fake_openai: FakeOpenAI
) -> None:
    hanging = threading.Event()
    store = tmp_path / "runs.db"
    server = fake_openai
    _serve(server, hanging)
    team = _team(tmp_path, server.url)
    whole = teamrun("execute", str(team), "-i", "go", "--json", "--progress", "none", env=_env())
    assert whole.returncode == 0, whole.stderr
    uninterrupted = json.loads(whole.stdout)
    assert uninterrupted["final_text"] == "final draft"
    assert uninterrupted["workspace"]["entries"]["findings"]["value"] == ["Rust is fast"]
    assert [_task(r.request) for r in server.requests("writer")] == [
        "previous: none; findings: Rust is fast",
        "previous: draft one; findings: Rust is fast",
    ]
    server.log.clear()

    hanging.set()

    def ready() -> bool:  # the collector's and the first draft's writes are journaled; draft two hangs
        hung = [r for r in server.requests("writer") if r.end == 0.0]
        return len(hung) == 1 and _journaled(store, "workspace_write") == 2

    run = killed_run(team, str(store), ready, where=lambda: f"{len(server.requests())} requests", env=_env())

    hanging.clear()
    server.log.clear()
    resumed = resume(run["run_id"], str(store), env=_env())
    assert resumed.returncode == 0, resumed.stderr
    result = json.loads(resumed.stdout)

    # only the call in flight at the kill was asked again: iteration 1 was rendered from the value it read
    # ("none"), not from the draft it wrote, so its request matched the journal
    assert [(r.model, _task(r.request)) for r in server.requests()] == [
        ("writer", "previous: draft one; findings: Rust is fast")
    ]
    assert result["status"] == "done" and result["final_text"] == "final draft"
    # the collector's item once, the same versions: findings 1, the first draft 2 (restored), the last 3
    assert result["workspace"] == uninterrupted["workspace"]
    assert result["workspace"]["entries"]["findings"] == {
        "version": 1,
        "value": ["Rust is fast"],
        "written_by": ["workflow"],
    }
    assert result["workspace"]["entries"]["draft"]["version"] == 3
