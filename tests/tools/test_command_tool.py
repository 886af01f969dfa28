"""Command tools: argv templating without a shell, exit codes, timeouts, errors."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from teamrun.config.models import ToolDef
from teamrun.errors import UserError
from teamrun.tools import CommandTool, ToolOutcome, build_tools, invoke_tool
from tests.waiting import wait_until, wait_until_async

PY = sys.executable
ECHO_ARGV = "import json, sys; print(json.dumps(sys.argv[1:]))"


def command_tool(command: list[str], **fields: Any) -> CommandTool:
    tools = build_tools({"cmd": ToolDef(command=command, **fields)}, base_dir=Path.cwd())
    tool = tools["cmd"]
    assert isinstance(tool, CommandTool)
    return tool


def call(tool: CommandTool, arguments: dict[str, Any], approver: Any) -> ToolOutcome:
    return asyncio.run(invoke_tool(tool, json.dumps(arguments), approver=approver))


def test_schema_from_parameters() -> None:
    tool = command_tool(
        ["grep", "-rn", "{{ pattern }}", "{{ path }}"],
        parameters={"pattern": {"type": "string"}, "path": {"type": "string", "default": "."}},
        description="Search files.",
    )
    assert tool.spec.description == "Search files."
    assert tool.spec.parameters == {
        "type": "object",
        "properties": {"pattern": {"type": "string"}, "path": {"type": "string", "default": "."}},
        "required": ["pattern"],
        "additionalProperties": False,
    }


def test_values_are_literal_argv_items_never_shell(allow: Any, tmp_path: Path) -> None:
    victim = tmp_path / "x"
    victim.mkdir()
    tool = command_tool(
        [PY, "-c", ECHO_ARGV, "--text={{ text }}", "{{ text }}", "$HOME", "*"],
        parameters={"text": {"type": "string"}},
        cwd=str(tmp_path),
    )
    hostile = f"; rm -rf {victim} && echo $(whoami) `id` | cat > out"
    outcome = call(tool, {"text": hostile}, allow)
    assert outcome.ok, outcome.content
    assert json.loads(outcome.content) == [f"--text={hostile}", hostile, "$HOME", "*"]
    assert victim.exists()
    assert not (tmp_path / "out").exists()


def test_empty_rendered_item_is_kept(allow: Any) -> None:
    tool = command_tool(
        [PY, "-c", ECHO_ARGV, "{{ flag }}", "end"],
        parameters={"flag": {"type": "string", "default": ""}},
    )
    assert json.loads(call(tool, {}, allow).content) == ["", "end"]


def test_templates_can_use_jinja_expressions(allow: Any) -> None:
    tool = command_tool(
        [
            PY,
            "-c",
            ECHO_ARGV,
            "{{ 'yes' if loud else 'no' }}",
            "{{ n + 1 }}",
            "{{ words | join(',') }}",
        ],
        parameters={
            "loud": {"type": "boolean"},
            "n": {"type": "integer"},
            "words": {"type": "array", "items": {"type": "string"}},
        },
    )
    outcome = call(tool, {"loud": True, "n": 1, "words": ["a", "b"]}, allow)
    assert json.loads(outcome.content) == ["yes", "2", "a,b"]


def test_templates_are_sandboxed(allow: Any) -> None:
    tool = command_tool(
        [PY, "-c", ECHO_ARGV, "{{ text.__class__.__mro__[1].__subclasses__() }}"],
        parameters={"text": {"type": "string"}},
    )
    outcome = call(tool, {"text": "a"}, allow)
    assert not outcome.ok
    assert "rendering the command failed" in outcome.content


def test_non_zero_exit_reports_code_stderr_and_stdout(allow: Any) -> None:
    script = "import sys; print('partial result'); print('it broke', file=sys.stderr); sys.exit(3)"
    outcome = call(command_tool([PY, "-c", script]), {}, allow)
    assert not outcome.ok
    assert outcome.content.startswith("Error: command ")
    assert "exited with code 3" in outcome.content
    assert "[stderr]\nit broke" in outcome.content
    assert "[stdout]\npartial result" in outcome.content


def test_success_ignores_stderr_and_decodes_with_replacement(allow: Any) -> None:
    script = "import sys; sys.stdout.buffer.write(b'ok \\xff'); print('warn', file=sys.stderr)"
    outcome = call(command_tool([PY, "-c", script]), {}, allow)
    assert outcome.ok
    assert outcome.content == "ok \ufffd"


def test_empty_output_says_so(allow: Any) -> None:
    assert call(command_tool([PY, "-c", "pass"]), {}, allow).content == "(no output)"


def test_ok_exit_codes_make_grep_s_no_match_an_empty_result_not_an_error(allow: Any, tmp_path: Path) -> None:
    """Issue 33.12: grep exits 1 for "no line matched"; a search tool declares that normal."""
    (tmp_path / "notes.md").write_text("Rust: memory safe.\n", encoding="utf-8")
    grep = ["grep", "-rn", "--", "{{ pattern }}", "."]
    search = command_tool(grep, parameters={"pattern": {"type": "string"}}, cwd=str(tmp_path), ok_exit_codes=[0, 1])

    found = call(search, {"pattern": "Rust"}, allow)
    nothing = call(search, {"pattern": "Zig"}, allow)

    assert (found.ok, found.content) == (True, "./notes.md:1:Rust: memory safe.\n")
    assert (nothing.ok, nothing.content) == (True, "(no output; exit code 1)")
    strict = command_tool(grep, parameters={"pattern": {"type": "string"}}, cwd=str(tmp_path))
    assert call(strict, {"pattern": "Zig"}, allow).content == "Error: command 'grep' exited with code 1"


def test_an_exit_code_not_declared_ok_is_still_an_error(allow: Any, tmp_path: Path) -> None:
    tool = command_tool(["grep", "-rn", "--", "x", "missing/"], cwd=str(tmp_path), ok_exit_codes=[0, 1])
    outcome = call(tool, {}, allow)
    assert not outcome.ok
    assert outcome.content.startswith("Error: command 'grep' exited with code 2\n[stderr]\ngrep: missing/")


def test_an_ok_exit_code_gives_stdout_as_exit_0_does(allow: Any) -> None:
    script = "import sys; print('3 differences'); print('noise', file=sys.stderr); sys.exit(1)"
    assert call(command_tool([PY, "-c", script], ok_exit_codes=[0, 1]), {}, allow).content == "3 differences\n"


def test_output_is_truncated_with_marker(allow: Any) -> None:
    tool = command_tool([PY, "-c", "print('y' * 5000, end='')"], max_output_chars=1000)
    outcome = call(tool, {}, allow)
    assert outcome.content == "y" * 1000 + "\n[... truncated 4000 characters ...]"


FLOOD_MEMORY = textwrap.dedent("""\
    import asyncio, json, resource, sys
    from pathlib import Path
    from teamrun.config.models import ToolDef
    from teamrun.tools import build_tools, invoke_tool

    FLOOD = "import sys; b = b'x' * (1 << 20); [sys.stdout.buffer.write(b) for _ in range(200)]"

    class Allow:
        async def approve(self, tool, arguments):
            return True

    async def main():
        tools = build_tools({"warm": ToolDef(command=[sys.executable, "-c", "print(1)"]),
                             "flood": ToolDef(command=[sys.executable, "-c", FLOOD], max_output_chars=1000)},
                            base_dir=Path.cwd())
        await invoke_tool(tools["warm"], "{}", approver=Allow())
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        outcome = await invoke_tool(tools["flood"], "{}", approver=Allow())
        after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        print(json.dumps({"ok": outcome.ok, "content": outcome.content, "grew_kib": after - before}))

    asyncio.run(main())
    """)


def test_a_flood_of_output_is_capped_while_it_is_read() -> None:
    # 200 MiB on stdout: the old code held all of it (bytes, then str): +400 MB of peak memory.
    runner = Path(__file__).resolve().parents[2] / "runner"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(runner), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run(
        [PY, "-c", FLOOD_MEMORY], capture_output=True, text=True, env=env, timeout=120, check=True
    )  # a hang guard, not a timing assertion

    report = json.loads(done.stdout.splitlines()[-1])
    assert report["ok"]
    assert report["content"] == "x" * 1000 + f"\n[... truncated {200 * 2**20 - 1000} characters ...]"
    assert report["grew_kib"] < 64 * 1024  # peak RSS (ru_maxrss is in KiB on Linux)


def test_a_failure_with_cut_streams_reads_as_if_they_were_whole(allow: Any) -> None:
    script = "import sys; sys.stderr.write('\u00e9' * 300_000 + '\\n'); sys.stdout.write('out\\n'); sys.exit(2)"
    outcome = call(command_tool([PY, "-c", script], max_output_chars=100_000), {}, allow)

    assert not outcome.ok
    head = f"Error: command {PY!r} exited with code 2\n[stderr]\n"
    whole = head + "\u00e9" * 300_000 + "\n[stdout]\nout"  # what the message would be with nothing cut
    assert outcome.content == whole[:100_000] + f"\n[... truncated {len(whole) - 100_000} characters ...]"
    assert outcome.error == whole[7:100_007] + f"\n[... truncated {len(whole) - 100_007} characters ...]"

    only_stdout = "import sys; print('bad', file=sys.stderr); sys.stdout.write('o' * 250_000); sys.exit(1)"
    outcome = call(command_tool([PY, "-c", only_stdout], max_output_chars=100_000), {}, allow)
    whole = f"Error: command {PY!r} exited with code 1\n[stderr]\nbad\n[stdout]\n" + "o" * 250_000
    assert outcome.content == whole[:100_000] + f"\n[... truncated {len(whole) - 100_000} characters ...]"


def test_characters_split_across_reads_decode_whole(allow: Any) -> None:
    # 3-byte characters in 200 000 bytes: the 64 KiB reads cut through some of them.
    script = "import sys; sys.stdout.write('\u20ac' * 66_667)"
    outcome = call(command_tool([PY, "-c", script], max_output_chars=70_000), {}, allow)
    assert outcome.ok and outcome.content == "\u20ac" * 66_667

    capped = call(command_tool([PY, "-c", script], max_output_chars=65_537), {}, allow)
    assert capped.content == "\u20ac" * 65_537 + "\n[... truncated 1130 characters ...]"


def _gone(pid: int) -> bool:
    """Whether process ``pid`` has ended (a zombie waiting for its parent to reap it counts)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return True
    return stat.rsplit(")", 1)[1].split()[0] in ("Z", "X")


