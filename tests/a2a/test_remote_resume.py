"""SIGKILL of a journaled run with two remote workers, then ``teamrun resume``: the finished remote task is not
sent again (counted at the remote agent); the unfinished one is picked up by its task id, not sent anew."""

from __future__ import annotations

import json
import signal
import sqlite3
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.a2a.remote_fixtures import A2AAgent
from tests.cli_processes import (
    child_env,
    execute_argv,
    killed_run,
    listed_run,
    resume,
    running,
    stop_when,
    teamrun_argv,
)
from tests.cli_run import CliResult
from tests.waiting import wait_until

pytestmark = pytest.mark.outofprocess("a2a-sdk agents under uvicorn, and teamrun killed in a subprocess")
GUARD_S = 240.0


def _team(tmp_path: Path, quick: str, slow: str) -> Path:
    path = tmp_path / "two-remotes.yaml"
    path.write_text(
        f"""version: 1
name: two-remotes
supervisor: lead
defaults: {{model: offline}}
agents:
  lead:
    description: Asks both.
    delegates_to: [quick, slow]
  quick:
    description: Answers at once.
    a2a: {{url: "{quick}", timeout_s: 120}}
  slow:
    description: Answers when released.
    a2a: {{url: "{slow}", timeout_s: 120}}
""",
        encoding="utf-8",
    )
    return path


def _journal_kinds(db: Path) -> list[tuple[str, str]]:
    if not db.exists():
        return []
    try:
        with sqlite3.connect(db, timeout=5) as connection:
            return list(connection.execute("select agent_path, kind from journal"))
    except sqlite3.OperationalError:  # not created yet
        return []


def _count(db: Path, kind: str) -> int:
    """How many journal entries of ``kind`` the run has written so far."""
    return [k for _, k in _journal_kinds(db)].count(kind)


def test_a_killed_run_resumes_without_sending_a_finished_remote_task_again(
    a2a_agent: Callable[..., A2AAgent], tmp_path: Path
) -> None:
    quick, slow = a2a_agent(mode="ANSWER"), a2a_agent(mode="WAIT")
    team = _team(tmp_path, quick.url, slow.url)
    db = tmp_path / "runs.db"

    def ready() -> bool:
        return _count(db, "remote") == 1 and _count(db, "remote_start") == 2  # quick's answer; both tasks' ids

    run = killed_run(team, str(db), ready, where=lambda: _journal_kinds(db), task="facts")
    assert len(quick.records("execute")) == 1 and len(slow.records("execute")) == 1

    resume_argv = teamrun_argv("resume", run["run_id"], "--store", str(db), "--json", "--progress", "none")
    with running(resume_argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=child_env()) as resuming:
        wait_until(
            lambda: "SubscribeToTask" in slow.methods(),
            "the resumed run subscribed to the slow task",
            where=slow.records,
        )
        slow.release.write_text("go", encoding="utf-8")  # the slow task may finish now
        out, err = resuming.communicate(timeout=GUARD_S)
    resumed = CliResult(resuming.returncode, out, err)

    assert resumed.code == 0, resumed.err
    result = json.loads(resumed.out)
    answers = {d["agent"]: (d["status"], d["response"]) for d in result["delegations"]}
    assert answers == {"quick": ("ok", "remote answer: facts"), "slow": ("ok", "waited answer: facts")}
    assert len(quick.records("execute")) == 1  # finished before the kill: answered from the journal
    assert "SendStreamingMessage" not in quick.methods()[1:] and quick.methods().count("SendStreamingMessage") == 1
    assert len(slow.records("execute")) == 1  # unfinished: picked up by its id, not sent again
    assert slow.methods().count("SendStreamingMessage") == 1
    assert slow.methods().index("GetTask") < slow.methods().index("SubscribeToTask")


def test_a_run_interrupted_by_ctrl_c_resumes_by_sending_the_cancelled_remote_task_again(
    a2a_agent: Callable[..., A2AAgent], tmp_path: Path
) -> None:
    """D10: Ctrl-C cancels the remote task (CancelTask); `teamrun resume` sends the task anew, not reattach to it."""
    agent = a2a_agent(mode="WAIT")
    team = tmp_path / "one.yaml"
    team.write_text(
        f"""version: 1
name: one-remote
supervisor: lead
defaults: {{model: offline}}
agents:
  lead:
    description: Asks.
    delegates_to: [slow]
  slow:
    description: Answers when released.
    a2a: {{url: "{agent.url}", timeout_s: 120}}
""",
        encoding="utf-8",
    )
    db = tmp_path / "runs.db"

    def started() -> bool:
        return _count(db, "remote_start") >= 1

    execute = execute_argv(team, str(db), task="facts")
    assert stop_when(execute, started, signal.SIGINT, where=lambda: _journal_kinds(db)) == 130
    assert len(agent.records("cancel")) == 1
    agent.release.write_text("go", encoding="utf-8")

    resumed = resume(listed_run(str(db))["run_id"], str(db))

    assert resumed.returncode == 0, resumed.stderr
    (delegation,) = json.loads(resumed.stdout)["delegations"]
    assert (delegation["status"], delegation["response"]) == ("ok", "waited answer: facts")
    assert "was cancelled when the run was interrupted" in resumed.stderr
    assert [e["text"] for e in agent.records("execute")] == ["facts", "facts"]  # sent anew
