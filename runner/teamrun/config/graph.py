"""The delegation graph of a team, as Mermaid text."""

from __future__ import annotations

import re

from teamrun.config.models import TeamConfig
from teamrun.config.workflow_graph import workflow_lines


def _node_id(name: str) -> str:
    return "a_" + re.sub(r"[^A-Za-z0-9_]", "_", name)


def _label(text: str) -> str:
    return text.replace('"', "'")


def to_mermaid(config: TeamConfig) -> str:
    """``flowchart TD``: solid arrows for delegation, dotted ones for handoffs, tools as notes."""
    lines = ["flowchart TD"]
    if config.workflow is not None:  # the steps (a team step shows its supervisor's workers)
        return "\n".join([*lines, *workflow_lines(config)]) + "\n"
    for name, agent in config.agents.items():
        role = "supervisor" if name == config.supervisor else (agent.model or "")
        label = f"{name}<br/><small>{_label(role)}</small>" if role else name
        shape = f'(["{label}"])' if name == config.supervisor else f'["{label}"]'
        lines.append(f"  {_node_id(name)}{shape}")
    for name, agent in config.agents.items():
        for target in agent.delegates_to or []:
            lines.append(f"  {_node_id(name)} -->|delegates| {_node_id(target)}")
        for target in agent.handoffs or []:
            lines.append(f"  {_node_id(name)} -.->|hands off| {_node_id(target)}")
        for tool in agent.tools or []:
            tool_id = f"t_{_node_id(name)}_{re.sub(r'[^A-Za-z0-9_]', '_', tool)}"
            lines.append(f'  {_node_id(name)} --- {tool_id}[/"{_label(tool)}"/]')
    return "\n".join(lines) + "\n"
