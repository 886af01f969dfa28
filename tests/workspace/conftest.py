"""Team files for the workspace tests."""

from __future__ import annotations

import textwrap
from pathlib import Path

WORKERS = ("w1", "w2", "w3")


def team_text(defaults: str = "") -> str:
    """Three workers sharing a `replace` entry, an `append` list and a `sum` counter."""
    workers = ", ".join(WORKERS)
    agents = "\n".join(f"  {w}: {{model: openai/{w}, description: Does one part.}}" for w in WORKERS)
    return (
        textwrap.dedent(f"""\
        version: 1
        name: ws-test
        supervisor: lead
        {defaults}
        workspace:
          entries:
            plan:
              description: The plan the team follows.
              schema: {{type: string}}
              write: [{workers}]
            items:
              schema: {{type: array, items: {{type: string}}}}
              merge: append
              write: [{workers}]
            count:
              schema: {{type: integer}}
              merge: sum
              write: [{workers}]
        agents:
          lead: {{model: openai/lead, delegates_to: [{workers}], delegation: {{max_concurrency: 3}}}}
        """)
        + agents
        + "\n"
    )


def write_team(directory: Path, defaults: str = "") -> Path:
    path = directory / "team.yaml"
    path.write_text(team_text(defaults), encoding="utf-8")
    return path
