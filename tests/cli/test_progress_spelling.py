"""Issue 33.8: one spelling for progress everywhere: `--progress MODE` (`--progress none` turns it off) on
every command that shows progress; `eval`'s and `batch`'s old `--progress/--no-progress` still works, with
a one-line hint on stderr naming the new spelling."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from teamrun.cli import main, reference

REPO = Path(__file__).resolve().parents[2]
RESEARCH = str(REPO / "teams" / "research-report.yaml")
CASES = """\
version: 1
cases:
  - name: one
    input: Compare Rust and Go
    checks: [{contains: "Rust"}]
"""
HINT = "teamrun: --no-progress is spelled --progress none now (the old spelling still works)"

SHOWS_PROGRESS = ["execute", "chat", "resume", "answer", "approve", "deny", "eval", "batch"]


def _options(command: str) -> dict[str, str]:
    """The options `teamrun COMMAND --help` shows, with what follows each name."""
    for ctx, found in reference.iter_commands():
        if ctx.command_path == f"teamrun {command}":
            return {
                opt: (param.type.name if not getattr(param, "is_flag", False) else "flag")
                for param in found.get_params(ctx)
                if not getattr(param, "hidden", False)
                for opt in param.opts
            }
    raise AssertionError(command)


@pytest.mark.parametrize("command", SHOWS_PROGRESS)
def test_every_command_that_shows_progress_spells_it_progress_mode(command: str) -> None:
    shown = _options(command)
    assert shown["--progress"] == "choice"
    assert "--no-progress" not in shown


def test_no_other_command_has_a_progress_switch() -> None:
    for ctx, command in reference.iter_commands():
        names = {opt for param in command.get_params(ctx) for opt in param.opts}
        if "--progress" in names:
            assert ctx.command_path.removeprefix("teamrun ") in SHOWS_PROGRESS, ctx.command_path


@pytest.fixture
def eval_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[str, str]:
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    cases = tmp_path / "cases.yaml"
    cases.write_text(CASES, encoding="utf-8")
    inputs = tmp_path / "in.jsonl"
    inputs.write_text(json.dumps({"id": "r1", "input": "Compare Rust and Go"}) + "\n", encoding="utf-8")
    return str(cases), str(inputs)


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(argv)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_eval_and_batch_take_progress_none(
    eval_files: tuple[str, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cases, inputs = eval_files
    code, _, err = _run(["eval", RESEARCH, cases, "--progress", "none"], capsys)
    assert code == 0 and "eval: " not in err and "--progress" not in err
    code, _, err = _run(["batch", RESEARCH, inputs, "-o", str(tmp_path / "o.jsonl"), "--progress", "none"], capsys)
    assert code == 0 and "batch: 1/1" not in err and "--progress" not in err


def test_eval_and_batch_progress_plain_prints_a_line_per_update(
    eval_files: tuple[str, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cases, inputs = eval_files
    code, _, err = _run(["eval", RESEARCH, cases, "--progress", "plain"], capsys)
    assert code == 0 and any(line.startswith("eval: 1/1") for line in err.splitlines()), err
    code, _, err = _run(["batch", RESEARCH, inputs, "-o", str(tmp_path / "o.jsonl"), "--progress", "plain"], capsys)
    assert code == 0 and any(line.startswith("batch: 1/1") for line in err.splitlines()), err


def test_the_old_no_progress_still_works_with_a_one_line_hint(
    eval_files: tuple[str, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cases, inputs = eval_files
    code, out, err = _run(["eval", RESEARCH, cases, "--no-progress"], capsys)
    assert code == 0 and "one" in out
    assert err.splitlines() == [HINT]  # the hint, and no progress line

    code, _, err = _run(["batch", RESEARCH, inputs, "-o", str(tmp_path / "o.jsonl"), "--no-progress"], capsys)
    assert code == 0
    assert err.splitlines()[0] == HINT and not any(line.startswith("batch: 1/1") for line in err.splitlines())

    code, out, err = _run(["execute", RESEARCH, "-i", "Compare Rust and Go", "--no-progress"], capsys)
    assert code == 0 and out.startswith("[offline simulation]")
    assert err.splitlines()[0] == HINT and "started" not in err  # --progress none: no progress lines
    assert "Traceback" not in err


def test_the_old_bare_progress_means_auto_with_a_hint(
    eval_files: tuple[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    cases, _ = eval_files
    code, _, err = _run(["eval", RESEARCH, cases, "--progress"], capsys)
    assert code == 0
    assert err.splitlines()[0] == (
        "teamrun: --progress without a mode is spelled --progress auto now (the old spelling still works)"
    )
    assert any(line.startswith("eval: 1/1") for line in err.splitlines())  # auto, not a terminal: lines


def test_the_hint_is_a_json_line_under_log_format_json_and_quiet_with_q(
    eval_files: tuple[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    cases, _ = eval_files
    code, _, err = _run(["--log-format", "json", "eval", RESEARCH, cases, "--no-progress"], capsys)
    assert code == 0
    line = json.loads(err.splitlines()[0])
    assert line["event"] == "old_option_spelling" and line["level"] == "warning"
    assert "--progress none" in line["message"]

    code, _, err = _run(["-q", "eval", RESEARCH, cases, "--no-progress"], capsys)
    assert code == 0 and err == ""


def test_a_wrong_mode_is_a_usage_error_naming_the_modes(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = _run(["execute", RESEARCH, "-i", "x", "--progress", "loud"], capsys)
    assert code == 2 and "'loud' is not one of 'auto', 'tree', 'plain', 'none'" in err and "Traceback" not in err