def _pid_writer(path: Path) -> str:
    """Code that writes the running process's pid to ``path`` atomically (the file appears complete)."""
    part = path.with_suffix(".part")
    return (
        f"import os, pathlib; pathlib.Path({str(part)!r}).write_text(str(os.getpid())); "
        f"os.replace({str(part)!r}, {str(path)!r})"
    )


def test_timeout_kills_the_process_group(allow: Any, tmp_path: Path) -> None:
    child_pid, grandchild_pid = tmp_path / "child.pid", tmp_path / "grandchild.pid"
    # The child starts a grandchild, waits until it runs, then both sleep far past the timeout.
    grandchild = f"{_pid_writer(grandchild_pid)}; import time; time.sleep(600)"
    script = (
        "import pathlib, subprocess, sys, time; "
        f"subprocess.Popen([sys.executable, '-c', {grandchild!r}]); "
        f"[time.sleep(0.01) for _ in iter(lambda: pathlib.Path({str(grandchild_pid)!r}).exists(), True)]; "
        f"{_pid_writer(child_pid)}; time.sleep(600)"
    )
    tool = command_tool([PY, "-c", script], timeout_s=2)
    outcome = call(tool, {}, allow)
    assert not outcome.ok
    assert outcome.content == "Error: tool 'cmd' timed out after 2 seconds"
    assert child_pid.exists(), "the child had not started its grandchild before the timeout"
    # The call ended while both would still be sleeping: the whole group was killed, not waited for.
    assert _gone(int(child_pid.read_text()))
    wait_until(lambda: _gone(int(grandchild_pid.read_text())), "the grandchild's end")


