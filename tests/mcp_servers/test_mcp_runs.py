"""MCP servers as tools, end to end: a scripted model calls real servers' tools through teamrun."""

from __future__ import annotations

import asyncio
import contextlib
import json
import signal
from pathlib import Path
from typing import Any

import pytest

import teamrun
from teamrun.errors import UserError
from teamrun.events import Event
from teamrun.testing.scripted import ScriptedCall, ScriptedModel, tool_call, tool_calls
from tests.cli_processes import child_env, running, teamrun_argv
from tests.mcp_servers.conftest import marked_processes, write_team
from tests.tools.conftest import RecordingApprover
from tests.waiting import wait_until


def _run(path: Path, script: dict[str, Any], **kwargs: Any) -> tuple[Any, ScriptedModel, list[Event]]:
    model = ScriptedModel(script)
    events: list[Event] = []
    cancel = kwargs.pop("cancel", None)
    team = teamrun.load_team(path, chat_model=model, **kwargs)
    result = asyncio.run(team.run("go", subscribers=[events.append], cancel=cancel))
    return result, model, events


def test_a_stdio_server_tools_reach_the_model_and_deny_hides_a_tool(
    tmp_path: Path, time_server: dict[str, Any], marker: str
) -> None:
    path = write_team(tmp_path, {"lead": {"tools": ["time"]}}, {"time": {**time_server, "deny": ["convert_time"]}})
    seen: list[ScriptedCall] = []

    def answer(call: ScriptedCall) -> str:
        seen.append(call)
        return "done"

    result, model, events = _run(
        path,
        {
            "lead": [
                tool_calls(
                    ("time_get_current_time", {"timezone": "Europe/Paris"}),
                    ("time_convert_time", {"source_timezone": "UTC", "time": "12:00", "target_timezone": "UTC"}),
                ),
                answer,
            ]
        },
    )

    model.assert_complete()
    assert result.status == "done" and result.final_text == "done"
    first = model.calls[0]
    assert first.tool_names == ["time_get_current_time"]  # convert_time is denied: never offered
    schema = first.tools[0]["function"]
    assert schema["parameters"]["required"] == ["timezone"] and "$schema" not in schema["parameters"]
    current, refused = seen[0].tool_results
    assert json.loads(current)["timezone"] == "Europe/Paris"  # the server's answer, as the model reads it
    assert refused.startswith("Error: there is no tool named 'time_convert_time'")
    tool_events = [(e.kind, e.data.get("tool"), e.data.get("status")) for e in events if e.kind.startswith("tool")]
    assert ("tool_start", "time_get_current_time", None) in tool_events
    assert ("tool_end", "time_get_current_time", "ok") in tool_events
    assert marked_processes(marker) == []  # stopped with the run


def test_allow_fixed_arguments_and_approval_on_the_git_server(
    tmp_path: Path, git_server: dict[str, Any], marker: str
) -> None:
    git = {**git_server, "allow": ["git_status", "git_log", "git_commit"], "require_approval": ["git_commit"]}
    path = write_team(tmp_path, {"lead": {"tools": ["git"]}}, {"git": git})
    approver = RecordingApprover(False)

    result, model, _ = _run(
        path,
        {
            "lead": [
                tool_calls(
                    ("git_log", {"max_count": 5}), ("git_commit", {"message": "sneaky"}), ("git_add", {"files": ["x"]})
                ),
                "done",
            ]
        },
        approver=approver,
    )

    model.assert_complete()
    assert result.status == "done"
    first, second = model.calls
    assert first.tool_names == ["git_status", "git_log", "git_commit"]  # entry `git` keeps `git_...` names
    log_params = first.tools[1]["function"]["parameters"]
    assert "repo_path" not in log_params["properties"] and "repo_path" not in log_params.get("required", [])
    log, commit, add = second.tool_results
    assert "say hello properly" in log and "first commit" in log
    assert commit.startswith("Error:") and "denied" in commit
    assert add.startswith("Error: there is no tool named 'git_add'")  # outside `allow`: refused
    assert approver.asked == [("git_commit", {"message": "sneaky"})]
    assert marked_processes(marker) == []


