"""`teamrun execute` as a user runs it: the offline model, exit codes, stdout/stderr split."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from teamrun.cli import main
from tests.fakeserver import TEST_KEY, FakeOpenAI, text, tool_calls

REPO = Path(__file__).resolve().parents[2]
TEAMS = sorted(p for p in (REPO / "teams").glob("*.yaml") if "\n    a2a:" not in p.read_text(encoding="utf-8"))
"""Every ready-made team but those with a remote (``a2a:``) worker, which need an A2A agent to talk to:
tests/a2a/test_remote_team.py runs them against the a2a-sdk test agent."""


@pytest.mark.parametrize("team_file", TEAMS, ids=[p.stem for p in TEAMS])
def test_every_ready_made_team_runs_offline(team_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["execute", str(team_file), "--input", "Compare Rust and Go", "--json", "--approve", "all"])

    out, err = capsys.readouterr()
    result = json.loads(out)
    assert code == 0, err
    assert result["status"] == "done"
    assert result["final_text"].startswith("[offline simulation]")
    # The runner's trailing context (ledger, workspace index, memories) is never taken for the task.
    assert "Context from teamrun" not in json.dumps(result)
    assert result["delegations"], "the supervisor delegated to its workers"
    assert all(d["status"] == "ok" for d in result["delegations"])
    assert "started" in err  # progress went to stderr, not stdout


def test_answer_alone_on_stdout_and_input_from_stdin(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import io

    monkeypatch.setattr("sys.stdin", io.StringIO("Compare Rust and Go"))
    code = main(["execute", str(REPO / "teams/research-report.yaml"), "--progress", "none"])

    out, err = capsys.readouterr()
    assert code == 0
    assert out.startswith("[offline simulation] Task: Compare Rust and Go")
    assert err == ""


def test_invalid_team_file_exits_2_with_located_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("version: 1\nname: t\nsupervisor: lead\nagents:\n  lead: {delegates_to: [ghost]}\n")

    code = main(["execute", str(bad), "-i", "x"])

    out, err = capsys.readouterr()
    assert code == 2 and out == ""
    assert f"{bad}:5:25: error: agents.lead.delegates_to[0]: agent 'ghost' is not defined" in err
    assert "Traceback" not in err


def test_usage_mistakes_exit_2_without_traceback(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    team = str(REPO / "teams/research-report.yaml")
    latin = tmp_path / "latin.txt"
    latin.write_bytes(b"caf\xe9\n")
    assert main(["execute", team, "--input-file", str(latin)]) == 2
    err = capsys.readouterr().err
    assert f"--input-file {latin} is not UTF-8 text (byte 3)" in err and "Traceback" not in err
    assert main(["execute", team, "-i", "x", "--var", "novalue"]) == 2
    assert "--var expects NAME=VALUE" in capsys.readouterr().err
    assert main(["execute", team, "-i", "x", "--approve", "nosuchtool"]) == 2
    assert "known tools are: notes" in capsys.readouterr().err
    assert main(["execute", team, "-i", "x", "--input-file", "/nonexistent"]) == 2
    assert main(["execute", str(REPO / "missing.yaml"), "-i", "x"]) == 2
    assert "no such file" in capsys.readouterr().err


def test_budget_exhausted_exits_3_with_a_partial_answer(
    fake_openai: FakeOpenAI, write_team: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    fake_openai.script(
        "lead",
        [
            tool_calls(("ask_helper", {"task": "step 1"})),
            tool_calls(("ask_helper", {"task": "step 2"})),
            text("verified: step 1 and 2; missing: step 3"),  # the last turn, without tools
        ],
    )
    fake_openai.script("helper", [text("did 1"), text("did 2")])
    path = write_team("""\
        supervisor: lead
        agents:
          lead: {model: openai/lead, delegates_to: [helper], budget: {max_steps: 2}}
          helper: {model: openai/helper, description: Does one step.}
        """)

    code = main(["execute", str(path), "-i", "do three steps", "--json"])

    result = json.loads(capsys.readouterr().out)
    assert code == 3
    assert result["status"] == "budget_exhausted"
    assert result["stopped_by"] == "agents.lead.budget.max_steps (2)"
    assert result["final_text"] == "verified: step 1 and 2; missing: step 3"
    last = fake_openai.requests("lead")[-1].request
    assert "tools" not in last or not last["tools"]
    assert "STOP: agents.lead.budget.max_steps (2) has been reached" in last["messages"][-1]["content"]
    fake_openai.assert_complete()


def test_model_override_and_vars_reach_the_prompt(
    fake_openai: FakeOpenAI, write_team: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    fake_openai.script("other", [text("hello from the override")])
    path = write_team("""\
        supervisor: solo
        vars: {audience: everyone}
        agents:
          solo:
            model: openai/solo
            instructions: "Write for {{ vars.audience }} on {{ today }}."
        """)

    code = main(
        [
            "execute",
            str(path),
            "-i",
            "hi",
            "--model",
            "openai/other",
            "--var",
            "audience=engineers",
            "--progress",
            "none",
        ]
    )

    assert code == 0 and capsys.readouterr().out == "hello from the override\n"
    system = fake_openai.requests("other")[0].request["messages"][0]["content"]
    assert system.startswith("Write for engineers on 20")


def test_a_provider_failure_exits_1_and_keeps_finished_work(
    fake_openai: FakeOpenAI, write_team: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    from tests.fakeserver import http_error

    fake_openai.script(
        "lead",
        [
            tool_calls(("ask_helper", {"task": "step 1"})),
            http_error(500),
            http_error(500),  # num_retries: 1 → both attempts fail
        ],
    )
    fake_openai.script("helper", [text("step 1 is done")])
    path = write_team("""\
        supervisor: lead
        agents:
          lead: {model: openai/lead, delegates_to: [helper]}
          helper: {model: openai/helper, description: Does one step.}
        """)

    code = main(["execute", str(path), "-i", "go", "--json"])

    out, err = capsys.readouterr()
    result = json.loads(out)
    assert code == 1
    assert result["status"] == "failed"
    assert "lead" in result["error"] and "500" in result["error"]
    assert result["delegations"][0]["response"] == "step 1 is done"
    assert "- helper: step 1 is done" in result["final_text"]
    assert "Traceback" not in err
    fake_openai.assert_complete()


def test_a_rejected_api_key_fails_at_once_with_a_clear_message(
    fake_openai: FakeOpenAI, write_team: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    from tests.fakeserver import http_error

    fake_openai.script("solo", [http_error(401, message="Incorrect API key provided")])
    path = write_team("""\
        supervisor: solo
        agents:
          solo: {model: openai/solo}
        """)

    code = main(["execute", str(path), "-i", "hi", "--progress", "none"])

    out, err = capsys.readouterr()
    assert code == 1
    assert out == ""  # stdout carries answers only
    assert "run failed" in err and "401" in err and TEST_KEY not in err
    assert len(fake_openai.requests("solo")) == 1  # not retried


def test_an_undefined_template_variable_is_a_usage_error_with_a_fix(
    fake_openai: FakeOpenAI, write_team: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    fake_openai.script("lead", [tool_calls(("ask_writer", {"task": "write"}))])
    path = write_team("""\
        supervisor: lead
        agents:
          lead: {model: openai/lead, delegates_to: [writer]}
          writer:
            model: openai/writer
            description: Writes.
            instructions: "Write for {{ vars.audience }}."
        """)

    code = main(["execute", str(path), "-i", "go", "--progress", "none"])

    out, err = capsys.readouterr()
    assert code == 2 and out == ""
    assert "cannot render agents.writer.instructions" in err
    assert "pass `--var audience=...`" in err and "Traceback" not in err
