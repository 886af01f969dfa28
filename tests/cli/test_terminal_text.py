"""Text from a model, a provider or a file reaches the terminal inert (issue 42 item 22): an answer, an error, a
question or a name holding ``ESC ] 0 ; ... BEL`` (sets the terminal title; OSC 52 writes the clipboard) is shown
with its control characters as U+FFFD by every terminal printer — one function, ``observe.bidi.inert``."""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path

import pytest

from teamrun.cli import main
from tests.observe.handmade import solo_run, write_trace

TITLE = "\x1b]0;pwned\x07"
CLIPBOARD = "\x1b]52;c;aGVsbG8=\x07"
CSI = "\x9b2J"  # the one-byte CSI (C1): clears the screen on some terminals

TEAM = """version: 1
name: echo-team
supervisor: lead
agents:
  lead:
    instructions: Answer.
"""


def _no_controls(text: str) -> None:
    assert not any(char in text for char in "\x1b\x07\x9b\r"), repr(text)


@pytest.fixture
def team(tmp_path: Path) -> Path:
    path = tmp_path / "team.yaml"
    path.write_text(TEAM, encoding="utf-8")
    return path


def _run(team: Path, store: Path, capsys: pytest.CaptureFixture[str], *more: str) -> str:
    """A run on the offline model (its answer repeats the input), journaled: its run id."""
    task = f"Say {TITLE}{CLIPBOARD}{CSI} now"
    code = main(["execute", str(team), "-i", task, "--store", str(store), "--json", "--progress", "none", *more])
    out, err = capsys.readouterr()
    assert code == 0, err
    result = json.loads(out)
    assert TITLE in result["final_text"]  # the offline model's answer carries the sequences
    return str(result["run_id"])


def test_runs_show_prints_an_answer_with_escape_sequences_inert(
    team: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = tmp_path / "runs.db"
    run_id = _run(team, store, capsys)
    assert main(["runs", "show", run_id, "--store", str(store)]) == 0
    out = capsys.readouterr().out
    _no_controls(out)
    assert "Say \ufffd]0;pwned\ufffd\ufffd]52;c;aGVsbG8=\ufffd\ufffd2J now" in out
    assert main(["runs", "list", "--store", str(store)]) == 0
    _no_controls(capsys.readouterr().out)


def test_threads_show_prints_turns_inert(team: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store = tmp_path / "runs.db"
    _run(team, store, capsys, "--thread", "t1")
    assert main(["threads", "show", "t1", "--store", str(store)]) == 0
    out = capsys.readouterr().out
    _no_controls(out)
    assert "\ufffd]0;pwned\ufffd" in out


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_execute_prints_the_answer_inert_on_a_terminal_and_as_is_in_a_pipe(
    team: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    task = f"Say {TITLE} now"
    assert main(["execute", str(team), "-i", task, "--progress", "none"]) == 0
    assert TITLE in capsys.readouterr().out  # a pipe or a file gets the answer byte for byte

    terminal = _Terminal()
    monkeypatch.setattr(sys, "stdout", terminal)
    assert main(["execute", str(team), "-i", task, "--progress", "none"]) == 0
    _no_controls(terminal.getvalue())
    assert "Say \ufffd]0;pwned\ufffd now" in terminal.getvalue()


def test_progress_lines_show_a_tool_error_inert(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    team = tmp_path / "team.yaml"
    script = "import sys; sys.stderr.write('\\x1b]52;c;aGVsbG8=\\x07 boom'); sys.exit(3)"
    team.write_text(
        TEAM
        + f"    tools: [fail]\ntools:\n  fail: {{command: [{json.dumps(sys.executable)}, -c, {json.dumps(script)}]}}\n",
        encoding="utf-8",
    )
    assert main(["execute", str(team), "-i", "go", "--progress", "plain"]) == 0
    err = capsys.readouterr().err
    assert "tool fail error: command" in err and "boom" in err, err
    _no_controls(err)


def test_trace_show_prints_an_agent_name_and_an_error_inert(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    records = solo_run(agent=f"lead{TITLE}", calls=1)
    for record in records:
        if record["kind"] == "llm_end":
            record["data"].update(status="error", error=f"provider said {CLIPBOARD}")
    trace_file = write_trace(tmp_path / "run.jsonl", records)
    for view in ([], ["--calls"], ["--format", "mermaid"]):
        assert main(["trace", "show", str(trace_file), *view]) == 0
        out = capsys.readouterr().out
        _no_controls(out)
        assert "lead\ufffd]0;pwned\ufffd" in out


ASKING = """version: 1
name: ask-two
supervisor: lead
tools:
  ask_ops: {person: {choices: [eu-west-1, us-east-1]}}
  ask_legal: {person: {}}
agents:
  lead: {delegates_to: [infra, legal]}
  infra: {description: Picks the region., tools: [ask_ops]}
  legal: {description: Signs off., tools: [ask_legal]}
"""


def test_pending_questions_are_listed_inert(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The offline model asks the task it was given: a question holding a terminal escape, listed by execute,
    `runs list`, `runs show` and `answer` (the run waits for the next question)."""
    team = tmp_path / "team.yaml"
    team.write_text(ASKING, encoding="utf-8")
    store = str(tmp_path / "runs.db")
    task = f"Launch {TITLE}"
    code = main(["execute", str(team), "-i", task, "--store", store, "--detach", "--json", "--progress", "none"])
    out, err = capsys.readouterr()
    assert code == 4, err
    _no_controls(err)
    assert "asks Launch \ufffd]0;pwned\ufffd" in err
    run_id = json.loads(out)["run_id"]
    for command in (["runs", "list"], ["runs", "show", run_id]):
        assert main([*command, "--store", store]) == 0
        shown = capsys.readouterr().out
        _no_controls(shown)
        assert "asks Launch \ufffd]0;pwned\ufffd" in shown
    assert main(["runs", "show", run_id, "--store", store, "--json"]) == 0
    first = json.loads(capsys.readouterr().out)["pending"][0]["item"]

    assert main(["answer", run_id, first, "eu-west-1", "--store", store, "--progress", "none"]) == 4
    err = capsys.readouterr().err
    _no_controls(err)
    assert "asks Launch \ufffd]0;pwned\ufffd" in err