def test_approval_granted_lets_the_call_through(tmp_path: Path, git_server: dict[str, Any]) -> None:
    path = write_team(
        tmp_path,
        {"lead": {"tools": ["git"]}},
        {"git": {**git_server, "allow": ["git_status"], "require_approval": True}},
    )
    approver = RecordingApprover(True)

    result, model, _ = _run(path, {"lead": [tool_call("git_status"), "done"]}, approver=approver)

    assert result.status == "done"
    assert model.calls[1].tool_results[0].startswith("Repository status")
    assert [name for name, _ in approver.asked] == ["git_status"]


def test_http_server_content_kinds_and_truncation(everything_url: str, tmp_path: Path) -> None:
    token = "sekret-token-0123456789"
    entry = {
        "mcp": {"url": everything_url, "headers": {"Authorization": "Bearer ${EVERYTHING_TEST_TOKEN}"}},
        "allow": ["echo", "get-tiny-image", "get-structured-content", "get-resource-links", "get-resource-reference"],
        "max_output_chars": 300,
    }
    path = write_team(tmp_path, {"lead": {"tools": ["ev"]}}, {"ev": entry})
    model = ScriptedModel(
        {
            "lead": [
                tool_calls(
                    ("ev_echo", {"message": "hello"}),
                    ("ev_get-tiny-image", {}),
                    ("ev_get-structured-content", {"location": "Chicago"}),
                    ("ev_get-resource-links", {"count": 2}),
                    ("ev_get-resource-reference", {}),
                    ("ev_echo", {"message": "x" * 1000}),
                ),
                "done",
            ]
        }
    )
    team = teamrun.load_team(path, chat_model=model, environ={"EVERYTHING_TEST_TOKEN": token})

    result = team.run_sync("go")

    model.assert_complete()
    assert result.status == "done"
    assert model.calls[0].tool_names == [
        "ev_echo",
        "ev_get-tiny-image",
        "ev_get-structured-content",
        "ev_get-resource-links",
        "ev_get-resource-reference",
    ]
    echo, image, structured, links, reference, long = model.calls[1].tool_results
    assert echo == "Echo: hello"
    assert "[image: image/png," in image and "bytes; not shown as text]" in image
    assert "temperature" in json.loads(structured)
    assert links.count("[resource link: ") == 2 and "<demo://resource/" in links
    assert "[resource <demo://resource/" in reference and "plaintext resource" in reference
    assert long.startswith("Echo: xxx") and long.endswith("characters ...]") and "truncated" in long


def test_secrets_in_an_http_entry_are_masked_in_errors(tmp_path: Path) -> None:
    from tests.mcp_servers.conftest import free_port

    token = "sekret-token-0123456789"
    entry = {
        "mcp": {
            "url": f"http://127.0.0.1:{free_port()}/mcp?key=${{MY_API_KEY}}",
            "headers": {"Authorization": "Bearer ${MY_API_KEY}"},
        }
    }
    path = write_team(tmp_path, {"lead": {"tools": ["remote"]}}, {"remote": entry})
    team = teamrun.load_team(path, chat_model=ScriptedModel({"lead": ["unused"]}), environ={"MY_API_KEY": token})

    result = team.run_sync("go")

    assert result.status == "failed"
    assert "tool 'remote': the MCP server (http: http://127.0.0.1:" in (result.error or "")
    assert "key=***" in (result.error or "") and token not in (result.error or "")


def test_a_server_that_crashes_fails_only_the_calls_that_need_it(
    tmp_path: Path, time_server: dict[str, Any], git_server: dict[str, Any], marker: str
) -> None:
    path = write_team(
        tmp_path,
        {"lead": {"tools": ["time", "git"]}},
        {"time": time_server, "git": {**git_server, "allow": ["git_status"]}},
    )

    def kill_the_time_server(call: ScriptedCall) -> Any:
        (time_process,) = [p for p in marked_processes(marker) if "mcp_server_time" in " ".join(p.cmdline())]
        time_process.kill()
        time_process.wait(10)
        return tool_calls(("time_get_current_time", {"timezone": "UTC"}), ("git_status", {}))

    result, model, _ = _run(
        path,
        {
            "lead": [
                tool_call("time_get_current_time", timezone="UTC"),
                kill_the_time_server,
                tool_call("time_get_current_time", timezone="UTC"),
                "done",
            ]
        },
    )

    model.assert_complete()
    assert result.status == "done"
    assert json.loads(model.calls[1].tool_results[0])["timezone"] == "UTC"
    crashed, status = model.calls[2].tool_results
    assert crashed.startswith("Error: the MCP server of tool entry 'time' is not running any more")
    assert status.startswith("Repository status")  # the other server is unaffected
    (again,) = model.calls[3].tool_results
    assert again.startswith("Error: the MCP server of tool entry 'time' is not running any more")
    assert marked_processes(marker) == []


