"""Done-when of issue 34 (the workspace, first half), end to end through the CLI against the local fake provider.

Three workers write one `replace` entry at once: exactly one write applies per version, the others are refused
and succeed after re-reading. Three workers append 50 items each: all 150 are kept. A journaled run SIGKILLed
mid-run, then resumed: the same final workspace as an uninterrupted run, no finished call paid again (the fake's
request log) and no write applied twice.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import sqlalchemy as sa

from tests.cli_processes import killed_run, teamrun
from tests.fakeserver import FakeOpenAI, Reply, text, tool_calls
from tests.workspace import policies
from tests.workspace.conftest import WORKERS, write_team

HUNG_S = 600.0
DEFAULTS = "defaults: {{api_base: '{url}', api_key_env: TEAMRUN_TEST_KEY, num_retries: 0, request_timeout_s: 900}}"


def _reply(answer: list[policies.Call] | str, delay: float | None = None) -> Reply:
    return text(answer, delay=delay) if isinstance(answer, str) else tool_calls(*answer, delay=delay)


def _serve(server: FakeOpenAI, worker: Callable[..., Any], hang: Callable[[str, int], bool] | None = None) -> None:
    """Stateless handlers (a reply depends only on the request), so a resumed run gets the same answers."""
    server.handler("lead", lambda request: _reply(policies.lead(WORKERS, request["messages"])))

    def answer(name: str) -> Callable[[dict[str, Any]], Reply]:
        def reply(request: dict[str, Any]) -> Reply:
            results = sum(1 for m in request["messages"] if m["role"] == "tool")
            delay = HUNG_S if hang is not None and hang(name, results) else None
            return _reply(worker(name, request["messages"]), delay)

        return reply

    for name in WORKERS:
        server.handler(name, answer(name))


def _execute(team: Path, *extra: str) -> dict[str, Any]:
    done = teamrun("execute", str(team), "-i", "go", "--json", "--progress", "none", *extra)
    assert done.returncode == 0, done.stderr
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def _writes(trace: Path) -> list[dict[str, Any]]:
    lines = [json.loads(line) for line in trace.read_text(encoding="utf-8").splitlines()]
    return [{**r["data"], "agent": r["agent_path"][-1]} for r in lines if r["kind"] == "workspace_write"]


def test_three_workers_writing_one_replace_entry_one_applies_per_version(
    tmp_path: Path, fake_openai: FakeOpenAI
) -> None:
    all_read = threading.Barrier(len(WORKERS), timeout=240)  # a guard against a hang, not a timing assertion

    def at_once(name: str, messages: list[dict[str, Any]]) -> list[policies.Call] | str:
        """Every worker's first write waits until all three have read version 0: they write at once."""
        answer = policies.replace_worker(name, messages)
        if not isinstance(answer, str) and answer[0][0] == "workspace_write_plan" and answer[0][1]["version"] == 0:
            all_read.wait()
        return answer

    _serve(fake_openai, at_once)
    team = write_team(tmp_path, DEFAULTS.format(url=fake_openai.url))
    result = _execute(team, "--trace", str(tmp_path / "run.jsonl"))

    assert result["status"] == "done"
    writes = _writes(tmp_path / "run.jsonl")
    applied = [w for w in writes if w["status"] == "applied"]
    refused = [w for w in writes if w["status"] == "refused"]
    assert sorted(w["version_after"] for w in applied) == [1, 2, 3]  # exactly one applies per version
    assert sorted(w["agent"] for w in applied) == sorted(WORKERS)  # every worker succeeded in the end
    assert len(refused) >= 2 and all(w["reason"] == "stale" for w in refused)  # two lost the first race
    for worker in WORKERS:  # a refused worker read again before it wrote again
        asked = [r for r in fake_openai.requests(worker)]
        assert asked[-1].status == 200
    plan = result["workspace"]["entries"]["plan"]
    assert plan["version"] == 3 and plan["value"] in {f"plan by {w}" for w in WORKERS}
    # the supervisor saw the index, never the values: in the runner's context, the request's last message
    lead_request = fake_openai.requests("lead")[-1].request["messages"]
    context = str(lead_request[-1]["content"])
    assert context.startswith("Context from teamrun") and lead_request[-1]["role"] == "user"
    assert "- plan (replace, version 3, written by" in context and "plan by" not in context
    assert "- plan (" not in str(lead_request[0]["content"])  # the system prompt stays as it was