def test_cancellation_kills_the_process(tmp_path: Path) -> None:
    child_pid = tmp_path / "child.pid"
    tool = command_tool([PY, "-c", f"{_pid_writer(child_pid)}; import time; time.sleep(600)"])

    async def cancel_when_running() -> None:
        task = asyncio.create_task(tool.run({}))
        await wait_until_async(child_pid.exists, "the command's process started", alive=task)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(cancel_when_running())
    assert child_pid.exists() and _gone(int(child_pid.read_text()))


def test_missing_executable_is_a_tool_error(allow: Any) -> None:
    outcome = call(command_tool(["definitely-not-a-program-xyz", "a"]), {}, allow)
    assert not outcome.ok
    assert "command not found: 'definitely-not-a-program-xyz'" in outcome.content


def test_cwd_is_relative_to_the_team_file(tmp_path: Path, allow: Any) -> None:
    (tmp_path / "data").mkdir()
    definition = ToolDef(command=[PY, "-c", "import os; print(os.getcwd())"], cwd="data")
    tool = build_tools({"pwd": definition}, base_dir=tmp_path)["pwd"]
    outcome = asyncio.run(invoke_tool(tool, "{}", approver=allow))
    assert Path(outcome.content.strip()) == (tmp_path / "data").resolve()

    missing = build_tools({"pwd": ToolDef(command=["true"], cwd="nowhere")}, base_dir=tmp_path)["pwd"]
    outcome = asyncio.run(invoke_tool(missing, "{}", approver=allow))
    assert "working directory" in outcome.content and "does not exist" in outcome.content


def test_undeclared_template_variable_is_a_user_error() -> None:
    with pytest.raises(UserError, match=r"command\[1\] uses undeclared parameter 'patern'"):
        command_tool(["grep", "{{ patern }}"], parameters={"pattern": {"type": "string"}})


def test_template_syntax_error_is_a_user_error() -> None:
    with pytest.raises(UserError, match=r"command\[1\] is not a valid template"):
        command_tool(["echo", "{{ oops"])


def test_invalid_parameter_schema_is_a_user_error() -> None:
    with pytest.raises(UserError, match="parameter 'n' is not a valid JSON Schema"):
        command_tool(["echo", "{{ n }}"], parameters={"n": {"type": "integr"}})