def test_a_server_that_fails_to_start_names_the_entry_and_shows_its_stderr(tmp_path: Path) -> None:
    import sys

    script = tmp_path / "failing_server.py"
    script.write_text("import sys\nsys.stderr.write('boom: ' + 'no config file here' + '\\n')\nsys.exit(3)\n")
    failing = [sys.executable, str(script)]  # the message is not in the argv: it must come from stderr
    path = write_team(tmp_path, {"lead": {"tools": ["broken"]}}, {"broken": {"mcp": {"command": failing}}})

    result, _, _ = _run(path, {"lead": ["never asked"]})

    assert result.status == "failed"
    assert "tool 'broken': the MCP server (stdio: " in (result.error or "")
    assert "could not start: it exited with status 3 before answering" in (result.error or "")
    assert "boom: no config file here" in (result.error or "")


def test_a_missing_server_program_is_a_setup_error_before_any_model_call(tmp_path: Path) -> None:
    path = write_team(
        tmp_path, {"lead": {"tools": ["ghost"]}}, {"ghost": {"mcp": {"command": ["no-such-mcp-server-anywhere"]}}}
    )
    model = ScriptedModel({"lead": []})

    with pytest.raises(UserError) as raised:  # issue 22 item 27: was a failed run (exit 0 or 1)
        teamrun.load_team(path, chat_model=model)

    assert model.calls == []
    assert str(raised.value) == (
        "tool 'ghost' (tools.ghost.mcp.command): its MCP server cannot start: the program "
        "'no-such-mcp-server-anywhere' is not installed (not found on PATH); install it, or write its full path"
    )


def test_servers_stop_when_the_run_fails(tmp_path: Path, time_server: dict[str, Any], marker: str) -> None:
    path = write_team(tmp_path, {"lead": {"tools": ["time"]}}, {"time": time_server})
    running: list[int] = []

    def call_then_check(call: ScriptedCall) -> Any:
        running.extend(p.pid for p in marked_processes(marker))
        return tool_call("time_get_current_time", timezone="UTC")

    result, _, _ = _run(path, {"lead": [call_then_check]})  # the script runs out: the model call fails

    assert result.status == "failed"
    assert running  # the server was up during the run...
    assert marked_processes(marker) == []  # ...and is gone after it


def test_servers_stop_when_the_run_is_cancelled(tmp_path: Path, time_server: dict[str, Any], marker: str) -> None:
    path = write_team(tmp_path, {"lead": {"tools": ["time"]}}, {"time": time_server})
    model = ScriptedModel()
    team = teamrun.load_team(path, chat_model=model)
    running: list[int] = []

    async def main() -> Any:
        cancel = asyncio.Event()

        def interrupt(call: ScriptedCall) -> Any:
            running.extend(p.pid for p in marked_processes(marker))
            cancel.set()
            return tool_call("time_get_current_time", timezone="UTC")

        model.add("lead", interrupt, "unused")
        return await team.run("go", cancel=cancel)

    result = asyncio.run(main())

    assert result.status == "cancelled"
    assert running
    assert marked_processes(marker) == []


def test_ctrl_c_on_teamrun_execute_leaves_no_server_behind(
    tmp_path: Path, time_server: dict[str, Any], marker: str
) -> None:
    import os
    import subprocess
    import sys

    import psutil

    slow_mark = f"{marker}-slow"  # in the slow tool's command line, to find its process
    slow = {"command": [sys.executable, "-c", "import time; time.sleep(60)", slow_mark], "timeout_s": 120}
    path = write_team(tmp_path, {"lead": {"tools": ["time", "slow"]}}, {"time": time_server, "slow": slow})

    def slow_tool_runs() -> bool:
        """The offline model has called both tools: the server runs, and so does the slow command."""
        lines = []
        for child in psutil.Process().children(recursive=True):
            with contextlib.suppress(psutil.Error):
                lines.append(child.cmdline())
        return bool(marked_processes(marker)) and any(slow_mark in line for line in lines)

    argv = teamrun_argv("execute", str(path), "-i", "go", "--model", "offline", "--progress", "none")
    env = child_env(PYTHONPATH=os.pathsep.join(sys.path))
    with running(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE) as process:
        wait_until(slow_tool_runs, "the MCP server and the slow command running", alive=process)
        process.send_signal(signal.SIGINT)
        _, err = process.communicate(timeout=60)
    assert process.returncode == 130, err
    assert marked_processes(marker) == []


