"""A workflow SIGKILLed mid-map, then ``teamrun resume`` in a new process: the fake provider's request log
shows that no call finished before the kill is paid again (the planner, the finished map items)."""

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


ITEMS = 6
FAST = 3
"""Items 0..2 answer at once; items 3..5 hang until the kill (while ``hanging`` is set)."""


def _team(tmp_path: Path, url: str) -> Path:
    path = tmp_path / "team.yaml"
    path.write_text(
        f"""\
version: 1
name: wf-resume
defaults: {{api_base: '{url}', api_key_env: TEAMRUN_TEST_KEY, num_retries: 0, request_timeout_s: 900}}
workflow:
  steps:
    - id: plan
      agent: planner
    - id: research
      map: steps.plan.output.items
      max_concurrency: {ITEMS}
      agent: researcher
    - agent: writer
      input: "{{{{ steps.research.output | join(' | ') }}}}"
agents:
  planner:
    model: openai/planner
    output_schema: {{type: object, properties: {{items: {{type: array, items: {{type: string}}}}}}, required: [items]}}
  researcher: {{model: openai/researcher}}
  writer: {{model: openai/writer}}
""",
        encoding="utf-8",
    )
    return path


def _task(request: dict[str, Any]) -> str:
    return next(m["content"] for m in request["messages"] if m["role"] == "user")


def _serve(server: FakeOpenAI, hanging: threading.Event) -> None:
    server.handler("planner", lambda request: text(json.dumps({"items": [f"item{i}" for i in range(ITEMS)]})))

    def researcher(request: dict[str, Any]) -> Reply:
        task = _task(request)
        slow = int(task.removeprefix("item")) >= FAST
        return text(f"notes on {task}", delay=600.0 if slow and hanging.is_set() else 0.0)

    server.handler("researcher", researcher)
    server.handler("writer", lambda request: text("report: " + _task(request)))


def _journaled(store: Path) -> int:
    engine = sa.create_engine(f"sqlite:///{store}")
    try:
        with engine.connect() as conn:
            return int(conn.execute(sa.text("SELECT count(*) FROM journal WHERE kind = 'model'")).scalar_one())
    except sa.exc.OperationalError:
        return 0
    finally:
        engine.dispose()


def test_a_workflow_killed_mid_map_resumes_without_paying_finished_calls_again(
    tmp_path: Path, fake_openai: FakeOpenAI
) -> None:
    hanging = threading.Event()
    store = tmp_path / "runs.db"
    server = fake_openai
    _serve(server, hanging)
    team = _team(tmp_path, server.url)
    whole = teamrun("execute", str(team), "-i", "go", "--json", "--progress", "none", env=_env())
    assert whole.returncode == 0, whole.stderr
    expected = json.loads(whole.stdout)["final_text"]
    assert expected == "report: " + " | ".join(f"notes on item{i}" for i in range(ITEMS))
    uninterrupted = len(server.requests())
    assert uninterrupted == 1 + ITEMS + 1
    server.log.clear()

    hanging.set()

    def ready() -> bool:
        log = server.requests()
        done = [r for r in log if r.status == 200 and r.end]
        hung = [r for r in log if r.model == "researcher" and r.end == 0.0]
        return len(done) == 1 + FAST and len(hung) == ITEMS - FAST and _journaled(store) == len(done)

    run = killed_run(team, str(store), ready, where=lambda: f"{len(server.requests())} requests", env=_env())

    hanging.clear()
    server.log.clear()
    resumed = resume(run["run_id"], str(store), env=_env())
    assert resumed.returncode == 0, resumed.stderr
    second = server.requests()

    # only the items in flight at the kill and the step after the map were asked again
    assert sorted((r.model, _task(r.request)) for r in second if r.model == "researcher") == [
        ("researcher", f"item{i}") for i in range(FAST, ITEMS)
    ]
    assert sorted(r.model for r in second) == ["researcher"] * (ITEMS - FAST) + ["writer"]
    result = json.loads(resumed.stdout)
    assert result["status"] == "done" and result["final_text"] == expected
