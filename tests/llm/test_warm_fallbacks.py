"""A team's fallback models are made ready with its first models: LiteLLM imported and each warmed at start-up, so
the first request that falls back does not pay LiteLLM's first-call set-up (issue 45)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import teamrun

TEAM = """\
version: 1
name: warm
supervisor: lead
defaults:
  model: offline
  fallbacks:
    - model: openai/gpt-4o-mini
      api_base: http://127.0.0.1:9/v1
agents:
  lead:
    instructions: Answer.
  writer:
    instructions: Write.
    model: offline
    fallbacks:
      - model: anthropic/claude-3-5-haiku-latest
        api_base: http://127.0.0.1:9
  quiet:
    instructions: Answer alone.
    fallbacks: []
"""


def _team(tmp_path: Path, model: str | None = None) -> teamrun.Team:
    path = tmp_path / "team.yaml"
    path.write_text(TEAM, encoding="utf-8")
    return teamrun.load_team(path, model=model)


def test_fallback_models_are_warmed_with_the_first_ones(tmp_path: Path) -> None:
    team = _team(tmp_path)
    assert team.models() == ["offline"]  # the model of each agent: what the starting line names
    expected = ["offline", "openai/gpt-4o-mini", "anthropic/claude-3-5-haiku-latest"]
    assert team.models_to_prepare() == expected  # what start-up imports LiteLLM for (a fallback is not offline)
    warmed = asyncio.run(team.warm_up())
    assert warmed == ["openai/gpt-4o-mini", "anthropic/claude-3-5-haiku-latest"]


def test_a_model_override_warms_no_fallback(tmp_path: Path) -> None:
    """``--model`` replaces each agent's list (no fallbacks): nothing else is warmed."""
    team = _team(tmp_path, model="offline")
    assert team.models_to_prepare() == ["offline"]
    assert asyncio.run(team.warm_up()) == []
