"""Testing a team with teamrun's pytest plugin.

The plugin comes with teamrun (a ``pytest11`` entry point): the fixtures below
need no conftest.py, and any test that tries to reach a real provider fails.

    pytest examples/test_team_with_plugin.py
    pytest examples/test_team_with_plugin.py --teamrun-record   # re-record the cassette
"""

from __future__ import annotations

from pathlib import Path

import pytest

from teamrun.testing import (
    assert_delegated_to,
    assert_final_text_matches,
    assert_tools_called,
    assert_within_budget,
    delegate,
    tool_call,
)

TEAM = Path(__file__).with_name("trip-planner.yaml")


def test_the_team_runs_offline(run_team):
    """``run_team`` runs on the offline simulator unless you give it a model: no key, no network."""
    result = run_team(TEAM, "Plan a weekend in Lisbon")

    assert result.status == "done"
    assert_delegated_to(result, ["weather", "budget"], status="ok")
    assert_tools_called(result, {"weather": ["forecast"]}, exactly=True)
    assert_within_budget(result, max_tokens=20_000, max_delegations=2)


def test_the_planner_uses_what_its_workers_found(run_team, scripted_model):
    """A strict script per agent: a call past it, or a step left over, fails the test."""
    model = scripted_model(
        {
            "planner": [
                delegate("weather", "budget", task="Lisbon, two nights next weekend"),
                "Go on Saturday: sunny and 24C. Budget about 320 euros.",
            ],
            "weather": [tool_call("forecast", city="Lisbon"), "Saturday sunny 24C, Sunday rain."],
            "budget": ["About 320 euros."],
        }
    )

    result = run_team(TEAM, "Plan a weekend in Lisbon", chat_model=model)

    assert_final_text_matches(result, r"^Go on Saturday")
    assert_delegated_to(result, ["weather", "budget"], status="ok")
    # what each agent was shown is there to check too
    (_, after_tool) = model.calls_of("weather")
    assert after_tool.tool_results == ["Forecast for Lisbon: Saturday sunny 24C, Sunday rain 17C\n"]
    (planner_first, planner_last) = model.calls_of("planner")
    assert {"ask_weather", "ask_budget"} <= set(planner_first.tool_names)
    assert "About 320 euros." in "".join(planner_last.tool_results)


# lenient: if the prompts change a little, the recorded replies are still used by agent and turn;
# the default, strict, fails on any request that was not recorded and says how to re-record.
@pytest.mark.teamrun_cassette("cassettes/trip-planner.jsonl", mode="lenient")
def test_a_recorded_run_replays_the_same(run_team, teamrun_cassette):
    """``teamrun_cassette`` replays a recording (made with --teamrun-record, or `teamrun execute --record`)."""
    result = run_team(TEAM, "Plan a weekend in Lisbon", chat_model=teamrun_cassette)

    assert result.status == "done"
    assert_delegated_to(result, ["weather", "budget"], status="ok")
    assert_final_text_matches(result, r"Lisbon")
