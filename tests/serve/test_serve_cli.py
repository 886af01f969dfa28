"""`teamrun serve` on the command line: what it refuses, and what `--help` does not import."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner

from teamrun.cli import cli
from tests.cli_processes import child_env, serving
from tests.serve.conftest import REPO, solo_team

CHECK_IMPORTS = textwrap.dedent("""\
    import sys
    from teamrun.cli import main
    code = main(sys.argv[1:])
    heavy = sorted({m.split(".")[0] for m in sys.modules} & {"fastapi", "uvicorn", "starlette", "litellm"})
    print("HEAVY=" + ",".join(heavy), file=sys.stderr)
    sys.exit(code)
    """)


@pytest.mark.parametrize("args", [["--help"], ["serve", "--help"]])
def test_help_imports_no_web_stack_and_no_litellm(args: list[str]) -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO / "runner"), "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    done = subprocess.run(
        [sys.executable, "-c", CHECK_IMPORTS, *args], capture_output=True, text=True, env=env, timeout=120
    )

    assert done.returncode == 0, done.stderr
    assert "serve" in done.stdout
    assert "HEAVY=\n" in done.stderr


def test_serving_beyond_loopback_without_tokens_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TEAMRUN_API_TOKENS", raising=False)
    result = CliRunner().invoke(cli, ["serve", str(solo_team(tmp_path)), "--host", "0.0.0.0"])

    assert result.exit_code != 0
    assert "refusing to serve on 0.0.0.0 without auth" in str(result.exception or result.output)


def test_two_teams_with_one_name_are_refused(tmp_path: Path) -> None:
    first = solo_team(tmp_path)
    (tmp_path / "copy").mkdir()
    second = solo_team(tmp_path / "copy")

    result = CliRunner().invoke(cli, ["serve", str(first), str(second)])

    assert "two teams are named 'solo'" in str(result.exception or result.output)


def test_short_tokens_are_refused(tmp_path: Path) -> None:
    tokens = tmp_path / "tokens.txt"
    tokens.write_text("# ours\nshort\n", encoding="utf-8")

    result = CliRunner().invoke(cli, ["serve", str(solo_team(tmp_path)), "--token-file", str(tokens)])

    assert "shorter than 16 characters" in str(result.exception or result.output)


@pytest.mark.parametrize("workers", ["1", "2"])
def test_a_port_another_program_holds_is_exit_2_before_any_serving_line(workers: str, tmp_path: Path) -> None:
    import socket

    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        env = {**os.environ, "PYTHONPATH": str(REPO / "runner"), "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
        command = [sys.executable, "-m", "teamrun.cli", "serve", str(solo_team(tmp_path))]
        done = subprocess.run(
            [*command, "--port", str(port), "--workers", workers],
            capture_output=True,
            text=True,
            env=env,
            timeout=300,  # a hang guard
        )

    assert done.returncode == 2, done.stderr
    assert f"cannot listen on 127.0.0.1:{port}: Address already in use" in done.stderr
    assert "serving" not in done.stderr and "Traceback" not in done.stderr


def test_server_logs_follow_the_log_format_and_the_access_log_needs_verbose(tmp_path: Path) -> None:
    team = solo_team(tmp_path)
    env = child_env()
    env.pop("TEAMRUN_API_TOKENS", None)
    stderr: dict[str, str] = {}
    for verbosity in ([], ["-v"]):
        with serving(str(team), env=env, options=["--log-format", "json", *verbosity], ready="/healthz") as server:
            assert server.stop() == 0
        assert server.stdout == ""
        stderr[" ".join(verbosity) or "default"] = server.stderr

    quiet_lines = stderr["default"].splitlines()
    assert [line for line in quiet_lines if not line.startswith("teamrun: serving")] == []
    records = [json.loads(line) for line in stderr["-v"].splitlines() if not line.startswith("teamrun: serving")]
    assert records and all({"event", "level", "timestamp"} <= set(record) for record in records)
    access = [r for r in records if r.get("logger") == "uvicorn.access"]
    assert len(access) == 1 and '"GET /healthz HTTP/1.1" 200' in access[0]["event"]