def test_three_workers_appending_fifty_items_each_keep_all_150(tmp_path: Path, fake_openai: FakeOpenAI) -> None:
    _serve(fake_openai, policies.append_worker)
    team = write_team(tmp_path, DEFAULTS.format(url=fake_openai.url))
    result = _execute(team)

    assert result["status"] == "done"
    items = result["workspace"]["entries"]["items"]["value"]
    assert len(items) == 150 and len(set(items)) == 150
    assert result["workspace"]["entries"]["count"]["value"] == 150


def _journal_counts(store_url: str) -> tuple[int, int]:
    """Journaled model replies, and the workers' journaled tool results."""
    engine = sa.create_engine(store_url)
    try:
        with engine.connect() as conn:
            model = conn.execute(sa.text("SELECT count(*) FROM journal WHERE kind = 'model'")).scalar_one()
            tools = conn.execute(
                sa.text(
                    "SELECT count(*) FROM journal WHERE kind IN ('tool', 'workspace_write') AND agent_path <> 'lead'"
                )
            ).scalar_one()
            return int(model), int(tools)
    except sa.exc.OperationalError:
        return 0, 0  # not created yet
    finally:
        engine.dispose()


def _call_key(record: Any) -> tuple[str, int]:
    """A worker's call is named by who asked and how many tool results it carried (its place in the script)."""
    return record.model, sum(1 for m in record.request["messages"] if m["role"] == "tool")


def _final(workspace: dict[str, Any]) -> dict[str, Any]:
    """The workspace's content (an appended list in any order: concurrent writers interleave differently)."""
    entries = workspace["entries"]
    return {
        "version": workspace["version"],
        "items": sorted(entries["items"]["value"]),
        "count": entries["count"]["value"],
        "writers": {name: sorted(e["written_by"]) for name, e in entries.items()},
    }


def test_a_killed_run_resumes_to_the_same_workspace_without_paying_or_writing_twice(
    tmp_path: Path, fake_openai: FakeOpenAI
) -> None:
    server, hanging = fake_openai, threading.Event()
    # w3 hangs on its call after two batches (22 tool results: 2 x (10 items + 1 count)) while `hanging` is set
    _serve(
        server, policies.append_worker, hang=lambda name, results: name == "w3" and results == 22 and hanging.is_set()
    )
    team = write_team(tmp_path, DEFAULTS.format(url=server.url))
    store_url = f"sqlite:///{tmp_path / 'teamrun.db'}"

    uninterrupted = _execute(team)
    whole = server.requests()
    assert len(whole) == 2 + len(WORKERS) * 6 and all(r.status == 200 for r in whole)
    server.log.clear()

    hanging.set()

    def ready() -> bool:
        log = server.requests()
        done = [r for r in log if r.status == 200 and r.end]
        hung = [r for r in log if r.model == "w3" and r.end == 0.0]
        latest: dict[str, int] = {}
        for r in log:
            latest[r.model] = max(latest.get(r.model, 0), _call_key(r)[1])
        finished = [w for w in ("w1", "w2") if latest.get(w) == 55]
        return (
            len(finished) == 2
            and len(hung) == 1
            and _journal_counts(store_url) == (len(done), sum(latest.get(w, 0) for w in WORKERS))
        )

    run = killed_run(team, store_url, ready, where=lambda: f"{len(server.requests())} requests")
    first = [r for r in server.requests() if r.status == 200 and r.end]

    hanging.clear()
    server.log.clear()
    trace = tmp_path / "resumed.jsonl"
    resumed = teamrun(  # `teamrun resume` with a trace
        "execute", str(team), "--resume", run["run_id"], "--store", store_url, "--json", "--progress", "none",
        "--trace", str(trace),
    )  # fmt: skip
    assert resumed.returncode == 0, resumed.stderr
    second = server.requests()
    result = json.loads(resumed.stdout)

    assert result["status"] == "done"
    assert {_call_key(r) for r in first} & {_call_key(r) for r in second} == set(), "a finished call was paid again"
    assert len(first) + len(second) == len(whole)
    assert _final(result["workspace"]) == _final(uninterrupted["workspace"])
    items = result["workspace"]["entries"]["items"]["value"]
    assert len(items) == len(set(items)) == 150  # no write applied twice
    live = [w for w in _writes(trace) if not w.get("replayed")]
    assert len(live) == 3 * (policies.BATCH + 1)  # only w3's last three batches were written by the resume
