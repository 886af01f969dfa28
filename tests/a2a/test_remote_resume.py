"""SIGKILL of a journaled run with two remote workers, then ``teamrun resume``: the finished remote task is not
sent again (counted at the remote agent); the unfinished one is picked up by its task id, not sent anew."""

from __future__ import annotations

import contextlib
import json
import signal
import sqlite3
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.a2a.remote_fixtures import A2AAgent, CliResult
from tests.cli_processes import child_env, running, signal_when, teamrun_argv

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


def _executing(team: Path, db: Path) -> contextlib.AbstractContextManager[subprocess.Popen[Any]]:
    """``teamrun execute`` of ``team`` journaled in ``db``, running in a child process (output dropped)."""
    argv = teamrun_argv("execute", str(team), "-i", "facts", "--store", str(db), "--progress", "none")
    return running(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=child_env())


def _resume_argv(db: Path) -> list[str]:
    """``teamrun resume`` of the one run in ``db``, answering in JSON."""
    with sqlite3.connect(db) as connection:
        ((run_id,),) = list(connection.execute("select id from runs"))
    return teamrun_argv("resume", run_id, "--store", str(db), "--json", "--progress", "none")


def test_a_killed_run_resumes_without_sending_a_finished_remote_task_again(
    a2a_agent: Callable[..., A2AAgent], tmp_path: Path
) -> None:
    quick, slow = a2a_agent(mode="ANSWER"), a2a_agent(mode="WAIT")
    team = _team(tmp_path, quick.url, slow.url)
    db = tmp_path / "runs.db"
    with _executing(team, db) as process:

        def ready() -> bool:
            return _count(db, "remote") == 1 and _count(db, "remote_start") == 2  # quick's answer; both tasks' ids

        signal_when(process, ready, signal.SIGKILL, where=lambda: _journal_kinds(db), guard_s=GUARD_S)
    assert len(quick.records("execute")) == 1 and len(slow.records("execute")) == 1

    resume = _resume_argv(db)
    with running(resume, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=child_env()) as resuming:
        slow.wait_for(lambda: "SubscribeToTask" in slow.methods(), "the resumed run subscribed to the slow task")
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
    with _executing(team, db) as process:

        def started() -> bool:
            return _count(db, "remote_start") >= 1

        assert signal_when(process, started, signal.SIGINT, where=lambda: _journal_kinds(db), guard_s=GUARD_S) == 130
    assert len(agent.records("cancel")) == 1
    resume = _resume_argv(db)
    agent.release.write_text("go", encoding="utf-8")

    resumed = subprocess.run(resume, capture_output=True, text=True, env=child_env(), timeout=GUARD_S)

    assert resumed.returncode == 0, resumed.stderr
    (delegation,) = json.loads(resumed.stdout)["delegations"]
    assert (delegation["status"], delegation["response"]) == ("ok", "waited answer: facts")
    assert "was cancelled when the run was interrupted" in resumed.stderr
    assert [e["text"] for e in agent.records("execute")] == ["facts", "facts"]  # sent anew
