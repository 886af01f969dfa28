"""The conventions written once: which model an agent uses, and the markers the engine writes and the
offline model reads back (:mod:`teamrun.conventions`, :mod:`teamrun.defaults`)."""

from __future__ import annotations

from pathlib import Path

import pytest

from teamrun.conventions import CONTEXT_HEADING, DATA_BLOCK
from teamrun.engine.filters import as_context_block
from teamrun.engine.references import RefRequest, render_blocks
from teamrun.engine.team import load_team
from teamrun.events import AgentStart, Event

TEAM = """\
version: 1
name: models
supervisor: lead
defaults:
  model: {defaults_model}
agents:
  lead:
    description: Leads.
    model: "{lead_model}"
    delegates_to: [helper]
  helper:
    description: Helps.
"""


def _models_used(
    tmp_path: Path, *, defaults_model: str, lead_model: str, override: str | None = None
) -> dict[str, str]:
    path = tmp_path / "team.yaml"
    path.write_text(TEAM.format(defaults_model=defaults_model, lead_model=lead_model), encoding="utf-8")
    seen: list[Event] = []
    team = load_team(path, model=override)
    result = team.run_sync("Compare Rust and Go", subscribers=[seen.append])
    assert result.status == "done"
    return {e.agent_path[-1]: e.model for e in seen if isinstance(e, AgentStart)}


def test_an_agent_uses_its_own_model_else_the_defaults(tmp_path: Path) -> None:
    used = _models_used(tmp_path, defaults_model="offline/team-default", lead_model="offline/lead-own")
    assert used == {"lead": "offline/lead-own", "helper": "offline/team-default"}


def test_an_empty_agent_model_falls_back_to_the_defaults_as_models_lists_it(tmp_path: Path) -> None:
    """``model: "${VAR:-}"`` left empty is unset: the run uses ``defaults.model``, the model
    ``Team.models()`` reports (the run used the built-in ``offline`` before: two rules, two answers)."""
    used = _models_used(tmp_path, defaults_model="offline/team-default", lead_model="${TEAMRUN_UNSET_MODEL:-}")
    assert used == {"lead": "offline/team-default", "helper": "offline/team-default"}
    assert load_team(tmp_path / "team.yaml").models() == ["offline/team-default"]


def test_the_override_wins_over_every_agent(tmp_path: Path) -> None:
    used = _models_used(
        tmp_path, defaults_model="offline/team-default", lead_model="offline/lead-own", override="offline/override"
    )
    assert used == {"lead": "offline/override", "helper": "offline/override"}


@pytest.mark.parametrize("label", [None, "plain-label", "two words", "line\nbreak >>>"])
def test_the_offline_model_finds_every_data_block_the_engine_writes(label: str | None) -> None:
    text = "line one\n<<<END fake>>>\nline three"
    rendered = render_blocks([(RefRequest("researcher-1", label, "a note"), text)])
    assert [(m.group(2), m.group(3)) for m in DATA_BLOCK.finditer(rendered)] == [("researcher-1", text)]


def test_the_offline_model_finds_the_context_heading_the_engine_writes() -> None:
    block = as_context_block("lead", [{"role": "user", "content": "the question"}])
    assert CONTEXT_HEADING.match(block.splitlines()[0])
