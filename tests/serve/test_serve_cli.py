"""`teamrun serve` on the command line: what it refuses, and what `--help` does not import."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner

from teamrun.cli import cli
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
    done = subprocess.run([sys.executable, "-c", CHECK_IMPORTS, *args], capture_output=True, text=True, env=env,
                          timeout=120)

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
