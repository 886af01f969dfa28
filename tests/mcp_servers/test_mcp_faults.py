"""MCP servers that misbehave (``hostile_server.py``) and MCP with record/replay, driven through the CLI and API."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import teamrun
from teamrun.cli import main
from teamrun.testing.scripted import ScriptedModel, tool_calls
from tests.mcp_servers.conftest import hostile_server, marked_processes, write_team


def test_tool_names_that_sanitize_alike_get_distinct_function_names(tmp_path: Path, marker: str) -> None:
    entry = hostile_server(marker, "--tools", "a_b_2,a.b,a_b")
    path = write_team(tmp_path, {"lead": {"tools": ["n"]}}, {"n": entry})
    model = ScriptedModel(
        {"lead": [tool_calls(("n_a_b_2", {"text": "1"}), ("n_a_b", {"text": "2"}), ("n_a_b_3", {"text": "3"})), "done"]}
    )

    result = teamrun.load_team(path, chat_model=model).run_sync("go")

    model.assert_complete()
    assert result.status == "done", result.error
    # Names that need no change keep them; `a.b` (sanitized to a taken name) gets the first free suffix.
    assert model.calls[0].tool_names == ["n_a_b_2", "n_a_b_3", "n_a_b"]
    assert model.calls[1].tool_results == ['a_b_2: {"text": "1"}', 'a_b: {"text": "2"}', 'a.b: {"text": "3"}']
    assert marked_processes(marker) == []


def _execute(path: Path, capsys: pytest.CaptureFixture[str], *extra: str) -> tuple[int, dict[str, Any], str]:
    code = main(
        ["execute", str(path), "--model", "offline", "-i", "Use the tools.", "--json", "--progress", "none", *extra]
    )
    captured = capsys.readouterr()
    return code, json.loads(captured.out), captured.err


def _broken(path: Path, agents: dict[str, Any], entry: dict[str, Any]) -> None:
    """Rewrite the team with a server command that does not exist: were it started, the replay would fail."""
    write_team(path.parent, agents, {"n": {**entry, "mcp": {"command": ["no-such-mcp-server-anywhere"]}}})


def test_a_recorded_mcp_timeout_replays_with_the_same_error_and_answer(
    tmp_path: Path, marker: str, capsys: pytest.CaptureFixture[str]
) -> None:
    entry = hostile_server(marker, "--tools", "quick,stuck", "--slow", "stuck", timeout_s=1)
    agents = {"lead": {"tools": ["n"]}}
    path = write_team(tmp_path, agents, {"n": entry})
    cassette = tmp_path / "run.cassette.jsonl"

    recorded_code, recorded, _ = _execute(path, capsys, "--record", str(cassette))
    _broken(path, agents, entry)
    replayed_code, replayed, err = _execute(path, capsys, "--replay", str(cassette))

    assert "n_stuck: Error: tool 'n_stuck' timed out after 1 seconds" in recorded["final_text"]
    assert "n_quick: quick: {}" in recorded["final_text"]
    assert (replayed_code, replayed["status"], replayed["final_text"]) == (
        recorded_code,
        recorded["status"],
        recorded["final_text"],
    ), err
    tape = [json.loads(line) for line in (tmp_path / "run.cassette.mcp.jsonl").read_text().splitlines()[1:]]
    stuck = [item for item in tape if item.get("tool") == "stuck"]
    assert [(item["ok"], item["content"]) for item in stuck] == [(False, "tool 'n_stuck' timed out after 1 seconds")]
    assert marked_processes(marker) == []


def test_the_mcp_tape_keeps_what_the_model_saw_not_the_whole_output(
    tmp_path: Path, marker: str, capsys: pytest.CaptureFixture[str]
) -> None:
    entry = hostile_server(marker, "--tools", "dump", "--big", "dump", max_output_chars=2000)
    agents = {"lead": {"tools": ["n"]}}
    path = write_team(tmp_path, agents, {"n": entry})
    cassette = tmp_path / "run.cassette.jsonl"

    recorded_code, recorded, _ = _execute(path, capsys, "--record", str(cassette))
    _broken(path, agents, entry)
    replayed_code, replayed, err = _execute(path, capsys, "--replay", str(cassette))

    tape = tmp_path / "run.cassette.mcp.jsonl"
    (call,) = [json.loads(line) for line in tape.read_text().splitlines()[1:] if '"kind": "call"' in line]
    assert call["content"] == "".join(f"line {n:06d} of a big answer\n" for n in range(72))[:2000]
    assert call["omitted"] == 336_000 - 2000
    assert tape.stat().st_size < 5000  # the server's answer was 336,000 characters
    # A strict replay matches each model request by a hash of its messages: the model read the same text.
    assert recorded_code == replayed_code == 0, err
    assert replayed["final_text"] == recorded["final_text"] and "n_dump: line 000000 of a big" in replayed["final_text"]


def test_a_server_that_exits_while_its_child_holds_stdout_fails_later_calls_with_its_stderr(
    tmp_path: Path, marker: str
) -> None:
    entry = hostile_server(marker, "--tools", "echo,quit", "--orphan-on", "quit", timeout_s=20)
    path = write_team(tmp_path, {"lead": {"tools": ["n"]}}, {"n": entry})
    model = ScriptedModel(
        {
            "lead": [
                tool_calls(("n_echo", {"text": "hi"})),
                tool_calls(("n_quit", {})),
                tool_calls(("n_echo", {"text": "again"})),
                "done",
            ]
        }
    )

    result = teamrun.load_team(path, chat_model=model).run_sync("go")

    model.assert_complete()
    assert result.status == "done", result.error
    assert model.calls[1].tool_results == ['echo: {"text": "hi"}']
    (quit_result,) = model.calls[2].tool_results
    (again,) = model.calls[3].tool_results
    for text in (quit_result, again):  # not "timed out after 20 seconds": the exit is seen, not waited out
        assert text.startswith(
            "Error: the MCP server of tool entry 'n' is not running any more: "
            "it exited with status 7\n[stderr of the server, last lines]\norphan "
        ), text
        assert text.endswith("server exiting on purpose")
    assert marked_processes(marker) == []  # the child that held stdout is gone with the run


def test_a_server_printing_non_json_on_stdout_gets_one_warning_line(tmp_path: Path, marker: str) -> None:
    import os
    import subprocess
    import sys

    entry = hostile_server(marker, "--tools", "echo,other", "--noise")
    path = write_team(tmp_path, {"lead": {"tools": ["noisy"]}}, {"noisy": entry})
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path), "LITELLM_LOCAL_MODEL_COST_MAP": "True"}

    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "teamrun.cli",
            "execute",
            str(path),
            "-i",
            "go",
            "--model",
            "offline",
            "--progress",
            "none",
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )

    assert done.returncode == 0, done.stderr
    assert "- noisy_echo: echo: {}" in done.stdout and "- noisy_other: other: {}" in done.stdout
    warnings = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(warnings) == 1, done.stderr  # three lines were not JSON: one warning, no traceback
    assert "mcp_server_stdout_not_json" in warnings[0] and "tool=noisy" in warnings[0]
    assert "Starting hostile server v0 (this line is not JSON)" in warnings[0]
