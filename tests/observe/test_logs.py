"""`--log-format json`: structured log lines on stderr carry run_id and agent; stdout keeps only the answer."""

from __future__ import annotations

import json

import pytest

from teamrun.cli import main
from tests.fakeserver import FakeOpenAI, text, tool_calls
from tests.observe.conftest import TeamWriter


def test_json_logs_carry_run_id_and_agent_and_stdout_only_the_answer(
    server: FakeOpenAI, write_team: TeamWriter, capsys: pytest.CaptureFixture[str], restore_structlog: None,
) -> None:
    server.script("lead", [
        tool_calls(("delegate_task", {"task": "look it up", "agents": ["ghost", "alpha"]})),
        text("the answer"),
    ])
    server.script("alpha", [text("alpha found it")])
    team = write_team("""\
        supervisor: lead
        agents:
          lead: {model: openai/lead, delegates_to: [alpha], delegation: {tool: delegate_task}}
          alpha: {model: openai/alpha, description: Looks things up.}
        """)

    code = main(["-v", "--log-format", "json", "execute", str(team), "-i", "go", "--progress", "none",
                 "--json"])

    out, err = capsys.readouterr()
    assert code == 0, err
    result = json.loads(out)  # stdout is exactly one JSON document: the result
    assert result["final_text"] == "the answer"
    lines = [json.loads(line) for line in err.splitlines() if line.strip()]  # every stderr line is JSON
    (warning,) = [e for e in lines if e["event"] == "run_warning"]
    assert warning["level"] == "warning"
    assert warning["run_id"] == result["run_id"]
    assert warning["agent"] == "lead" and warning["team"] == "observed-team"
    assert "unknown agent 'ghost'" in warning["message"]
    assert "timestamp" in warning


def test_answer_alone_on_stdout_with_json_logs(server: FakeOpenAI, write_team: TeamWriter,
                                               capsys: pytest.CaptureFixture[str], restore_structlog: None) -> None:
    server.script("lead", [text("plain answer")])
    team = write_team("""\
        supervisor: lead
        agents:
          lead: {model: openai/lead}
        """)

    code = main(["-vv", "--log-format", "json", "execute", str(team), "-i", "go", "--progress", "none"])

    out, err = capsys.readouterr()
    assert code == 0
    assert out == "plain answer\n"
    assert all(json.loads(line) for line in err.splitlines() if line.strip())


def test_library_warnings_become_json_lines_on_stderr(capsys: pytest.CaptureFixture[str],
                                                      restore_structlog: None) -> None:
    import logging

    from teamrun.logs import configure_logging

    configure_logging(0, "json")
    logging.getLogger("LiteLLM").warning("LoggingWorker: event loop changed (%d tasks)", 3)
    logging.getLogger("LiteLLM").info("below the level: dropped")
    logging.getLogger("some.library").warning("a library speaks")

    out, err = capsys.readouterr()
    assert out == ""
    lines = [json.loads(line) for line in err.splitlines()]
    assert [(e["logger"], e["event"], e["level"]) for e in lines] == [
        ("LiteLLM", "LoggingWorker: event loop changed (3 tasks)", "warning"),
        ("some.library", "a library speaks", "warning"),
    ]
