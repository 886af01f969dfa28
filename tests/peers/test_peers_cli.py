"""Done-when of issue 34 (peers around a board), end to end through the CLI against the local fake provider.

Three peers and twenty tasks: each task is completed exactly once (the completions counted at the fake). A peer
whose model call fails, a peer cancelled mid-task by its own timeout, and a peer that stalls past its lease each
lose their task to another peer. A board whose tasks keep spawning tasks stops at `limits.max_tasks` (exit 3).
Peers that all wait on a task that can never be done stop as a deadlock. A journaled run SIGKILLed mid-run, then
resumed: no task completed twice and no finished call paid again.
"""

from __future__ import annotations

import json
import signal
import subprocess
import threading
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import sqlalchemy as sa

from tests.cli_processes import child_env, killed_run, listed_run, stop_when, teamrun_argv
from tests.fakeserver import FakeOpenAI, Reply, http_error, text, tool_calls
from tests.peers import policies
from tests.peers.conftest import PEERS, write_team
from tests.waiting import wait_until

HUNG_S = 600.0
Fault = Callable[[str, list[dict[str, Any]]], Reply | None]
"""A reply that replaces the policy's for one request (``None``: the policy answers)."""


class Completions:
    """The fake's count of the replies that complete each task (``board_complete``), across runs."""

    def __init__(self) -> None:
        self.counts: Counter[str] = Counter()
        self._lock = threading.Lock()

    def add(self, calls: list[policies.Call]) -> None:
        with self._lock:
            self.counts.update(policies.completes(calls))


def _serve(server: FakeOpenAI, fault: Fault | None = None) -> Completions:
    counted = Completions()

    def answer(name: str) -> Callable[[dict[str, Any]], Reply]:
        def reply(request: dict[str, Any]) -> Reply:
            messages = request["messages"]
            forced = fault(name, messages) if fault is not None else None
            if forced is not None:
                return forced
            move = policies.peer(name, messages)
            if isinstance(move, str):
                return text(move)
            counted.add(move)
            return tool_calls(*move)

        return reply

    for name in PEERS:
        server.handler(name, answer(name))
    return counted


def _execute(team: Path, task: str, *extra: str, code: int = 0) -> dict[str, Any]:
    done = subprocess.run(
        teamrun_argv("execute", str(team), "-i", task, "--json", "--progress", "none", *extra),
        capture_output=True,
        text=True,
        env=child_env(),
        timeout=600,
    )
    assert done.returncode == code, done.stderr
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def _ops(trace: Path) -> list[dict[str, Any]]:
    lines = [json.loads(line) for line in trace.read_text(encoding="utf-8").splitlines()]
    return [{**r["data"], "agent": r["agent_path"][-1]} for r in lines if r["kind"] == "board_op"]


