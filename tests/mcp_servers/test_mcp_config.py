"""MCP tool entries in the team file: validation, --import-check, `teamrun tools`, naming, result text."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from teamrun.cli import main
from teamrun.config.loader import check_text
from teamrun.config.tool_names import FUNCTION_NAME, mcp_function_name
from tests.mcp_servers.conftest import marked_processes, write_team

BASE = {"version": 1, "name": "t", "supervisor": "lead"}


def _messages(agents: dict[str, Any], tools: dict[str, Any]) -> list[str]:
    text = yaml.safe_dump({**BASE, "agents": agents, "tools": tools}, sort_keys=False)
    return [d.render() for d in check_text(text, "team.yaml", environ={}).diagnostics]


def test_an_mcp_entry_needs_exactly_one_transport() -> None:
    both = _messages({"lead": {"tools": ["s"]}}, {"s": {"mcp": {"command": ["x"], "url": "http://h/mcp"}}})
    neither = _messages({"lead": {"tools": ["s"]}}, {"s": {"mcp": {"env": {"A": "1"}}}})

    assert both == ["team.yaml:10:5: error: tools.s.mcp has both 'command:' and 'url:'; keep one"]
    assert neither == [
        "team.yaml:10:5: error: tools.s.mcp needs 'command:' (a program, over stdio) or 'url:' "
        "(a streamable HTTP endpoint)"
    ]


def test_keys_that_do_not_fit_the_entry_are_errors() -> None:
    found = _messages(
        {"lead": {"tools": ["c", "h"]}},
        {
            "c": {"command": ["ls"], "allow": ["x"], "require_approval": ["x"]},
            "h": {"mcp": {"url": "http://h/mcp", "env": {"A": "1"}}, "parameters": {"a": {"type": "string"}}},
        },
    )

    assert any("tools.c.allow only applies to MCP servers ('mcp:')" in m for m in found)
    assert any("tools.c.require_approval: a list of tool names only applies to MCP servers" in m for m in found)
    assert any("tools.h.mcp.env only applies to stdio servers ('command:')" in m for m in found)
    assert any("tools.h.parameters does not apply to an MCP server" in m for m in found)
    assert all(":" in m.split(" error: ")[0] for m in found)  # each one file:line:col


def test_a_name_an_allow_list_adds_may_not_clash_with_a_delegation_tool() -> None:
    found = _messages(
        {"lead": {"tools": ["srv"], "delegates_to": ["worker"]}, "worker": {"description": "w"}},
        {"srv": {"mcp": {"command": [sys.executable]}, "prefix": "", "allow": ["ask_worker", "other"]}},
    )

    assert found == [
        "team.yaml:7:7: error: agent 'lead' would be offered two functions named 'ask_worker': the delegation "
        "tool for 'worker' and the tool 'ask_worker' of MCP server 'srv'; set tools.srv.prefix or leave the tool "
        "out of allow"
    ]


def test_an_mcp_entry_with_every_option_is_valid() -> None:
    found = _messages(
        {"lead": {"tools": ["s", "h"]}},
        {
            "s": {
                "mcp": {"command": [sys.executable, "--flag"], "env": {"TOKEN": "x"}, "cwd": "."},
                "allow": ["a", "b"],
                "deny": ["b"],
                "require_approval": ["a"],
                "prefix": "p_",
                "fixed_arguments": {"repo": "."},
                "timeout_s": 5,
                "max_output_chars": 100,
                "description": "A server.",
            },
            "h": {
                "mcp": {"url": "https://example.com/mcp", "headers": {"Authorization": "Bearer x"}},
                "require_approval": True,
            },
        },
    )

    assert found == ["team.yaml:22:7: warning: 'b' is both allowed and denied; it is not offered"]


def test_function_names_are_prefixed_sanitized_and_unique() -> None:
    assert mcp_function_name("git_", "git_status") == "git_status"  # already carries the prefix
    assert mcp_function_name("ev_", "get-sum") == "ev_get-sum"
    assert mcp_function_name("x_", "files/read.all") == "x_files_read_all"
    long_a, long_b = mcp_function_name("srv_", "a" * 80), mcp_function_name("srv_", "a" * 79 + "b")
    assert len(long_a) == len(long_b) == 64 and long_a != long_b
    assert all(FUNCTION_NAME.match(n) for n in (long_a, long_b, mcp_function_name("", "é")))


def test_import_check_reports_an_allowed_name_the_server_does_not_offer(
    tmp_path: Path, time_server: dict[str, Any], marker: str, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write_team(tmp_path, {"lead": {"tools": ["time"]}}, {"time": {**time_server, "allow": ["get_curent_time"]}})

    plain = main(["validate", str(path)])
    checked = main(["validate", "--import-check", str(path)])

    out = capsys.readouterr().out
    assert plain == 0  # without --import-check nothing is started
    assert checked == 2
    assert (
        "error: tools.time.allow[0]: the MCP server offers no tool 'get_curent_time'; did you mean "
        "'get_current_time'?" in out
    )
    assert marked_processes(marker) == []


def test_import_check_reports_a_server_that_cannot_start(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    script = tmp_path / "failing_server.py"
    script.write_text("import sys\nsys.stderr.write('cannot ' + 'read settings' + '\\n')\nsys.exit(1)\n")
    failing = [sys.executable, str(script)]  # the message is not in the argv: it must come from stderr
    path = write_team(tmp_path, {"lead": {"tools": ["bad"]}}, {"bad": {"mcp": {"command": failing}}})

    code = main(["validate", "--import-check", str(path)])

    out = capsys.readouterr().out
    assert code == 2
    assert "error: tool 'bad': the MCP server (stdio: " in out and "cannot read settings" in out


def test_tools_command_lists_each_agents_functions(
    tmp_path: Path, time_server: dict[str, Any], marker: str, capsys: pytest.CaptureFixture[str]
) -> None:
    agents = {"lead": {"delegates_to": ["clock"]}, "clock": {"description": "Tells the time.", "tools": ["time"]}}
    path = write_team(tmp_path, agents, {"time": {**time_server, "require_approval": ["convert_time"]}})

    code = main(["tools", str(path)])
    shown = capsys.readouterr().out
    json_code = main(["tools", str(path), "--agent", "clock", "--format", "json"])
    listing = json.loads(capsys.readouterr().out)

    assert code == json_code == 0
    assert "lead:\n  ask_clock  (delegation)\n    Tells the time." in shown
    assert "clock:\n  time_get_current_time  (mcp:time)\n    Get current time in a specific timezone" in shown
    assert "      timezone: string (required) — IANA timezone name" in shown
    assert "  time_convert_time  (mcp:time) [asks for approval]" in shown
    assert [f["name"] for f in listing["clock"]] == ["time_get_current_time", "time_convert_time"]
    assert listing["clock"][0]["parameters"]["required"] == ["timezone"]
    assert marked_processes(marker) == []  # started to ask, then stopped


def test_error_results_and_content_kinds_map_to_text() -> None:
    from mcp.types import CallToolResult, ImageContent, TextContent

    from teamrun.errors import ToolError
    from teamrun.tools.mcp import result_text

    failed = CallToolResult(content=[TextContent(type="text", text="no such branch")], is_error=True)
    structured_only = CallToolResult(content=[], structured_content={"n": 3})
    image = CallToolResult(content=[ImageContent(type="image", data="aGVsbG8=", mime_type="image/png")])

    with pytest.raises(ToolError, match="no such branch"):
        result_text(failed, "git_checkout")
    assert json.loads(result_text(structured_only, "count")) == {"n": 3}
    assert result_text(image, "pic") == "[image: image/png, 5 bytes; not shown as text]"


def test_env_and_header_values_are_masked_but_short_settings_are_not() -> None:
    from teamrun.config.models import ToolDef
    from teamrun.tools.mcp import McpToolSource

    definition = ToolDef.model_validate(
        {"mcp": {"command": ["srv", "--key", "supersecret-value"], "env": {"DEBUG": "0", "KEY": "supersecret-value"}}}
    )
    source = McpToolSource("srv", definition, base_dir=Path.cwd())

    assert source.describe_target() == "srv --key ***"
    assert source.mask("exit 0: supersecret-value rejected") == "exit 0: *** rejected"


def _without_mcp_server_git(monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """PATH without the folder holding the `mcp-server-git` program (the shared venv's bin)."""
    import os
    import shutil

    found = shutil.which("mcp-server-git")
    folders = os.environ.get("PATH", "").split(os.pathsep)
    path = os.pathsep.join(f for f in folders if not found or Path(f).resolve() != Path(found).parent.resolve())
    monkeypatch.setenv("PATH", path)
    assert shutil.which("mcp-server-git") is None
    return {**os.environ, "PATH": path}


def test_repo_explainer_without_its_server_stops_with_exit_2_and_the_install_hint(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    import os
    import subprocess

    env = _without_mcp_server_git(monkeypatch)
    env["PYTHONPATH"] = os.pathsep.join(sys.path)
    team = Path(__file__).parents[2] / "teams" / "repo-explainer.yaml"
    cassette = tmp_path / "run.cassette.jsonl"

    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "teamrun.cli",
            "execute",
            str(team),
            "-i",
            "What happened?",
            "--model",
            "offline",
            "--progress",
            "none",
            "--record",
            str(cassette),
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )

    assert done.returncode == 2, done.stderr
    assert done.stdout == ""
    assert done.stderr.strip() == (
        "error: tool 'git' (tools.git.mcp.command): its MCP server cannot start: the program 'mcp-server-git' is "
        "not installed (not found on PATH); install it: pip install mcp-server-git"
    )
    assert not cassette.exists() or len(cassette.read_text().splitlines()) <= 1  # no model call was made


def test_validate_warns_at_the_program_of_a_server_that_is_not_installed(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _without_mcp_server_git(monkeypatch)
    team = Path(__file__).parents[2] / "teams" / "repo-explainer.yaml"
    line = next(n for n, text in enumerate(team.read_text().splitlines(), 1) if "command: [mcp-server-git" in text)

    code = main(["validate", str(team)])
    strict = main(["validate", "--strict", str(team)])

    out = capsys.readouterr().out
    assert (code, strict) == (0, 2)  # a warning: CI may validate where the server is not installed
    assert (
        f"repo-explainer.yaml:{line}:17: warning: tools.git.mcp.command: the program 'mcp-server-git' is not "
        "installed (not found on PATH); install it: pip install mcp-server-git; the run would stop before it "
        "starts" in out
    )
