"""Issue 27.3/27.4: what `teamrun --version`, `--help`, `validate` and `execute` import before they answer.

Each test runs the command in a fresh interpreter, as a user does, and asserts on the modules it loaded
(or the order of `-X importtime` lines next to the `starting ...` line): what a command does not need is
never imported, whatever the machine's speed. The timings are benchmarks' (bench_cli.py --startup,
bench_validate.py).
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import click
import pytest

from teamrun.cli import main
from teamrun.cli.app import COMMANDS, cli

REPO = Path(__file__).resolve().parents[2]
RESEARCH = str(REPO / "teams" / "research-report.yaml")

WRAPPER = textwrap.dedent("""\
    import sys
    from teamrun.cli import main
    code = main(sys.argv[1:])
    print("MODULES=" + ",".join(sorted(sys.modules)), file=sys.stderr)
    sys.exit(code)
    """)


def run_cli(*args: str, python_flags: tuple[str, ...] = ()) -> tuple[subprocess.CompletedProcess[str], set[str]]:
    """``teamrun ARGS`` in a fresh interpreter; the result and the modules imported by its end."""
    env = {**os.environ, "PYTHONPATH": str(REPO / "runner"), "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    done = subprocess.run(
        [sys.executable, *python_flags, "-c", WRAPPER, *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=REPO,
        timeout=120,
    )
    line = next(x for x in done.stderr.splitlines() if x.startswith("MODULES="))
    return done, set(line.removeprefix("MODULES=").split(","))


def test_version_imports_no_package_metadata_and_no_logging() -> None:
    from importlib import metadata

    done, modules = run_cli("--version")

    assert done.returncode == 0, done.stderr
    assert done.stdout == f"teamrun, version {metadata.version('teamrun')}\n"
    assert not {"importlib.metadata", "structlog", "teamrun.logs"} & modules


def test_help_lists_every_command_without_importing_one() -> None:
    done, modules = run_cli("--help")

    assert done.returncode == 0, done.stderr
    listed = done.stdout.split("Commands:\n", 1)[1].splitlines()
    assert [line.split()[0] for line in listed] == sorted(COMMANDS)
    for name, (_, short_help) in COMMANDS.items():
        assert f"  {name.ljust(9)} {short_help}" in listed
    assert sorted(m for m in modules if m.startswith("teamrun")) == [
        "teamrun",
        "teamrun._version",
        "teamrun.cli",
        "teamrun.cli.app",
        "teamrun.errors",
    ]
    assert "structlog" not in modules


def test_the_command_table_says_what_each_command_says_of_itself() -> None:
    ctx = click.Context(cli)
    for name, (target, short_help) in COMMANDS.items():
        command = cli.get_command(ctx, name)
        assert command is not None and command.short_help == short_help, target


def test_a_command_s_own_help_still_comes_from_the_command(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["validate", "--help"]) == 0
    assert "Check team files: YAML, the JSON Schema, then cross-references." in capsys.readouterr().out


def test_validate_builds_no_pydantic_model_and_never_imports_litellm() -> None:
    done, modules = run_cli("validate", "teams/", "tests/config/valid/")

    assert done.returncode == 0, done.stderr
    assert not {"teamrun.config.models", "pydantic.main", "litellm"} & modules


def test_the_starting_line_comes_before_the_engine_the_store_and_the_tools_load(tmp_path: Path) -> None:
    store = str(tmp_path / "runs.db")
    done, modules = run_cli(
        "execute",
        RESEARCH,
        "--input",
        "Compare Rust and Go",
        "--progress",
        "plain",
        "--store",
        store,
        python_flags=("-X", "importtime"),
    )

    assert done.returncode == 0, done.stderr
    lines = done.stderr.splitlines()
    starting = lines.index("starting research-report (3 agents, model offline)")
    later = {"teamrun.engine", "teamrun.tools", "teamrun.store.db", "teamrun.llm", "sqlalchemy"}
    first_later = next(
        i
        for i, line in enumerate(lines)
        if line.startswith("import time:") and any(line.rsplit("|", 1)[-1].strip().startswith(m) for m in later)
    )
    assert starting < first_later
    assert {"teamrun.engine.team", "sqlalchemy"} <= modules  # the run did need them, after the line


@pytest.mark.parametrize("model", [None, "openai/gpt-4o-mini"])
@pytest.mark.parametrize("team_file", sorted(str(p) for p in (REPO / "teams").glob("*.yaml")))
def test_the_starting_line_names_the_models_the_engine_uses(team_file: str, model: str | None) -> None:
    """The line is made from the team file before the engine loads; it names what ``Team.models()`` does."""
    import teamrun
    from teamrun.cli.execute_cmd import _starting_line
    from teamrun.config.loader import load_config

    team = teamrun.load_team(team_file, model=model)
    models = team.models()
    label = "model" if len(models) == 1 else "models"
    shown = ", ".join(models[:3]) + (f" and {len(models) - 3} more" if len(models) > 3 else "")
    agents = len(team.config.agents)
    expected = f"starting {team.name} ({agents} agent{'s' if agents != 1 else ''}, {label} {shown})"
    assert _starting_line(load_config(team_file), model) == expected
