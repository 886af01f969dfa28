"""Every ready-made team: record a run against the local test server, then replay it with the server gone.

The run goes through LiteLLM's real HTTP path (`--model openai/simple`, and
`$TEAMRUN_API_BASE`, every agent's endpoint, pointed at the server); the
server answers like a simple cooperative model (`simple_model`). The replay
must give the same answer, the same delegation records and the same usage
without a single request — the server is stopped, so any model call would fail.

Runs happen in a scratch folder holding a small git repository, so the tools'
output (git, grep) is the same when recording and when replaying.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from teamrun.cli import main
from teamrun.llm.cassette import read_cassette
from tests.fakeserver import FakeOpenAI
from tests.teams.simple_model import ANSWER_PREFIX, simple_model

REPO = Path(__file__).resolve().parents[2]
TEAMS = sorted(
    p
    for p in (REPO / "teams").glob("*.yaml")
    if "peers" not in yaml.safe_load(p.read_text(encoding="utf-8"))
    and not any("a2a" in (spec or {}) for spec in yaml.safe_load(p.read_text(encoding="utf-8"))["agents"].values())
)
"""Every ready-made team but peer teams: their peers race for the board's tasks, so which peer gets which task
(and so each peer's next request) differs from run to run, and a cassette cannot match it. tests/peers runs them.
Nor teams with a remote (``a2a:``) worker: a cassette holds model calls, not the remote agent's answers;
tests/a2a/test_remote_team.py runs them against the a2a-sdk test agent."""
INPUTS = {
    "research-report": "Compare Rust and Go for command-line tools",
    "pr-review": "Review the last commit",
    "product-comparison": "Compare Alpha and Beta on price and license",
    "support-triage": "I was charged twice this month",
}


def _uses_references(team_file: Path) -> bool:
    agents = yaml.safe_load(team_file.read_text(encoding="utf-8"))["agents"]
    return any(((spec or {}).get("delegation") or {}).get("result_references") for spec in agents.values())


@pytest.fixture
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A scratch git repository with two commits, as the current directory."""
    work = tmp_path / "work"
    work.mkdir()
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@example.com",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@example.com",
        "GIT_AUTHOR_DATE": "2025-01-01T00:00:00Z",
        "GIT_COMMITTER_DATE": "2025-01-01T00:00:00Z",
    }

    def git(*args: str) -> None:
        subprocess.run(["git", *args], cwd=work, env=env, check=True, capture_output=True)

    git("init", "-q", "-b", "main")
    (work / "example").write_text("first\n")
    git("add", "example")
    git("commit", "-qm", "add example")
    (work / "example").write_text("second\n")
    git("commit", "-qam", "change example")
    monkeypatch.chdir(work)
    return work


def _execute(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, dict[str, Any], str]:
    code = main(args)
    out, err = capsys.readouterr()
    return code, json.loads(out), err


def _delegations(result: dict[str, Any]) -> list[dict[str, Any]]:
    """The delegation records, in a fixed order (parallel workers finish in any order)."""
    return sorted(result["delegations"], key=lambda d: (d["agent_path"], d["task"], d["response"]))


@pytest.mark.parametrize("team_file", TEAMS, ids=[p.stem for p in TEAMS])
def test_a_recorded_run_replays_without_the_server(
    team_file: Path,
    workdir: Path,
    fake_openai: FakeOpenAI,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    server = fake_openai
    cassette = workdir.parent / f"{team_file.stem}.cassette.jsonl"
    monkeypatch.setenv("TEAMRUN_API_BASE", server.url)
    server.handler("simple", simple_model)
    run = [
        "execute",
        str(team_file),
        "--model",
        "openai/simple",
        "--input",
        INPUTS.get(team_file.stem, "Help me"),
        "--json",
        "--progress",
        "none",
        "--approve",
        "all",
    ]

    code, recorded, err = _execute([*run, "--record", str(cassette)], capsys)
    assert code == 0, err
    requests = len(server.requests())
    if _uses_references(team_file):  # the run passed results on verbatim (fenced by a random token)
        assert any("<<<DATA " in json.dumps(r.request) for r in server.requests())
    server.stop()
    code, replayed, err = _execute([*run, "--replay", str(cassette)], capsys)

    assert code == 0, replayed["error"]
    assert recorded["status"] == replayed["status"] == "done"
    assert replayed["final_text"] == recorded["final_text"]
    assert replayed["final_text"].startswith(ANSWER_PREFIX)
    assert _delegations(replayed) == _delegations(recorded)
    assert recorded["delegations"] and all(d["status"] == "ok" for d in recorded["delegations"])
    assert replayed["usage"] == recorded["usage"]
    assert len(read_cassette(cassette)) == requests == recorded["usage"]["requests"]
    assert len(server.requests()) == requests  # the replay asked the server nothing
    assert server.violations == []


def test_a_replay_of_a_different_input_fails_and_says_why(
    workdir: Path,
    fake_openai: FakeOpenAI,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    cassette = workdir.parent / "research.cassette.jsonl"
    monkeypatch.setenv("TEAMRUN_API_BASE", fake_openai.url)
    fake_openai.handler("simple", simple_model)
    team = str(REPO / "teams" / "research-report.yaml")
    run = ["execute", team, "--model", "openai/simple", "--json", "--progress", "none"]
    code, _, err = _execute([*run, "--input", "Compare Rust and Go", "--record", str(cassette)], capsys)
    assert code == 0, err
    fake_openai.stop()

    code, replayed, _ = _execute([*run, "--input", "Compare Zig and Go", "--replay", str(cassette)], capsys)

    assert code == 1 and replayed["status"] == "failed"
    assert "no recorded model reply matches the request of agent lead" in replayed["error"]
