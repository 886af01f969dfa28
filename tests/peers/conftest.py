"""Team files for the peer tests: three peers (models `openai/p1`..`p3`) around one board of string tasks."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

PEERS = ("p1", "p2", "p3")


def write_team(
    directory: Path,
    *,
    url: str,
    initial: list[str],
    max_tasks: int = 100,
    lease_s: float = 600,
    max_claims: int = 3,
    budgets: dict[str, str] | None = None,
) -> Path:
    """A peer team on the fake server at ``url``; ``budgets``: a peer's ``budget:`` (flow YAML)."""
    agents = "\n".join(f"  {p}: {{model: openai/{p}, description: A peer.{_budget(p, budgets)}}}" for p in PEERS)
    text = textwrap.dedent(f"""\
        version: 1
        name: peers-test
        peers: [{", ".join(PEERS)}]
        defaults: {{api_base: '{url}', api_key_env: TEAMRUN_TEST_KEY, num_retries: 0, request_timeout_s: 900}}
        limits: {{max_tasks: {max_tasks}}}
        workspace:
          entries:
            tasks:
              kind: board
              schema: {{type: string}}
              lease_s: {lease_s}
              max_claims: {max_claims}
              initial: {json.dumps(initial)}
        agents:
        """)
    path = directory / "team.yaml"
    path.write_text(text + agents + "\n", encoding="utf-8")
    return path


def _budget(peer: str, budgets: dict[str, str] | None) -> str:
    return f", budget: {budgets[peer]}" if budgets and peer in budgets else ""
