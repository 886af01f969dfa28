"""``teamrun validate`` never imports litellm and never runs user code unless asked."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
Cli = Callable[[list[str]], Any]

PROBE = textwrap.dedent(
    """\
    import sys
    from teamrun.cli import main
    code = main({argv!r})
    heavy = sorted(m for m in ("litellm", "openai", "httpx", "aiohttp") if m in sys.modules)
    assert not heavy, f"validate imported {{heavy}}"
    raise SystemExit(code)
    """
)


def _probe(argv: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", PROBE.format(argv=argv)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


@pytest.mark.parametrize(
    ("argv", "code"),
    [
        (["validate", "teams/research-report.yaml"], 0),
        (["validate", "tests/config/valid/full_language.yaml", "tests/config/invalid/cycle_two_agents.yaml"], 2),
        (["validate", "--format", "junit", "tests/config/valid"], 0),
        (["--help"], 0),
        (["validate", "--help"], 0),
        (["schema"], 0),
    ],
)
def test_no_litellm_is_imported(argv: list[str], code: int) -> None:
    result = _probe(argv)
    assert result.returncode == code, result.stderr
    assert "validate imported" not in result.stderr


MARKER_MODULE = """\
from pathlib import Path

Path(__file__).with_name("imported.marker").write_text("user code ran")


def tool(query: str) -> str:
    return query


def hook(ctx):
    return None


def redact(messages):
    return messages
"""


def _team_with_user_code(folder: Path, module: str) -> Path:
    (folder / f"{module}.py").write_text(MARKER_MODULE)
    team = folder / "team.yaml"
    team.write_text(
        textwrap.dedent(
            f"""\
            version: 1
            name: user-code
            supervisor: lead
            agents:
              lead:
                tools: [probe]
                delegates_to: [worker]
                delegation:
                  message_filter: {{python: {module}:redact}}
                  hooks:
                    on_start: [{{call: {module}:hook}}]
              worker: {{}}
            tools:
              probe: {{python: {module}:tool}}
            """
        )
    )
    return team


def test_user_modules_are_not_imported_without_import_check(tmp_path: Path, cli: Cli) -> None:
    team = _team_with_user_code(tmp_path, "marker_plain")
    for argv in (["validate", str(team)], ["validate", "--format", "json", str(team)], ["graph", str(team)]):
        assert cli(argv).code == 0
        assert not (tmp_path / "imported.marker").exists(), argv
    assert "marker_plain" not in sys.modules


def test_import_check_does_import_them(tmp_path: Path, cli: Cli) -> None:
    team = _team_with_user_code(tmp_path, "marker_checked")
    assert cli(["validate", "--import-check", str(team)]).code == 0
    assert (tmp_path / "imported.marker").read_text() == "user code ran"


def test_no_user_code_in_a_fresh_process_either(tmp_path: Path) -> None:
    team = _team_with_user_code(tmp_path, "marker_subprocess")
    result = _probe(["validate", str(team)])
    assert result.returncode == 0, result.stderr
    assert not (tmp_path / "imported.marker").exists()
