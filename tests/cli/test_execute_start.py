"""How `teamrun execute` starts: offline runs never import LiteLLM, a first progress line comes at
once, the README's research team shows its flow offline, and an empty input is a usage error."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner

from teamrun.cli import main
from tests.fakeserver import FakeOpenAI, text

REPO = Path(__file__).resolve().parents[2]
RESEARCH = str(REPO / "teams" / "research-report.yaml")
TASK = "Compare Rust and Go for command-line tools"

WRAPPER = textwrap.dedent("""\
    import sys
    from teamrun.cli import main
    code = main(sys.argv[1:])
    heavy = sorted(m for m in sys.modules if m.split(".")[0] in ("litellm", "openai"))
    print("HEAVY=" + ",".join(heavy), file=sys.stderr)
    sys.exit(code)
    """)
"""Runs the CLI in a fresh interpreter and reports, at exit, which heavy modules were imported."""


def run_cli(*args: str, python_flags: tuple[str, ...] = ()) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO / "runner"), "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    return subprocess.run(
        [sys.executable, *python_flags, "-c", WRAPPER, *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=REPO,
        timeout=600,  # a hang guard only: a loaded 2-core machine imports LiteLLM slowly
    )


def heavy_modules(stderr: str) -> str:
    return next(line for line in stderr.splitlines() if line.startswith("HEAVY=")).removeprefix("HEAVY=")


# -- issue 12.6: the offline model does not need LiteLLM -----------------------------------------
def test_the_readme_command_runs_offline_without_importing_litellm() -> None:
    done = run_cli("execute", RESEARCH, "--input", TASK)

    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"[offline simulation] Task: {TASK}")
    assert heavy_modules(done.stderr) == "", "litellm/openai imported by an offline run"


def test_record_and_replay_offline_import_no_litellm(tmp_path: Path) -> None:
    cassette = str(tmp_path / "run.cassette.jsonl")
    recorded = run_cli("execute", RESEARCH, "--input", TASK, "--record", cassette, "--progress", "none")
    assert recorded.returncode == 0, recorded.stderr
    assert heavy_modules(recorded.stderr) == ""

    replayed = run_cli("execute", RESEARCH, "--input", TASK, "--replay", cassette, "--progress", "none")

    assert replayed.returncode == 0, replayed.stderr
    assert replayed.stdout == recorded.stdout
    assert heavy_modules(replayed.stderr) == ""


def test_offline_research_team_passes_the_findings_to_the_writer(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["execute", RESEARCH, "--input", TASK, "--json", "--progress", "none"])

    result = json.loads(capsys.readouterr().out)
    assert code == 0 and result["status"] == "done"
    researcher, writer = result["delegations"]
    assert (researcher["agent"], researcher["status"], researcher["ref"]) == ("researcher", "ok", "researcher-1")
    assert "notes/rust.md" in researcher["response"]
    assert writer["agent"] == "writer" and writer["status"] == "ok"
    assert "researcher-1 (referenced)" in writer["response"] and "notes/rust.md" in writer["response"]
    assert "No tool results" not in writer["response"] and "No tool results" not in result["final_text"]


# -- issue 11.25: say at once that the run is starting ---------------------------------------------
def test_a_starting_line_comes_first_on_stderr(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["execute", RESEARCH, "--input", TASK, "--progress", "plain"]) == 0

    err = capsys.readouterr().err
    assert err.splitlines()[0] == "starting research-report (3 agents, model offline)"


@pytest.mark.parametrize(
    "argv",
    [["execute", RESEARCH, "--input", TASK, "--progress", "none"], ["-q", "execute", RESEARCH, "--input", TASK]],
    ids=["progress-none", "quiet"],
)
def test_no_starting_line_when_progress_is_off(capsys: pytest.CaptureFixture[str], argv: list[str]) -> None:
    assert main(argv) == 0

    assert capsys.readouterr().err == ""


def test_the_starting_line_comes_before_litellm_is_imported(tmp_path: Path, fake_openai: FakeOpenAI) -> None:
    fake_openai.script("solo", [text("fine")])
    team = tmp_path / "team.yaml"
    team.write_text(
        f"version: 1\nname: one\nsupervisor: solo\nagents:\n"
        f"  solo: {{model: openai/solo, api_base: '{fake_openai.url}'}}\n",
        encoding="utf-8",
    )

    done = run_cli("execute", str(team), "--input", "hi", "--progress", "plain", python_flags=("-X", "importtime"))

    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "fine"
    lines = done.stderr.splitlines()
    starting = lines.index("starting one (1 agent, model openai/solo)")
    first_litellm = next(
        i
        for i, line in enumerate(lines)
        if line.startswith("import time:") and line.rsplit("|", 1)[-1].strip().split(".")[0] == "litellm"
    )
    assert starting < first_litellm
    assert "litellm" in heavy_modules(done.stderr)


# -- issue 33.13: say that LiteLLM is loading (seconds) -----------------------------------------------
def test_loading_litellm_is_said_while_it_loads(tmp_path: Path, fake_openai: FakeOpenAI) -> None:
    fake_openai.script("solo", [text("fine")])
    team = tmp_path / "team.yaml"
    team.write_text(
        f"version: 1\nname: one\nsupervisor: solo\nagents:\n"
        f"  solo: {{model: openai/solo, api_base: '{fake_openai.url}'}}\n",
        encoding="utf-8",
    )

    done = run_cli("execute", str(team), "--input", "hi", "--progress", "plain", python_flags=("-X", "importtime"))

    assert done.returncode == 0, done.stderr
    lines = done.stderr.splitlines()
    said = [line for line in lines if not line.startswith("import time:")]
    assert said[:2] == ["starting one (1 agent, model openai/solo)", "loading LiteLLM…"]
    loading = lines.index("loading LiteLLM…")
    imported = [
        i
        for i, line in enumerate(lines)
        if line.startswith("import time:") and line.rsplit("|", 1)[-1].strip() == "litellm"
    ]
    assert imported and loading < imported[0]  # said before the import, not after it


@pytest.mark.parametrize(
    "argv",
    [
        ["execute", RESEARCH, "--input", TASK, "--progress", "plain"],  # offline: LiteLLM is not loaded at all
        [
            "execute",
            RESEARCH,
            "--input",
            TASK,
            "--progress",
            "none",
            "--model",
            "openai/x",
            "--api-base",
            "http://127.0.0.1:9",
        ],
    ],
    ids=["offline", "progress-none"],
)
def test_no_loading_line_when_nothing_loads_or_progress_is_off(argv: list[str]) -> None:
    done = run_cli(*argv)

    assert "loading LiteLLM" not in done.stderr


# -- issue 11.24: an empty input is a usage error --------------------------------------------------
@pytest.mark.parametrize("stdin", ["", "  \n\n"], ids=["empty", "blank"])
def test_empty_stdin_is_a_usage_error(stdin: str) -> None:
    with CliRunner().isolation(input=stdin) as (out, err, _):
        code = main(["execute", RESEARCH])

    assert code == 2
    assert out.getvalue() == b""
    assert b"the input (stdin) is empty" in err.getvalue()


def test_empty_input_option_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["execute", RESEARCH, "--input", ""]) == 2
    assert "the input (--input) is empty" in capsys.readouterr().err


def test_running_a_team_does_not_read_the_config_models_source() -> None:
    """Field docstrings are for the schema only: pydantic's ``use_attribute_docstrings`` read the source of
    every config model at import (through ``linecache``), a large share of each command's start-up."""
    wrapper = textwrap.dedent("""\
        import linecache, sys
        from teamrun.cli import main
        code = main(sys.argv[1:])
        print("READ=" + ",".join(sorted(k for k in linecache.cache if k.endswith("config/models.py"))),
              file=sys.stderr)
        sys.exit(code)
        """)
    env = {**os.environ, "PYTHONPATH": str(REPO / "runner"), "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    done = subprocess.run(
        [sys.executable, "-c", wrapper, "-q", "execute", RESEARCH, "--input", TASK, "--progress", "none"],
        capture_output=True,
        text=True,
        env=env,
        cwd=REPO,
        timeout=600,  # a hang guard only: a loaded 2-core machine imports LiteLLM slowly
    )
    assert done.returncode == 0, done.stderr
    assert "READ=\n" in done.stderr, done.stderr[-2000:]
