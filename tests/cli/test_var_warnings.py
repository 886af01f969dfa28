"""Issue 22.26: a `--var` that names no var of the team is said, with did-you-mean (an error with --strict).

`execute` and `chat` are the commands that take `--var` (batch rows, eval cases and served runs carry
their vars in their own inputs).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from teamrun.cli import main

REPO = Path(__file__).resolve().parents[2]
PRODUCT = "teams/product-comparison.yaml"
RESEARCH = "teams/research-report.yaml"


@pytest.fixture(autouse=True)
def _in_repo(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.chdir(REPO)
    monkeypatch.delenv("TEAMRUN_STORE", raising=False)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))


def test_a_misspelt_var_is_a_warning_with_did_you_mean(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(
        [
            "execute",
            PRODUCT,
            "-i",
            "Compare Postgres and MySQL",
            "--var",
            "curency=EUR",
            "--json",
            "--progress",
            "plain",
        ]
    )

    captured = capsys.readouterr()
    assert code == 0
    assert captured.err.splitlines()[0] == (
        f"{PRODUCT}:36:1: warning: --var curency sets nothing: this team has no var 'curency'; did you mean 'currency'?"
    )
    assert captured.err.splitlines()[1].startswith("starting product-comparison")
    assert json.loads(captured.out)["status"] == "done"


def test_with_strict_it_is_an_error_before_anything_runs(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(
        [
            "execute",
            PRODUCT,
            "-i",
            "Compare Postgres and MySQL",
            "--var",
            "curency=EUR",
            "--strict",
            "--progress",
            "plain",
        ]
    )

    captured = capsys.readouterr()
    assert code == 2
    assert captured.out == ""
    assert captured.err == (
        f"{PRODUCT}:36:1: error: --var curency sets nothing: this team has no var 'curency'; did you mean 'currency'?\n"
    )


def test_declared_vars_are_not_warned_about(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(
        [
            "execute",
            PRODUCT,
            "-i",
            "Compare Postgres and MySQL",
            "--var",
            "currency=EUR",
            "--var",
            "audience=students",
            "--strict",
            "--progress",
            "plain",
        ]
    )

    assert code == 0
    assert "warning" not in capsys.readouterr().err


def test_a_team_without_vars_says_the_var_sets_nothing(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["execute", RESEARCH, "-i", "Compare Rust and Go", "--var", "topic=rust", "--progress", "none"])

    assert code == 0
    assert capsys.readouterr().err == (
        f"{RESEARCH}:23:1: warning: --var topic sets nothing: this team declares no vars and its templates read none\n"
    )


def test_a_var_the_templates_read_without_a_vars_section_is_known(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    team = tmp_path / "team.yaml"
    team.write_text(
        "version: 1\nname: t\nsupervisor: solo\nagents:\n  solo: {instructions: 'Answer for {{ vars.audience }}.'}\n",
        encoding="utf-8",
    )

    assert main(["execute", str(team), "-i", "hi", "--var", "audience=kids", "--progress", "none"]) == 0
    assert "sets nothing" not in capsys.readouterr().err

    assert (
        main(["execute", str(team), "-i", "hi", "--var", "audience=kids", "--var", "audiense=x", "--progress", "none"])
        == 0
    )
    assert (
        "warning: --var audiense sets nothing: this team has no var 'audiense'; did you mean 'audience'?"
        in capsys.readouterr().err
    )


def test_chat_says_it_too_and_refuses_with_strict() -> None:
    with CliRunner().isolation(input="/exit\n") as (_out, err, _):
        code = main(["chat", PRODUCT, "--var", "curency=EUR", "--strict"])

    assert code == 2
    assert err.getvalue().decode() == (
        f"{PRODUCT}:36:1: error: --var curency sets nothing: this team has no var 'curency'; did you mean 'currency'?\n"
    )
