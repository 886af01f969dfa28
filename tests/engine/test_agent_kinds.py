"""An agent's kind (a local loop, a remote ``a2a:`` agent) is decided once and dispatched in one place: a handoff
or a peer never runs a local model loop in a remote agent's name (issue 43 item 1).

``teamrun validate`` refuses a handoff to an ``a2a:`` agent and an ``a2a:`` peer, located; a config built by hand
that reaches the engine anyway is refused by the engine with our own error, before any local loop runs for it."""

from __future__ import annotations

import asyncio
import re
import textwrap
from pathlib import Path
from typing import Any

import pytest
import yaml

from teamrun.cli import main
from teamrun.config.loader import LoadedConfig
from teamrun.config.models import TeamConfig
from teamrun.engine.kinds import AgentKindRefused, admit, kind_of
from teamrun.engine.team import Team
from teamrun.events import Event
from teamrun.testing.scripted import ScriptedModel, tool_call

NOWHERE = "http://127.0.0.1:9"
"""A remote agent's URL where nothing listens: its card cannot be read (a run warning), nothing is sent there."""

HANDOFF = f"""\
version: 1
name: handoff-to-remote
supervisor: desk
agents:
  desk: {{model: openai/desk, description: Front desk., handoffs: [remote]}}
  remote:
    description: A remote agent.
    a2a: {{url: "{NOWHERE}"}}
"""

PEERS = f"""\
version: 1
name: remote-peer
peers: [ada, remote]
limits: {{max_tasks: 4}}
workspace:
  entries:
    tasks: {{kind: board, schema: {{type: string}}}}
agents:
  ada: {{model: openai/ada, description: Does the tasks.}}
  remote:
    description: A remote agent.
    a2a: {{url: "{NOWHERE}"}}
"""


def _by_hand(tmp_path: Path, source: str) -> LoadedConfig:
    """A team built by hand (the Python API), past ``teamrun validate``'s checks."""
    path = tmp_path / "team.yaml"
    path.write_text(source, encoding="utf-8")
    return LoadedConfig(TeamConfig.model_validate(yaml.safe_load(source)), path, frozenset())


def _run(team: Team, events: list[Event]) -> Any:
    return asyncio.run(team.run("my invoice is wrong", subscribers=[events.append]))


def test_a_handoff_to_a_remote_agent_is_refused_and_no_local_loop_runs_for_it(tmp_path: Path) -> None:
    model = ScriptedModel({"desk": [tool_call("transfer_to_remote", reason="billing")]})
    events: list[Event] = []

    with pytest.raises(AgentKindRefused) as refused:
        _run(Team(_by_hand(tmp_path, HANDOFF), chat_model=model), events)

    assert "agent 'remote' is a remote (a2a:) agent and cannot be reached as a handoff" in str(refused.value)
    assert "use delegates_to instead" in str(refused.value)
    assert [call.agent for call in model.calls] == ["desk"]  # the remote agent's name never got a model call
    assert not [e for e in events if e.kind == "agent_start" and e.agent_path[-1] == "remote"]
    model.assert_complete()


def test_a_remote_agent_among_the_peers_is_refused_before_it_runs(tmp_path: Path) -> None:
    model = ScriptedModel({"ada": ["nothing to do"]})
    events: list[Event] = []

    with pytest.raises(AgentKindRefused, match=r"agent 'remote' is a remote .* cannot be reached as a peer"):
        _run(Team(_by_hand(tmp_path, PEERS), chat_model=model), events)

    assert not [e for e in events if e.kind == "agent_start" and e.agent_path[-1] == "remote"]


def test_each_kind_is_decided_from_the_config_and_admitted_by_the_way_it_is_reached(tmp_path: Path) -> None:
    config = _by_hand(tmp_path, HANDOFF).config
    assert kind_of(config.agents["remote"]) == "remote" and kind_of(config.agents["desk"]) == "local"
    for reached in ("entry", "delegation", "handoff", "peer", "step"):
        assert admit(config, "desk", reached) == "local"
    for reached in ("entry", "delegation", "step"):
        assert admit(config, "remote", reached) == "remote"


@pytest.mark.parametrize(("source", "what"), [(HANDOFF, "handoff"), (PEERS, "peer")])
def test_validate_refuses_a_remote_agent_as_a_handoff_or_a_peer_located(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], source: str, what: str
) -> None:
    """The config side (``teamrun validate``): exit 2 and a ``file:line:col: error:`` naming the remote agent."""
    path = tmp_path / "team.yaml"
    path.write_text(textwrap.dedent(source), encoding="utf-8")

    code = main(["validate", str(path)])

    out = capsys.readouterr()
    shown = out.out + out.err
    assert code == 2, shown
    located = re.compile(rf"^{re.escape(str(path))}:\d+:\d+: error: .*{what}", re.IGNORECASE)
    assert any(located.match(text) and "remote" in text for text in shown.splitlines()), shown
