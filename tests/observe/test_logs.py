"""`--log-format json`: structured log lines on stderr carry run_id and agent; stdout keeps only the answer."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from teamrun.cli import main
from tests.fakeserver import FakeOpenAI, text, tool_calls
from tests.observe.conftest import TeamWriter


def test_json_logs_carry_run_id_and_agent_and_stdout_only_the_answer(
    fake_openai: FakeOpenAI,
    write_team: TeamWriter,
    capsys: pytest.CaptureFixture[str],
    restore_structlog: None,
) -> None:
    fake_openai.script(
        "lead",
        [
            tool_calls(("delegate_task", {"task": "look it up", "agents": ["ghost", "alpha"]})),
            text("the answer"),
        ],
    )
    fake_openai.script("alpha", [text("alpha found it")])
    team = write_team("""\
        supervisor: lead
        agents:
          lead: {model: openai/lead, delegates_to: [alpha], delegation: {tool: delegate_task}}
          alpha: {model: openai/alpha, description: Looks things up.}
        """)

    code = main(["-v", "--log-format", "json", "execute", str(team), "-i", "go", "--progress", "none", "--json"])

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


def test_answer_alone_on_stdout_with_json_logs(
    fake_openai: FakeOpenAI, write_team: TeamWriter, capsys: pytest.CaptureFixture[str], restore_structlog: None
) -> None:
    fake_openai.script("lead", [text("plain answer")])
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


def test_library_warnings_become_json_lines_on_stderr(
    capsys: pytest.CaptureFixture[str], restore_structlog: None
) -> None:
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


_LIBRARY_SCRIPT = """
import logging, sys
import structlog
import teamrun
from teamrun.logs import get_logger

if sys.argv[2] == "debug":
    logging.basicConfig(level=logging.DEBUG, stream=sys.stderr, format="%(levelname)s %(name)s %(message)s")
team = teamrun.load_team(sys.argv[1])
result = team.run_sync("go")
get_logger("teamrun.example").warning("a_warning_for_the_user", detail=1)
print("status", result.status, "structlog configured:", structlog.is_configured())
"""

_TOOL_TEAM = """\
version: 1
name: library-team
supervisor: lead
defaults: {{model: offline}}
agents:
  lead: {{description: Leads., tools: [stamp]}}
tools:
  stamp:
    description: Prints a stamp.
    command: [{python}, "-c", "print('stamped')"]
"""


def _run_library(tmp_path: Path, mode: str) -> tuple[str, str]:
    import os
    import subprocess
    import sys

    team = tmp_path / "team.yaml"
    team.write_text(_TOOL_TEAM.format(python=json.dumps(sys.executable)), encoding="utf-8")
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    done = subprocess.run(
        [sys.executable, "-c", _LIBRARY_SCRIPT, str(team), mode],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=True,
    )
    return done.stdout, done.stderr


def test_a_library_user_gets_python_logging_defaults(tmp_path: Path) -> None:
    out, err = _run_library(tmp_path, "defaults")

    assert out == "status done structlog configured: False\n"  # teamrun configured nothing; stdout is the program's
    assert "a_warning_for_the_user detail=1" in err  # Python's last-resort handler: warnings on stderr
    assert "command_finished" not in err + out  # debug is not shown


def test_a_library_user_who_configures_logging_gets_teamrun_debug_lines_there(tmp_path: Path) -> None:
    out, err = _run_library(tmp_path, "debug")

    assert out.splitlines()[-1] == "status done structlog configured: False"  # (LiteLLM prints its own debug)
    assert "command_finished" not in out
    assert "DEBUG teamrun.tools.command_tool command_finished tool='stamp' exit_code=0" in err
    assert "WARNING teamrun.example a_warning_for_the_user detail=1" in err


def test_only_the_cli_configures_logging() -> None:
    import ast

    package = Path(__file__).resolve().parents[2] / "runner" / "teamrun"
    callers = []
    for path in sorted(package.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Call):
                called = ast.unparse(node.func)
                if called in (
                    "configure_logging",
                    "structlog.configure",
                    "logging.basicConfig",
                    "ensure_default_logging",
                ):
                    callers.append(f"{path.relative_to(package)}: {called}")
    # serve/workers.py: a `teamrun serve --workers N` process is the CLI's own child and applies the CLI's settings
    assert callers == [
        "cli/app.py: configure_logging",
        "logs.py: structlog.configure",
        "serve/workers.py: configure_logging",
    ]


_RAISING_CHECK_TEAM = """\
version: 1
name: checked
supervisor: lead
defaults: {model: offline}
agents:
  lead: {instructions: Lead., delegates_to: [writer]}
  writer:
    instructions: Write.
    max_attempts: 2
    accept: [{python: "checks:boom"}]
"""


@pytest.mark.parametrize("argv", [["--progress", "plain"], ["--progress", "none"]])
def test_a_run_warning_is_said_once(
    argv: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str], restore_structlog: None
) -> None:
    """A python accept check that raises: the run goes on, and its warning is on stderr once,
    in the progress view when it shows warnings, else as a log line."""
    (tmp_path / "team.yaml").write_text(_RAISING_CHECK_TEAM)
    (tmp_path / "checks.py").write_text("def boom(answer, case):\n    raise RuntimeError('kaboom')\n")

    code = main(["execute", str(tmp_path / "team.yaml"), "-i", "write a poem", *argv])

    out, err = capsys.readouterr()
    assert code == 0 and out
    said = [line for line in err.splitlines() if "accept: writer failed python checks:boom" in line]
    assert len(said) == 1, err
    assert "the check raised RuntimeError: kaboom after 2 attempts" in said[0]
    assert "Traceback" not in err
