"""A handoff to an `a2a:` agent and an `a2a:` peer, through the CLI: `teamrun execute` refuses the file before
anything runs (exit 2, located), so neither the provider nor the remote agent is sent anything — counted at both
(issue 43 item 1: a handoff ran a local loop in the remote agent's name, and its description went to the provider)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from teamrun.cli import main
from tests.a2a.remote_fixtures import A2AAgent
from tests.fakeserver import FakeOpenAI, tool_calls


def _handoff(url: str, api_base: str) -> str:
    return f"""version: 1
name: handoff-to-remote
supervisor: desk
defaults: {{api_key_env: TEAMRUN_TEST_KEY, num_retries: 0, api_base: "{api_base}"}}
agents:
  desk: {{model: openai/desk, description: Front desk., handoffs: [remote]}}
  remote:
    description: A remote agent.
    a2a: {{url: "{url}"}}
"""


def _peer(url: str, api_base: str) -> str:
    return f"""version: 1
name: remote-peer
peers: [ada, remote]
limits: {{max_tasks: 4}}
defaults: {{api_key_env: TEAMRUN_TEST_KEY, num_retries: 0, api_base: "{api_base}"}}
workspace:
  entries:
    tasks: {{kind: board, schema: {{type: string}}}}
agents:
  ada: {{model: openai/ada, description: Does the tasks.}}
  remote:
    description: A remote agent.
    a2a: {{url: "{url}"}}
"""


@pytest.mark.parametrize(("shape", "what"), [(_handoff, "handoff"), (_peer, "peer")])
def test_execute_refuses_a_remote_agent_as_a_handoff_or_a_peer_and_contacts_nobody(
    tmp_path: Path,
    fake_openai: FakeOpenAI,
    a2a_agent: Callable[..., A2AAgent],
    capsys: pytest.CaptureFixture[str],
    shape: Callable[[str, str], str],
    what: str,
) -> None:
    agent = a2a_agent()
    fake_openai.script("desk", [tool_calls(("transfer_to_remote", {"reason": "billing"}))])
    team = tmp_path / "team.yaml"
    team.write_text(shape(agent.url, fake_openai.url), encoding="utf-8")

    code = main(["execute", str(team), "-i", "my invoice is wrong", "--progress", "none"])

    err = capsys.readouterr().err
    assert code == 2, err
    assert "team.yaml:" in err and what in err and "remote" in err
    assert fake_openai.requests() == []  # the provider was sent nothing
    assert agent.records() == []  # nor was the remote agent (its card neither)