def _board(result: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {t["id"]: t for t in result["workspace"]["entries"]["tasks"]["value"]}


def _holding(name: str, messages: list[dict[str, Any]]) -> bool:
    held, _, ended = policies.held_task(messages)
    return held is not None and ended is None


def _first_claim(ops: list[dict[str, Any]], peer: str) -> str:
    return next(o["task_id"] for o in ops if o["agent"] == peer and o["op"] == "claim" and o["status"] == "applied")


TWENTY = [f"task-{i}" for i in range(1, 20)]
"""Nineteen starting tasks; the run's input is the twentieth."""


def test_three_peers_complete_twenty_tasks_each_exactly_once(tmp_path: Path, fake_openai: FakeOpenAI) -> None:
    counted = _serve(fake_openai)
    team = write_team(tmp_path, url=fake_openai.url, initial=TWENTY)
    result = _execute(team, "task-20", "--trace", str(tmp_path / "run.jsonl"))

    assert result["status"] == "done" and result["stopped_by"] is None
    board = _board(result)
    assert sorted(board) == sorted(f"t{i}" for i in range(1, 21))
    assert counted.counts == Counter({task_id: 1 for task_id in board})  # each completed once, at the fake
    assert all(t["status"] == "done" and t["completed_by"] in PEERS for t in board.values())
    assert board["t20"]["payload"] == "task-20" and board["t20"]["posted_by"] == "input"
    assert result["final_text"].startswith(board["t20"]["result"])  # the input's task answers first
    ops = _ops(tmp_path / "run.jsonl")
    completes = [o for o in ops if o["op"] == "complete" and o["status"] == "applied"]
    assert sorted(o["task_id"] for o in completes) == sorted(board)
    assert {d["agent"] for d in result["delegations"]} == set(PEERS)
    assert all(d["status"] == "ok" for d in result["delegations"])


def test_a_peer_whose_model_call_fails_loses_its_task_to_another(tmp_path: Path, fake_openai: FakeOpenAI) -> None:
    def fail(name: str, messages: list[dict[str, Any]]) -> Reply | None:
        return http_error(500) if name == "p1" and _holding(name, messages) else None

    counted = _serve(fake_openai, fail)
    team = write_team(tmp_path, url=fake_openai.url, initial=TWENTY)
    result = _execute(team, "task-20", "--trace", str(tmp_path / "run.jsonl"))

    assert result["status"] == "done"
    board = _board(result)
    assert counted.counts == Counter({task_id: 1 for task_id in board}) and len(board) == 20
    ops = _ops(tmp_path / "run.jsonl")
    lost = _first_claim(ops, "p1")
    assert any(o["op"] == "expire" and o["task_id"] == lost and o["status"] == "applied" for o in ops)
    assert board[lost]["status"] == "done" and board[lost]["completed_by"] in ("p2", "p3")
    assert board[lost]["claims"] == 2
    (p1,) = [d for d in result["delegations"] if d["agent"] == "p1"]
    assert p1["status"] == "error"


def test_a_peer_cancelled_mid_task_loses_its_task_to_another(tmp_path: Path, fake_openai: FakeOpenAI) -> None:
    def stall(name: str, messages: list[dict[str, Any]]) -> Reply | None:
        return text("never", delay=HUNG_S) if name == "p1" and _holding(name, messages) else None

    counted = _serve(fake_openai, stall)
    team = write_team(tmp_path, url=fake_openai.url, initial=TWENTY, budgets={"p1": "{timeout_s: 8}"})
    result = _execute(team, "task-20", "--trace", str(tmp_path / "run.jsonl"))

    assert result["status"] == "done"
    board = _board(result)
    assert counted.counts == Counter({task_id: 1 for task_id in board}) and len(board) == 20
    ops = _ops(tmp_path / "run.jsonl")
    lost = _first_claim(ops, "p1")
    assert board[lost]["completed_by"] in ("p2", "p3")
    (p1,) = [d for d in result["delegations"] if d["agent"] == "p1"]
    assert p1["timed_out"] and p1["status"] == "budget_exhausted"


def test_a_stalled_peer_whose_lease_expires_cannot_complete_the_task_another_took(
    tmp_path: Path, fake_openai: FakeOpenAI
) -> None:
    stalled = threading.Event()

    def stall(name: str, messages: list[dict[str, Any]]) -> Reply | None:
        if name != "p1" or not _holding(name, messages) or stalled.is_set():
            return None
        stalled.set()  # p1 answers its first task only well after its 1 s lease ran out
        held, _, _ = policies.held_task(messages)
        assert held is not None
        return tool_calls(("board_complete", {"task_id": held["id"], "result": "late"}), delay=5)

    counted = _serve(fake_openai, stall)
    team = write_team(tmp_path, url=fake_openai.url, initial=TWENTY, lease_s=1)
    result = _execute(team, "task-20", "--trace", str(tmp_path / "run.jsonl"))

    assert result["status"] == "done"
    board = _board(result)
    ops = _ops(tmp_path / "run.jsonl")
    lost = _first_claim(ops, "p1")
    expired = [o for o in ops if o["op"] == "expire" and o["task_id"] == lost]
    assert expired and "lease expired" in expired[0]["message"]
    late = [o for o in ops if o["agent"] == "p1" and o["op"] == "complete" and o["task_id"] == lost]
    assert late[0]["status"] == "refused" and late[0]["reason"] == "lease"
    applied = Counter(o["task_id"] for o in ops if o["op"] == "complete" and o["status"] == "applied")
    assert applied == Counter({task_id: 1 for task_id in board}) and len(board) == 20  # done exactly once
    assert board[lost]["result"] != "late"
    assert counted.counts[lost] == 1  # the fake's count: the winner's; p1's late reply was a fault, not counted


def test_tasks_that_keep_spawning_tasks_stop_at_max_tasks(tmp_path: Path, fake_openai: FakeOpenAI) -> None:
    counted = _serve(fake_openai)
    team = write_team(tmp_path, url=fake_openai.url, initial=[], max_tasks=8)
    result = _execute(team, "spawn-0", code=3)

    assert result["status"] == "budget_exhausted"
    assert result["stopped_by"].startswith("limits.max_tasks (8)")
    board = _board(result)
    done = [t for t in board.values() if t["status"] == "done"]
    assert len(done) == 8 and [t for t in board.values() if t["status"] == "open"]
    assert counted.counts == Counter({t["id"]: 1 for t in done})
    assert all(d["status"] == "ok" for d in result["delegations"])  # every peer was told to stop, and answered


def test_peers_all_waiting_on_a_task_that_cannot_be_done_stop_as_a_deadlock(
    tmp_path: Path, fake_openai: FakeOpenAI
) -> None:
    _serve(fake_openai)
    team = write_team(tmp_path, url=fake_openai.url, initial=["task-1"], max_claims=1)
    result = _execute(team, "poison", "--trace", str(tmp_path / "run.jsonl"), code=1)

    assert result["status"] == "failed"
    assert result["stopped_by"].startswith("deadlock")
    board = _board(result)
    assert board["t1"]["status"] == "done"  # what could be done was done
    assert board["t2"]["payload"] == "poison" and board["t2"]["status"] == "failed"
    assert board["t3"]["payload"] == "blocked" and board["t3"]["after"] == ["t2"] and board["t3"]["status"] == "open"
    assert result["final_text"].startswith("Deadlock: 1 task(s) done")
    answers = [d["response"] for d in result["delegations"]]
    assert len(answers) == 3 and all("(deadlock)" in a for a in answers)


def _journal(store_url: str) -> list[tuple[str, str, str, dict[str, Any]]]:
    """The journal's rows in order: (peer, kind, call key, payload) (``model``: replies, ``board_op``: board calls'
    results, ``tool``: a claim answered with the work's ending)."""
    engine = sa.create_engine(store_url)
    try:
        with engine.connect() as conn:
            rows = conn.execute(sa.text("SELECT agent_path, kind, call_key, payload FROM journal ORDER BY seq"))
            return [
                (str(path).rsplit("/", 1)[-1], str(kind), str(key), json.loads(payload))
                for path, kind, key, payload in rows
            ]
    except sa.exc.OperationalError:
        return []  # not created yet
    finally:
        engine.dispose()


def _waiting_in_claim(rows: list[tuple[str, str, str, dict[str, Any]]], peer: str) -> bool:
    """Whether ``peer``'s last journaled reply calls board_claim alone and that claim has no journaled result yet
    (it waits for a task): the peer cannot move on its own."""
    replies = [(key, payload) for who, kind, key, payload in rows if who == peer and kind == "model"]
    if not replies:
        return False
    key, reply = replies[-1]
    calls = [c["name"] for c in reply.get("tool_calls") or []]
    answered = any(who == peer and kind in ("tool", "board_op") and k == key for who, kind, k, _ in rows)
    return calls == ["board_claim"] and not answered


def _call_key(record: Any) -> tuple[str, int]:
    """A peer's call is named by who asked and how many tool results it carried (its place in its run)."""
    return record.model, sum(1 for m in record.request["messages"] if m["role"] == "tool")


def test_a_killed_peer_run_resumes_without_completing_a_task_twice(tmp_path: Path, fake_openai: FakeOpenAI) -> None:
    server, hanging = fake_openai, threading.Event()

    def hang(name: str, messages: list[dict[str, Any]]) -> Reply | None:
        """While `hanging`: p3 stalls on the first task it holds (the others finish the rest, then wait)."""
        return text("never", delay=HUNG_S) if name == "p3" and hanging.is_set() and _holding(name, messages) else None

    counted = _serve(server, hang)
    team = write_team(tmp_path, url=server.url, initial=TWENTY)
    store_url = f"sqlite:///{tmp_path / 'teamrun.db'}"
    hanging.set()

    def ready() -> bool:
        """p3 hangs holding its task; p1 and p2 have finished the other 19 and wait in board_claim (read from the
        journal: a reply the fake sent may not be journaled yet, and a journaled complete may not be applied)."""
        log = server.requests()
        hung = [r for r in log if r.model == "p3" and r.end == 0.0]
        answered = Counter(r.model for r in log if r.status == 200 and r.end)
        rows = _journal(store_url)
        replies = Counter(who for who, kind, _, _ in rows if kind == "model")
        completed = [p for _, kind, _, p in rows if kind == "board_op" and '"status": "completed"' in p["content"]]
        return (
            len(hung) == 1
            and len(log) - 1 == sum(answered.values())  # nothing else in flight at the fake
            and replies == answered  # every answered call is journaled
            and len(completed) == 19  # every task but p3's is done, in the run
            and all(_waiting_in_claim(rows, p) for p in ("p1", "p2"))
        )

    run = killed_run(team, store_url, ready, where=lambda: f"{len(server.requests())} requests", task="task-20")
    first = [r for r in server.requests() if r.status == 200 and r.end]

    hanging.clear()
    server.log.clear()
    trace = tmp_path / "resumed.jsonl"
    resumed = _execute(
        team, "task-20", "--resume", run["run_id"], "--store", store_url, "--trace", str(trace)
    )  # `teamrun resume` with a trace
    second = server.requests()

    assert resumed["status"] == "done"
    assert {_call_key(r) for r in first} & {_call_key(r) for r in second} == set(), "a finished call was paid again"
    board = _board(resumed)
    assert len(board) == 20 and all(t["status"] == "done" for t in board.values())
    assert counted.counts == Counter({task_id: 1 for task_id in board})  # across both attempts, at the fake
    live = [o for o in _ops(trace) if not o.get("replayed") and o["op"] == "complete" and o["status"] == "applied"]
    assert len(live) == 1 and live[0]["agent"] == "p3"  # only p3's task was completed by the resume
    warnings = [json.loads(line) for line in trace.read_text(encoding="utf-8").splitlines() if '"warning"' in line]
    assert [w["data"]["message"] for w in warnings if w["kind"] == "warning"] == []  # the restored board fits


def test_ctrl_c_on_a_peer_team_prints_the_tasks_done_so_far(tmp_path: Path, fake_openai: FakeOpenAI) -> None:
    """Exit 130 printed nothing although tasks were done (the README: Ctrl-C still prints what finished)."""

    def stall(name: str, messages: list[dict[str, Any]]) -> Reply | None:
        return text("never", delay=HUNG_S) if name == "p1" and _holding(name, messages) else None

    _serve(fake_openai, stall)
    team = write_team(tmp_path, url=fake_openai.url, initial=TWENTY)
    trace = tmp_path / "run.jsonl"
    process = subprocess.Popen(
        teamrun_argv("execute", str(team), "-i", "task-20", "--progress", "none", "--trace", str(trace)),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=child_env(),
    )
    try:

        def completed() -> bool:
            try:  # the trace is being written: its last line may be cut
                return trace.exists() and any(o["op"] == "complete" and o["status"] == "applied" for o in _ops(trace))
            except ValueError:
                return False

        wait_until(completed, "a task completed", alive=process)
        process.send_signal(signal.SIGINT)
        out, err = process.communicate(timeout=300)  # a hang guard
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 130, err
    assert "No final answer: the run was stopped (cancelled). Tasks done on the board 'tasks' so far:" in out
    done = [o["task_id"] for o in _ops(trace) if o["op"] == "complete" and o["status"] == "applied"]
    assert done and all(f"- {task_id} (" in out for task_id in done)


def _done(trace: Path) -> set[str]:
    """The tasks the trace shows completed so far (none while its last line is still being written)."""
    try:
        ops = _ops(trace) if trace.exists() else []
    except ValueError:  # the trace is being written: its last line may be cut
        return set()
    return {o["task_id"] for o in ops if o["op"] == "complete" and o["status"] == "applied"}


def _changes(trace: Path) -> list[int]:
    """The versions the trace's applied, not replayed, workspace and board changes handed out, in order."""
    lines = [json.loads(line) for line in trace.read_text(encoding="utf-8").splitlines()]
    return [
        r["data"]["version_after"]
        for r in lines
        if r["kind"] in ("board_op", "workspace_write")
        and r["data"]["status"] == "applied"
        and not r["data"].get("replayed")
        and r["data"]["version_after"] != r["data"]["version_before"]
    ]


def test_ctrl_c_then_resume_hands_out_no_version_twice(tmp_path: Path, fake_openai: FakeOpenAI) -> None:
    """Ctrl-C while p1 holds a task, then `teamrun resume`: p1 kept its lease (nothing changed at Ctrl-C), so the
    resumed run goes on from the journaled versions; every task is done once."""
    hanging = threading.Event()

    def stall(name: str, messages: list[dict[str, Any]]) -> Reply | None:
        return text("never", delay=HUNG_S) if name == "p1" and hanging.is_set() and _holding(name, messages) else None

    counted = _serve(fake_openai, stall)
    team = write_team(tmp_path, url=fake_openai.url, initial=TWENTY[:5])
    store_url = f"sqlite:///{tmp_path / 'teamrun.db'}"
    first, second = tmp_path / "first.jsonl", tmp_path / "second.jsonl"
    hanging.set()
    argv = teamrun_argv(
        "execute", str(team), "-i", "task-20", "--store", store_url, "--progress", "none", "--trace", str(first)
    )

    def p1_holds_and_the_rest_is_done() -> bool:
        return len(_done(first)) == 5 and any(r.model == "p1" and r.end == 0.0 for r in fake_openai.requests())

    code = stop_when(argv, p1_holds_and_the_rest_is_done, signal.SIGINT, where=lambda: sorted(_done(first)))
    assert code == 130
    run = listed_run(store_url)
    hanging.clear()
    resumed = _execute(team, "task-20", "--resume", run["run_id"], "--store", store_url, "--trace", str(second))

    assert resumed["status"] == "done"
    board = _board(resumed)
    assert len(board) == 6 and all(t["status"] == "done" and t["claims"] == 1 for t in board.values())
    assert counted.counts == Counter({task_id: 1 for task_id in board})
    versions = _changes(first) + _changes(second)
    assert len(versions) == len(set(versions)), f"a version was handed out twice: {versions}"
