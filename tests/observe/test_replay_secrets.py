"""A recorded reply that contained a secret is masked in the cassette, and the cassette still replays strictly."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import teamrun
from teamrun.cli import main
from tests.fakeserver import TEST_KEY, FakeOpenAI, text, tool_calls
from tests.observe.conftest import TeamWriter

pytestmark = pytest.mark.usefixtures("restore_structlog")

SECRET = TEST_KEY
"""The value of TEAMRUN_TEST_KEY (set by the ``fake_openai`` fixture): a secret by its variable's name."""

LEAD_AND_ALPHA = """\
supervisor: lead
agents:
  lead: {model: openai/lead, delegates_to: [alpha]}
  alpha: {model: openai/alpha, description: Looks things up.}
"""


def _script(fake_openai: FakeOpenAI) -> None:
    """alpha's reply leaks the key; the lead's next request carries that reply as a tool result."""
    fake_openai.script("lead", [tool_calls(("ask_alpha", {"task": "find the key"})), text("the lead is done")])
    fake_openai.script("alpha", [text(f"the key is {SECRET}, use it")])


def _record(fake_openai: FakeOpenAI, write_team: TeamWriter, tmp_path: Path) -> tuple[Path, Path]:
    _script(fake_openai)
    team_file = write_team(LEAD_AND_ALPHA)
    cassette = tmp_path / "run.cassette.jsonl"

    recorded = teamrun.load_team(team_file, record=cassette).run_sync("go")

    assert recorded.status == "done" and recorded.final_text == "the lead is done"
    fake_openai.assert_complete()
    fake_openai.stop()
    written = cassette.read_text(encoding="utf-8")
    assert SECRET not in written and "the key is ***, use it" in written
    return team_file, cassette


def test_strict_replay_of_a_reply_with_a_masked_secret(
    fake_openai: FakeOpenAI, write_team: TeamWriter, tmp_path: Path
) -> None:
    team_file, cassette = _record(fake_openai, write_team, tmp_path)

    replayed = teamrun.load_team(team_file, replay=cassette).run_sync("go")

    assert replayed.status == "done", replayed.error
    assert replayed.final_text == "the lead is done"


def test_strict_replay_on_the_command_line_without_the_secret_set(
    fake_openai: FakeOpenAI,
    write_team: TeamWriter,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    team_file, cassette = _record(fake_openai, write_team, tmp_path)
    monkeypatch.delenv("TEAMRUN_TEST_KEY")  # CI replays with no key at all

    code = main(["execute", str(team_file), "-i", "go", "--replay", str(cassette), "--progress", "none", "--json"])

    out, err = capsys.readouterr()
    assert code == 0, err
    result: dict[str, Any] = json.loads(out)
    assert result["final_text"] == "the lead is done"
    assert [d["response"] for d in result["delegations"]] == ["the key is ***, use it"]
