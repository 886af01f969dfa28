"""A question holding a bidi override reaches `runs show` and the waiting listing with the override closed on
its own line (attack report a42, D5): the lines after it (the hint, the next item) are not reversed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from teamrun.cli import main

TEAM = """version: 1
name: ask-offline
supervisor: lead
defaults: {model: offline}
tools:
  ask_ops: {person: {}}
agents:
  lead: {tools: [ask_ops]}
"""


def _open_overrides(text: str) -> list[str]:
    """Lines where a U+202E has no PDF (U+202C) or PDI (U+2069, ending an isolate around it) after it."""
    return [line for line in text.split("\n") if line.rfind("\u202e") > max(line.rfind("\u202c"), line.rfind("\u2069"))]


def test_the_waiting_listing_and_runs_show_close_an_override_on_its_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    team = tmp_path / "team.yaml"
    team.write_text(TEAM, encoding="utf-8")
    store = str(tmp_path / "runs.db")

    code = main(["execute", str(team), "-i", "Launch \u202eFalcon", "--store", store, "--progress", "none", "--detach"])
    listing = capsys.readouterr()
    assert code == 4, listing.err
    assert "\u202eFalcon" in listing.err  # the question is listed
    assert _open_overrides(listing.err) == [], listing.err

    code = main(["execute", str(team), "-i", "Again \u202eFalcon", "--store", store, "--json", "--detach"])
    run_id = json.loads(capsys.readouterr().out)["run_id"]
    assert main(["runs", "show", run_id, "--store", store]) == 0
    shown = capsys.readouterr().out
    assert "\u202eFalcon" in shown
    assert _open_overrides(shown) == [], shown
