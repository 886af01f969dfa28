"""People in the loop across the mechanisms they cross: the terminal, approvals, events, timeout_s, max_wait.

Offline model throughout: an agent calls each of its tools once, then answers with what they returned.
"""

from __future__ import annotations

import asyncio
import io
import json
from pathlib import Path

import pytest

import teamrun
from teamrun.cli import main
from teamrun.events import Event
from teamrun.store import open_store
from teamrun.store.pending import PendingRepository
from teamrun.tools.people import Answer, AskSite, PendingItem, TerminalDesk


def _team(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "team.yaml"
    path.write_text("version: 1\nname: people\nsupervisor: lead\n" + body, encoding="utf-8")
    return path


ASK = """tools:
  ask_ops: {person: {choices: [eu-west-1, us-east-1]}}
agents:
  lead: {tools: [ask_ops]}
"""


def test_on_a_terminal_the_question_is_asked_inline_until_the_answer_fits(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr("teamrun.cli.answer_cmd._on_terminal", lambda: True)
    monkeypatch.setattr("sys.stdin", io.StringIO("mars\neu-west-1\n"))

    code = main(["execute", str(_team(tmp_path, ASK)), "-i", "Launch Falcon", "--progress", "none"])

    out, err = capsys.readouterr()
    assert code == 0, err
    assert "ask_ops: eu-west-1" in out
    assert "lead asks: Launch Falcon\n  choices: eu-west-1, us-east-1" in err
    assert "teamrun: the answer must be one of: eu-west-1, us-east-1" in err


def test_without_a_terminal_or_a_journal_the_question_fails_with_a_hint(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["execute", str(_team(tmp_path, ASK)), "-i", "Launch Falcon", "--progress", "none"])

    out, _ = capsys.readouterr()
    assert code == 0  # the agent goes on without the answer
    assert "nobody could be asked" in out and "--detach" in out


APPROVE = """tools:
  deploy: {command: [echo, deployed], require_approval: true}
agents:
  lead: {tools: [deploy]}
"""


@pytest.mark.parametrize("decision", ["approve", "deny"])
def test_a_detached_approval_is_a_pending_item_approved_or_denied_from_the_cli(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], decision: str
) -> None:
    store = str(tmp_path / "runs.db")
    team = _team(tmp_path, APPROVE)
    assert main(["execute", str(team), "-i", "ship", "--store", store, "--detach", "--json", "--progress", "none"]) == 4
    out, err = capsys.readouterr()
    run_id = json.loads(out)["run_id"]
    assert "a1  lead waits for approval: may deploy run with {}?" in err
    assert f"approve with `teamrun approve {run_id} ITEM --store" in err

    extra = ["--note", "not on Fridays"] if decision == "deny" else []
    code = main([decision, run_id, "a1", "--store", store, "--by", "ops", "--progress", "none", *extra])

    out, err = capsys.readouterr()
    assert code == 0, err
    if decision == "approve":
        assert "deploy: deployed" in out
    else:
        assert "the user (ops) denied the call to tool 'deploy'. They said: not on Fridays" in out


def test_events_record_who_answered_what_and_when_with_secrets_masked(tmp_path: Path) -> None:
    team_file = _team(
        tmp_path,
        """tools:
  ask_pin: {person: {secret: true}}
  ask_ops: {person: {}}
agents:
  lead: {tools: [ask_pin, ask_ops]}
""",
    )
    team = teamrun.load_team(team_file)
    team.desk = TerminalDesk(stdin=io.StringIO("4711\neu-west-1\n"), stderr=io.StringIO())
    events: list[Event] = []

    result = team.run_sync("Launch Falcon", subscribers=[events.append])

    assert result.status == "done"
    assert "4711" in result.final_text  # the model sees the secret answer
    answered = sorted((e.tool, e.by, e.status, e.answer) for e in events if e.kind == "person_answered")
    assert answered == [("ask_ops", "terminal", "answered", "eu-west-1"), ("ask_pin", "terminal", "answered", "***")]
    asked = {e.tool for e in events if e.kind == "person_asked"}
    assert asked == {"ask_pin", "ask_ops"}
    assert all(getattr(e, "answered_at", 0) > 0 for e in events if e.kind == "person_answered")


class SlowPerson:
    """Answers after a while, waiting the way a person at the terminal does."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds

    async def ask(self, item: PendingItem, site: AskSite) -> Answer:
        async with site.waiting(False):
            await asyncio.sleep(self.seconds)
        return Answer("eu-west-1", "slow")


def test_time_spent_waiting_for_a_person_does_not_count_against_timeout_s(tmp_path: Path) -> None:
    team = teamrun.load_team(_team(tmp_path, "limits: {timeout_s: 0.3}\n" + ASK))
    team.desk = SlowPerson(0.6)

    result = team.run_sync("Launch Falcon")

    assert result.status == "done", result.stopped_by
    assert "ask_ops: eu-west-1" in result.final_text


def test_a_question_past_max_wait_expires_with_a_recorded_outcome(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = str(tmp_path / "runs.db")
    # long enough for the detached run to suspend first on a busy machine (it expires live otherwise)
    team = _team(tmp_path, ASK.replace("choices: [eu-west-1, us-east-1]", "max_wait_s: 3"))
    assert (
        main(
            ["execute", str(team), "-i", "Launch Falcon", "--store", store, "--detach", "--json", "--progress", "none"]
        )
        == 4
    )
    run_id = json.loads(capsys.readouterr().out)["run_id"]
    asked = PendingRepository(open_store(store)).get(run_id, "q1")
    assert asked is not None
    import time

    while time.time() < asked.asked_at + 3.05:  # past max_wait
        time.sleep(0.05)

    code = main(["resume", run_id, "--store", store, "--progress", "none"])

    out, err = capsys.readouterr()
    assert code == 0, err
    assert "Nobody answered within 3 seconds" in out
    item = PendingRepository(open_store(store)).get(run_id, "q1")
    assert item is not None and (item.status, item.answered_by, item.answer) == ("expired", "nobody", None)
    line = main(["answer", run_id, "q1", "late", "--store", store])
    assert line == 2
    assert "expired at" in capsys.readouterr().err


def test_chat_asks_the_agents_question_inline_on_the_terminal(tmp_path: Path) -> None:
    import os
    import sys

    import pexpect

    team = _team(tmp_path, ASK)
    env = {
        **os.environ,
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        "XDG_DATA_HOME": str(tmp_path / "data"),
        "TERM": "dumb",
    }
    env.pop("TEAMRUN_STORE", None)
    child = pexpect.spawn(
        sys.executable,
        ["-m", "teamrun.cli", "chat", str(team), "--store", str(tmp_path / "chat.db"), "--progress", "none"],
        env=env,
        cwd=str(tmp_path),
        encoding="utf-8",
        timeout=120,
        dimensions=(40, 200),
    )
    child.expect_exact("you> ")
    child.sendline("Launch Falcon")
    child.expect_exact("lead asks: Launch Falcon")
    child.expect_exact("answer: ")
    child.sendline("us-east-1")
    child.expect_exact("you> ")
    assert "ask_ops: us-east-1" in str(child.before)
    child.sendeof()
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0


def test_a_sibling_that_does_not_wait_runs_to_its_end_before_the_run_suspends(tmp_path: Path) -> None:
    from teamrun.engine.durability.pending import SuspendingDesk

    (tmp_path / "slow.py").write_text(
        "import time\n\ndef measure(query: str) -> str:\n    'Measure slowly.'\n    time.sleep(0.3)\n"
        "    return 'measured ' + query\n",
        encoding="utf-8",
    )
    team_file = _team(
        tmp_path,
        """tools:
  ask_ops: {person: {}}
  measure: {python: 'slow:measure'}
agents:
  lead: {delegates_to: [asker, worker]}
  asker: {description: Asks., tools: [ask_ops]}
  worker: {description: Measures., tools: [measure]}
""",
    )
    store = open_store(tmp_path / "runs.db")
    team = teamrun.load_team(team_file, store=store)
    team.desk = SuspendingDesk(PendingRepository(store))
    events: list[Event] = []

    result = team.run_sync("Launch Falcon", journal=True, subscribers=[events.append])

    assert result.status == "waiting"
    ends = {e.agent_path[-1]: e.status for e in events if e.kind == "agent_end"}
    assert ends == {"worker": "ok", "asker": "waiting", "lead": "waiting"}
    [item] = PendingRepository(store).items(result.run_id)
    assert (item.agent, item.status) == ("asker", "pending")


def test_an_answer_given_past_max_wait_before_any_resume_is_recorded_expired(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import datetime as dt

    from teamrun.store.schema import pending_items

    store = str(tmp_path / "runs.db")
    team = _team(tmp_path, ASK.replace("choices: [eu-west-1, us-east-1]", "max_wait_s: 600"))
    args = ["execute", str(team), "-i", "Launch Falcon", "--store", store, "--detach", "--json", "--progress", "none"]
    assert main(args) == 4
    run_id = json.loads(capsys.readouterr().out)["run_id"]
    opened = open_store(store)
    asked = dt.datetime.now(dt.UTC) - dt.timedelta(seconds=601)  # asked longer ago than max_wait_s
    with opened.engine.begin() as conn:
        conn.execute(pending_items.update().where(pending_items.c.run_id == run_id).values(asked_at=asked))

    code = main(["answer", run_id, "q1", "eu-west-1", "--store", store, "--progress", "none"])

    err = capsys.readouterr().err
    assert code == 2, err
    assert f"error: item q1 of run {run_id} expired at " in err and "nobody answered in time" in err
    item = PendingRepository(opened).get(run_id, "q1")
    assert item is not None and (item.status, item.answered_by, item.answer) == ("expired", "nobody", None)
    assert item.answered_at == pytest.approx(asked.timestamp() + 600)  # expired at its deadline

    assert main(["resume", run_id, "--store", store, "--progress", "none"]) == 0
    out = capsys.readouterr().out
    assert "Nobody answered within 600 seconds" in out and "eu-west-1" not in out  # the late answer never arrives


SECRET = """tools:
  ask_pin: {person: {secret: true}}
  ask_ops: {person: {}}
agents:
  lead: {tools: [ask_pin, ask_ops]}
"""


def _trace_lines(path: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


@pytest.mark.parametrize("pin", ["s3cr3t-4711", "4711"])  # a short one is masked as a whole word
def test_a_secret_answer_is_masked_in_a_trace_with_content(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], pin: str
) -> None:
    monkeypatch.setattr("teamrun.cli.answer_cmd._on_terminal", lambda: True)
    monkeypatch.setattr("sys.stdin", io.StringIO(f"{pin}\neu-west-1\n"))
    trace = tmp_path / "run.jsonl"

    code = main(
        [
            *("execute", str(_team(tmp_path, SECRET)), "-i", "Launch Falcon", "--progress", "none"),
            *("--trace", str(trace), "--trace-content"),
        ]
    )

    out, err = capsys.readouterr()
    assert code == 0, err
    assert f"ask_pin: {pin}" in out  # the model read it; the answer on stdout is the run's own
    lines = _trace_lines(trace)
    assert pin not in trace.read_text(encoding="utf-8")
    told = [m for line in lines if line["kind"] == "llm_io" for m in line["data"]["new_messages"]]  # type: ignore[index]
    assert {m["content"] for m in told if m["role"] == "tool"} == {"***", "eu-west-1"}
    assert any("ask_pin: ***" in str(line["data"]) for line in lines if line["kind"] == "llm_io")  # the reply


def test_a_secret_answer_replayed_from_the_journal_is_masked_in_the_resumed_runs_trace(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = str(tmp_path / "runs.db")
    team = str(_team(tmp_path, SECRET))
    assert (
        main(["execute", team, "-i", "Launch Falcon", "--store", store, "--detach", "--json", "--progress", "none"])
        == 4
    )
    run_id = json.loads(capsys.readouterr().out)["run_id"]
    items = {i.spec["tool"]: i.item_id for i in PendingRepository(open_store(store)).items(run_id)}

    # the secret is answered and taken by a continuation that then waits for the other question
    assert main(["answer", run_id, items["ask_pin"], "s3cr3t-4711", "--store", store, "--progress", "none"]) == 4
    assert main(["answer", run_id, items["ask_ops"], "eu-west-1", "--store", store, "--no-resume"]) == 0
    capsys.readouterr()
    trace = tmp_path / "resumed.jsonl"

    code = main(
        [
            *("execute", team, "--resume", run_id, "--store", store, "--progress", "none"),
            *("--trace", str(trace), "--trace-content"),
        ]
    )

    out, err = capsys.readouterr()
    assert code == 0, err
    assert "ask_pin: s3cr3t-4711" in out
    assert "s3cr3t-4711" not in trace.read_text(encoding="utf-8")
    assert any("ask_pin: ***" in str(line["data"]) for line in _trace_lines(trace) if line["kind"] == "llm_io")
    # the run's record, as `teamrun runs` (and a restarted server) read it, masks it as the events do
    assert main(["runs", "show", run_id, "--store", store]) == 0
    shown = capsys.readouterr().out
    assert "ask_pin: ***" in shown and "s3cr3t-4711" not in shown
    assert main(["runs", "list", "--store", store, "--json"]) == 0
    assert "s3cr3t-4711" not in capsys.readouterr().out


def test_what_a_secret_person_tool_masks_of_its_result() -> None:
    from teamrun.config.models import ToolDef
    from teamrun.secrets import Redactor
    from teamrun.tools.people import PersonTool

    def tool(**person: object) -> PersonTool:
        return PersonTool("ask", ToolDef.model_validate({"person": person}))

    schema = {"type": "object"}
    assert tool(secret=True, answer_schema=schema).secrets_in('{"user": "ada", "pin": 4711}') == {
        '{"user": "ada", "pin": 4711}',
        "ada",
        "4711",
    }
    assert tool(secret=False).secrets_in("hunter22") == set()
    expired = "Nobody answered within 60 seconds. Continue without the answer."
    assert tool(secret=True, max_wait_s=60).secrets_in(expired) == set()

    redactor = Redactor(include_env=False)
    kept = redactor.derived({"4711", "yes"}, declared=True)
    assert kept.text("pin 4711, id ab4711cd, yes: yesterday") == "pin ***, id ab4711cd, ***: yesterday"
    assert redactor.text("pin 4711") == "pin 4711"  # the original is left as it is
    redactor.add({"4711"})  # not declared: too short to pass for a secret
    assert redactor.text("pin 4711") == "pin 4711"


def test_chat_without_a_terminal_suspends_the_turn_in_its_store_and_says_how_to_answer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    monkeypatch.delenv("TEAMRUN_STORE", raising=False)
    monkeypatch.setattr("sys.stdin", io.StringIO("Launch Falcon\n"))  # piped: no terminal
    store = str(tmp_path / "chat.db")

    code = main(["chat", str(_team(tmp_path, ASK)), "--store", store, "--progress", "none"])

    out, err = capsys.readouterr()
    assert code in (0, None), err
    assert "not journaled" not in out + err and "--detach" not in out + err
    [item] = PendingRepository(open_store(store)).items()
    assert (item.item_id, item.status) == ("q1", "pending")
    assert f"run {item.run_id} is waiting for a person" in err
    assert f"teamrun answer {item.run_id} ITEM VALUE --store" in err

    assert main(["answer", item.run_id, "q1", "us-east-1", "--store", store, "--progress", "none"]) == 0
    assert "ask_ops: us-east-1" in capsys.readouterr().out
