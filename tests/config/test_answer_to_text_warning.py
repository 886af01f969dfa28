"""`answer_to:` an entry that cannot take a text, for an agent that answers in text (no `output_schema`, or an
`a2a:` agent): its answer can never be written there, and `teamrun validate` says so, located (a warning)."""

from __future__ import annotations

from pathlib import Path

import pytest

from teamrun.cli import main

TEAM = """\
version: 1
name: answers
supervisor: lead
workspace:
  entries:
    score: {schema: {type: number}}
    total: {merge: sum}
    notes: {schema: {type: array, items: {type: string}}, merge: append}
    text: {schema: {type: string}}
agents:
  lead: {delegates_to: [rater, counter, writer, typed, remote]}
  rater: {description: Rates., answer_to: score}
  counter: {description: Counts., answer_to: total}
  writer: {description: Writes., answer_to: notes}
  typed: {description: Rates in JSON., answer_to: score, output_schema: {type: number}}
  remote: {description: Rates elsewhere., a2a: {url: "https://agents.example.com/rater"}, answer_to: text}
"""


def test_an_answer_in_text_to_an_entry_that_takes_none_is_a_located_warning(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    team = tmp_path / "team.yaml"
    team.write_text(TEAM, encoding="utf-8")

    assert main(["validate", str(team)]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert lines[-1] == "1 file valid (2 warnings)", out
    rater, counter = lines[:2]
    assert rater.startswith(f"{team}:12:43: warning: agents.rater.answer_to names 'score', which holds a value of type")
    assert "rater answers in text (it has no output_schema)" in rater and "can never be written" in rater
    assert counter.startswith(f"{team}:13:46: warning: agents.counter.answer_to names 'total', which combines numbers")
    assert main(["validate", "--strict", str(team)]) == 2


def test_an_a2a_agent_answering_to_a_number_warns(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    team = tmp_path / "team.yaml"
    team.write_text(TEAM.replace("answer_to: text}", "answer_to: score}"), encoding="utf-8")

    assert main(["validate", str(team)]) == 0
    out = capsys.readouterr().out
    (remote,) = [line for line in out.splitlines() if "agents.remote.answer_to" in line]
    assert f"{team}:16:102: warning: agents.remote.answer_to names 'score'" in remote
    assert "(it is an a2a: agent)" in remote and "output_schema" not in remote.split(":", 4)[-1].split("agent)")[1]
