"""Tools marked ``require_approval`` through ``teamrun execute``, run as in CI (no terminal)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from teamrun.cli import main
from tests.fakeserver import FakeOpenAI, text, tool_calls

STAMP_SCRIPT = "import pathlib, sys; pathlib.Path(sys.argv[1]).write_text('ran'); print('STAMP-OUTPUT-' + sys.argv[2])"

TEAM = """\
    supervisor: lead
    agents:
      lead: {{model: openai/lead, delegates_to: [worker]}}
      worker:
        model: openai/worker
        description: Stamps files.
        tools: [stamp, noop]
    tools:
      stamp:
        description: Write a stamp file.
        command: [{python}, "-c", {script}, "{{{{ path }}}}", "{{{{ word }}}}"]
        parameters:
          path: {{type: string}}
          word: {{type: string}}
        require_approval: true
      noop:
        description: Does nothing.
        command: [{python}, "-c", "print('noop')"]
    """


@pytest.fixture
def team_file(write_team: Any) -> Path:
    python, script = json.dumps(sys.executable), json.dumps(STAMP_SCRIPT)
    return write_team(TEAM.format(python=python, script=script))


def _script(server: FakeOpenAI, marker: Path) -> None:
    server.script(
        "lead",
        [
            tool_calls(("ask_worker", {"task": "stamp the file"})),
            text("lead done"),
        ],
    )
    server.script(
        "worker",
        [
            tool_calls(("stamp", {"path": str(marker), "word": "hello"})),
            text("worker done"),
        ],
    )


def _tool_result_seen_by_worker(server: FakeOpenAI) -> str:
    second = server.requests("worker")[1].request
    tool_messages = [m for m in second["messages"] if m.get("role") == "tool"]
    assert len(tool_messages) == 1
    return str(tool_messages[0]["content"])


def _execute(team_file: Path, *extra: str) -> int:
    return main(["execute", str(team_file), "-i", "stamp it", "--progress", "none", *extra])


def test_without_approve_the_tool_is_denied_with_a_rerun_hint(
    fake_openai: FakeOpenAI, team_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    marker = tmp_path / "stamp.txt"
    _script(fake_openai, marker)

    code = _execute(team_file)

    assert code == 0 and capsys.readouterr().out == "lead done\n"
    assert not marker.exists(), "a tool that needs approval ran without it"
    seen = _tool_result_seen_by_worker(fake_openai)
    assert seen.startswith("Error:")
    assert "STAMP-OUTPUT" not in seen
    assert "rerun with `--approve stamp`" in seen
    fake_openai.assert_complete()


def test_approve_tool_lets_it_run_and_its_output_reaches_the_worker(
    fake_openai: FakeOpenAI, team_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    marker = tmp_path / "stamp.txt"
    _script(fake_openai, marker)

    code = _execute(team_file, "--approve", "stamp")

    assert code == 0 and capsys.readouterr().out == "lead done\n"
    assert marker.read_text() == "ran"
    assert _tool_result_seen_by_worker(fake_openai).strip() == "STAMP-OUTPUT-hello"
    fake_openai.assert_complete()


def test_approve_none_denies(
    fake_openai: FakeOpenAI, team_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    marker = tmp_path / "stamp.txt"
    _script(fake_openai, marker)

    code = _execute(team_file, "--approve", "none")

    assert code == 0
    assert not marker.exists()
    seen = _tool_result_seen_by_worker(fake_openai)
    assert "`--approve none`" in seen and "rerun with `--approve stamp`" in seen
    fake_openai.assert_complete()


def test_approving_another_tool_does_not_approve_this_one(
    fake_openai: FakeOpenAI, team_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    marker = tmp_path / "stamp.txt"
    _script(fake_openai, marker)

    code = _execute(team_file, "--approve", "noop")

    assert code == 0
    assert not marker.exists()
    assert "`--approve noop,stamp`" in _tool_result_seen_by_worker(fake_openai)
    fake_openai.assert_complete()