def test_a_declared_server_no_running_agent_uses_is_never_started(
    tmp_path: Path, time_server: dict[str, Any], marker: str
) -> None:
    agents = {"lead": {"delegates_to": ["clock"]}, "clock": {"description": "Tells the time.", "tools": ["time"]}}
    path = write_team(tmp_path, agents, {"time": time_server})
    during: list[list[Any]] = []

    def answer(call: ScriptedCall) -> str:
        during.append(marked_processes(marker))
        return "no need to ask the clock"

    result, _, _ = _run(path, {"lead": [answer]})

    assert result.status == "done"
    assert during == [[]]


def test_a_function_name_clash_found_at_start_is_a_user_error(tmp_path: Path, time_server: dict[str, Any]) -> None:
    import sys

    tools = {"time": {**time_server, "prefix": ""}, "get_current_time": {"command": [sys.executable, "-V"]}}
    path = write_team(tmp_path, {"lead": {"tools": ["get_current_time", "time"]}}, tools)

    with pytest.raises(UserError, match="two functions named 'get_current_time'"):
        _run(path, {"lead": ["unused"]})


def test_the_offline_model_calls_mcp_tools_from_their_schemas(everything_url: str, tmp_path: Path) -> None:
    entry = {"mcp": {"url": everything_url}, "allow": ["get-sum", "echo"]}
    path = write_team(tmp_path, {"lead": {"tools": ["ev"]}}, {"ev": entry})

    result = teamrun.load_team(path, model="offline").run_sync("Add two numbers")

    assert result.status == "done"
    assert "ev_get-sum" in result.final_text and "The sum of" in result.final_text
    assert "ev_echo" in result.final_text and "Echo:" in result.final_text


def test_a_replayed_run_needs_no_server(
    tmp_path: Path, git_server: dict[str, Any], marker: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from teamrun.cli import main

    agents = {"lead": {"delegates_to": ["historian"]}, "historian": {"description": "Reads git.", "tools": ["git"]}}
    path = write_team(tmp_path, agents, {"git": {**git_server, "allow": ["git_status", "git_log"]}})
    cassette = tmp_path / "run.cassette.jsonl"
    run = ["execute", str(path), "--model", "offline", "-i", "What happened?", "--json", "--progress", "none"]

    assert main([*run, "--record", str(cassette)]) == 0
    recorded = json.loads(capsys.readouterr().out)
    assert (tmp_path / "run.cassette.mcp.jsonl").is_file()
    broken = {**git_server, "mcp": {"command": ["no-such-mcp-server-anywhere"]}, "allow": ["git_status", "git_log"]}
    write_team(tmp_path, agents, {"git": broken})  # were it started, the replay would fail
    code = main([*run, "--replay", str(cassette)])
    replayed = json.loads(capsys.readouterr().out)

    assert code == 0, replayed["error"]
    assert "git_log: Commit history" in recorded["final_text"]
    assert replayed["final_text"] == recorded["final_text"]
    assert marked_processes(marker) == []


def test_approve_on_the_command_line_names_an_mcp_tool(
    tmp_path: Path, git_server: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    from teamrun.cli import main

    git = {**git_server, "allow": ["git_status", "git_log"], "require_approval": ["git_log"]}
    path = write_team(tmp_path, {"lead": {"tools": ["git"]}}, {"git": git})
    run = ["execute", str(path), "--model", "offline", "-i", "What happened?", "--json", "--progress", "none"]

    approved = main([*run, "--approve", "git_log"])
    approved_text = json.loads(capsys.readouterr().out)["final_text"]
    unapproved = main([*run, "--approve", "none"])
    unapproved_text = json.loads(capsys.readouterr().out)["final_text"]

    assert approved == unapproved == 0
    assert "git_log: Commit history" in approved_text
    assert "git_log: Error: " in unapproved_text and "git_status: Repository status" in unapproved_text
