"""Testing teams with pytest: a strict scripted model, assertions on results, and fixtures.

The fixtures (``team_factory``, ``run_team``, ``scripted_model``,
``teamrun_cassette``) and the network guard come from the pytest plugin
:mod:`teamrun.testing.plugin`, which pytest loads by itself once teamrun is
installed.

    from teamrun.testing import assert_delegated_to, delegate

    def test_lead_asks_the_researcher(run_team, scripted_model):
        model = scripted_model({"lead": [delegate("researcher", task="facts"), "report"],
                                "researcher": ["the facts"]})
        result = run_team("teams/research.yaml", "Compare X and Y", chat_model=model)
        assert_delegated_to(result, ["researcher"])
"""

from __future__ import annotations

from teamrun.testing.assertions import (
    EventRecorder,
    assert_delegated_to,
    assert_final_text_matches,
    assert_tools_called,
    assert_within_budget,
    events_of,
)
from teamrun.testing.network import NetworkBlockedError, NetworkGuard, is_loopback
from teamrun.testing.scripted import (
    ScriptedCall,
    ScriptedModel,
    ScriptExhausted,
    Step,
    delegate,
    text,
    tool_call,
    tool_calls,
)

__all__ = [
    "EventRecorder",
    "NetworkBlockedError",
    "NetworkGuard",
    "ScriptExhausted",
    "ScriptedCall",
    "ScriptedModel",
    "Step",
    "assert_delegated_to",
    "assert_final_text_matches",
    "assert_tools_called",
    "assert_within_budget",
    "delegate",
    "events_of",
    "is_loopback",
    "text",
    "tool_call",
    "tool_calls",
]
