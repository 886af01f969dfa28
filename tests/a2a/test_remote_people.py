"""A remote task that asks for input (``input-required``) is a pending item: asked on a terminal, or the run
suspends in the store and ``teamrun answer`` sends the answer to the same remote task."""

from __future__ import annotations

import asyncio
import io
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.a2a.remote_fixtures import A2AAgent, team_file
from tests.cli_run import CliResult, run_cli

pytestmark = pytest.mark.outofprocess("an a2a-sdk agent under uvicorn in a subprocess")


def _pending(store: str) -> dict[str, Any]:
    """The one pending item of the one run in ``store`` (``teamrun runs list --json``)."""
    (run,) = json.loads(run_cli(["runs", "list", "--store", store, "--json"]).out)
    (pending,) = run["pending"]
    return dict(pending)


def _suspended(team: Path, store: str) -> tuple[str, dict[str, Any]]:
    """``teamrun execute --detach`` of ``team`` (asked "ASK me"), which suspends (exit 4) on the remote agent's
    question; returns the run's id and its pending item."""
    started = run_cli(
        ["execute", str(team), "-i", "ASK me", "--store", store, "--detach", "--json", "--progress", "none"]
    )
    assert started.code == 4, started.err
    return json.loads(started.out)["run_id"], _pending(store)


def _answer(run_id: str, item: str, answer: str, store: str, *options: str) -> CliResult:
    """``teamrun answer RUN ITEM ANSWER`` with ``options`` (e.g. ``--json``)."""
    return run_cli(["answer", run_id, item, answer, "--store", store, *options, "--progress", "none"])


def test_input_required_is_asked_on_the_terminal(a2a_agent: Callable[..., A2AAgent], tmp_path: Path) -> None:
    from teamrun import load_team
    from teamrun.tools.people import TerminalDesk

    agent = a2a_agent()
    team = load_team(str(team_file(tmp_path, agent.url)))
    asked = io.StringIO()
    desk = TerminalDesk(stdin=io.StringIO("eu-west-1\n"), stderr=asked)

    result = asyncio.run(team.run("ASK me something", desk=desk))

    assert result.status == "done"
    (delegation,) = result.delegations
    assert delegation.status == "ok" and delegation.response == "got: eu-west-1"
    assert "researcher asks: Which region?" in asked.getvalue()
    first, second = agent.records("execute")
    assert (first["continuing"], second["continuing"]) == (False, True)
    assert second["text"] == "eu-west-1"
    assert (second["task_id"], second["context_id"]) == (first["task_id"], first["context_id"])


def test_input_required_suspends_the_run_and_teamrun_answer_continues_the_remote_task(
    a2a_agent: Callable[..., A2AAgent], tmp_path: Path
) -> None:
    agent = a2a_agent()
    store = str(tmp_path / "runs.db")
    team = team_file(tmp_path, agent.url)

    run_id, pending = _suspended(team, store)
    assert pending["agent"] == "researcher" and pending["question"] == "Which region?"
    assert agent.methods().count("CancelTask") == 0  # suspended for a person: the remote task waits

    answered = _answer(run_id, pending["item"], "eu-west-1", store)

    assert answered.code == 0, answered.err
    assert "researcher (ok): got: eu-west-1" in answered.out
    first, second = agent.records("execute")
    assert second["continuing"] and second["text"] == "eu-west-1"
    assert second["task_id"] == first["task_id"]  # the answer went to the same remote task
    assert "GetTask" in agent.methods()  # picked up again by its id, not sent anew
    assert [e["text"] for e in agent.records("execute")].count("ASK me") == 1


def test_without_anyone_to_ask_the_delegation_fails_clearly(a2a_agent: Callable[..., A2AAgent], tmp_path: Path) -> None:
    agent = a2a_agent()
    shown = run_cli(["execute", str(team_file(tmp_path, agent.url)), "-i", "ASK me", "--no-journal", "--json"])

    assert shown.code == 0, shown.err
    (delegation,) = json.loads(shown.out)["delegations"]
    assert delegation["status"] == "error"
    assert "nobody could be asked" in delegation["error"]


def test_a_forgotten_task_sent_again_asks_its_new_question_anew_not_with_the_earlier_answer(
    a2a_agent: Callable[..., A2AAgent], tmp_path: Path
) -> None:
    """D7: the person answered "Which region?"; the agent restarted (it forgot the task) and the task sent again
    asks something else: that question is a new pending item, never answered with the earlier answer."""
    first = a2a_agent()
    store = str(tmp_path / "runs.db")
    team = team_file(tmp_path, first.url)
    run_id, pending = _suspended(team, store)
    assert pending["question"] == "Which region?"
    first.process.terminate()
    first.process.wait(timeout=60)
    port = int(first.url.rsplit(":", 1)[1])
    again = a2a_agent(port=port, extra=("--question", "Delete all production data? (yes/no)"))

    answered = _answer(run_id, pending["item"], "yes", store, "--json")

    assert answered.code == 4, (answered.code, answered.out, answered.err)  # waits for a person again
    assert "no longer knows task" in answered.err
    executed = again.records("execute")
    assert [(e["text"], e["continuing"]) for e in executed] == [("ASK me", False)]  # "yes" was not sent
    new = _pending(store)
    assert new["question"] == "Delete all production data? (yes/no)" and new["item"] != pending["item"]

    done = _answer(run_id, new["item"], "no", store, "--json")

    assert done.code == 0, done.err
    (delegation,) = json.loads(done.out)["delegations"]
    assert delegation["status"] == "ok" and delegation["response"] == "got: no"
    assert [(e["text"], e["continuing"]) for e in again.records("execute")] == [("ASK me", False), ("no", True)]
