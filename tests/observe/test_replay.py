"""`--record` / `--replay`: a run recorded against the local server replays with the server stopped."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import teamrun
from teamrun.cli import main
from teamrun.llm.cassette import ReplayModel, read_cassette
from tests.fakeserver import FakeOpenAI, text, tool_calls
from tests.observe.conftest import TeamWriter
from tests.observe.teams import THREE_WORKERS

pytestmark = pytest.mark.usefixtures("restore_structlog")


def _script(fake_openai: FakeOpenAI) -> None:
    """Three workers at once, alpha twice with different tasks (its replies go out in arrival order)."""
    fake_openai.script(
        "lead",
        [
            tool_calls(
                ("ask_alpha", {"task": "first alpha job"}),
                ("ask_beta", {"task": "about b"}),
                ("ask_gamma", {"task": "about c"}),
                ("ask_alpha", {"task": "second alpha job"}),
            ),
            text("all four compared"),
        ],
    )
    fake_openai.script("alpha", [text("alpha reply one", delay=0.05), text("alpha reply two", delay=0.02)])
    fake_openai.script("beta", [text("beta says hi", delay=0.01)])
    fake_openai.script("gamma", [text("gamma says hi")])


def _run_json(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, dict[str, Any], str]:
    code = main(["execute", *args, "--progress", "none", "--json"])
    out, err = capsys.readouterr()
    return code, json.loads(out), err


def _delegations(result: dict[str, Any]) -> list[dict[str, Any]]:
    return sorted(result["delegations"], key=lambda d: (d["agent"], d["task"]))


@pytest.fixture
def recorded(
    fake_openai: FakeOpenAI, write_team: TeamWriter, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> tuple[Path, Path, dict[str, Any]]:
    """A team file, its cassette from a real (local-server) run, and that run's result; server stopped."""
    _script(fake_openai)
    team = write_team(THREE_WORKERS)
    cassette = tmp_path / "run.cassette.jsonl"
    code, result, err = _run_json([str(team), "-i", "compare them", "--record", str(cassette)], capsys)
    assert code == 0, err
    fake_openai.assert_complete()
    fake_openai.stop()
    return team, cassette, result


def test_replay_with_the_server_stopped_gives_the_same_answer_and_delegations(
    recorded: tuple[Path, Path, dict[str, Any]], capsys: pytest.CaptureFixture[str]
) -> None:
    team, cassette, original = recorded
    exchanges = read_cassette(cassette)
    assert sorted("/".join(e.agent_path) for e in exchanges) == [
        "lead",
        "lead",
        "lead/alpha",
        "lead/alpha",
        "lead/beta",
        "lead/gamma",
    ]

    code, replayed, err = _run_json([str(team), "-i", "compare them", "--replay", str(cassette)], capsys)

    assert code == 0, err
    assert replayed["final_text"] == original["final_text"] == "all four compared"
    assert _delegations(replayed) == _delegations(original)
    by_task = {d["task"]: d["response"] for d in replayed["delegations"]}
    # each invocation of alpha found the reply to its own task, whatever the arrival order
    assert by_task["first alpha job"] == next(
        d["response"] for d in original["delegations"] if d["task"] == "first alpha job"
    )
    assert {by_task["first alpha job"], by_task["second alpha job"]} == {"alpha reply one", "alpha reply two"}
    assert replayed["usage"] == original["usage"] and replayed["cost"] == original["cost"]


def test_strict_replay_fails_naming_the_worker_whose_instructions_changed(
    recorded: tuple[Path, Path, dict[str, Any]], capsys: pytest.CaptureFixture[str]
) -> None:
    team, cassette, original = recorded
    team.write_text(team.read_text().replace("Answer about beta.", "Answer about beta only."))

    code, result, err = _run_json([str(team), "-i", "compare them", "--replay", str(cassette)], capsys)

    assert code == 1
    assert result["status"] == "failed"
    beta = next(d for d in result["delegations"] if d["agent"] == "beta")
    assert beta["status"] == "error"
    for message in (beta["error"], result["error"]):
        assert "agent lead/beta (turn 1)" in message
        assert "message 0 (system) differs from the recording" in message
        assert f"--record {cassette}" in message

    # lenient mode takes the next reply recorded for lead/beta turn 1 and goes on
    code, lenient, err = _run_json(
        [str(team), "-i", "compare them", "--replay", str(cassette), "--replay-mode", "lenient"], capsys
    )
    assert code == 0, err
    assert lenient["final_text"] == original["final_text"]
    assert _delegations(lenient) == _delegations(original)


def test_replay_through_the_python_api(recorded: tuple[Path, Path, dict[str, Any]]) -> None:
    team_file, cassette, original = recorded

    result = teamrun.load_team(team_file, replay=cassette).run_sync("compare them")
    model = ReplayModel(cassette)
    again = teamrun.load_team(team_file, chat_model=model).run_sync("compare them")

    assert result.status == again.status == "done"
    assert result.final_text == again.final_text == original["final_text"]
    assert model.unused() == [] and model.fallbacks == []

    other = teamrun.load_team(team_file, replay=cassette).run_sync("a different question")
    assert other.status == "failed"
    assert "agent lead (turn 1)" in (other.error or "")
    assert "message 1 (user) differs" in (other.error or "")


def test_a_cut_cassette_still_replays_what_it_has(recorded: tuple[Path, Path, dict[str, Any]], tmp_path: Path) -> None:
    _, cassette, _ = recorded
    cut = tmp_path / "cut.jsonl"
    cut.write_text(cassette.read_text() + '{"agent_path": ["lead"], "tu', encoding="utf-8")
    assert len(read_cassette(cut)) == 6

    with pytest.raises(teamrun.UserError, match="does not exist; record it first with --record"):
        ReplayModel(tmp_path / "nothing.jsonl")
    with pytest.raises(teamrun.UserError, match="not a teamrun cassette"):
        (tmp_path / "plain.jsonl").write_text('{"a": 1}\n')
        ReplayModel(tmp_path / "plain.jsonl")


def test_record_and_replay_flags_are_checked(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    team = str(Path(__file__).resolve().parents[2] / "teams" / "research-report.yaml")
    assert main(["execute", team, "-i", "x", "--record", "a.jsonl", "--replay", "b.jsonl"]) == 2
    assert "--record and --replay exclude each other" in capsys.readouterr().err
    assert main(["execute", team, "-i", "x", "--replay-mode", "lenient"]) == 2
    assert "--replay-mode only applies with --replay" in capsys.readouterr().err
    assert main(["execute", team, "-i", "x", "--trace-content"]) == 2
    assert "--trace-content only applies with --trace" in capsys.readouterr().err
    assert main(["execute", team, "-i", "x", "--replay", str(tmp_path / "none.jsonl")]) == 2
    assert "does not exist" in capsys.readouterr().err
