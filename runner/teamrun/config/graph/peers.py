"""A peer team drawn as Mermaid lines: the peers around their board, an arrow both ways for each."""

from __future__ import annotations

from teamrun.config.graph.nodes import agent_node, label_text, node_id
from teamrun.config.models import TeamConfig

__all__ = ["board_lines", "board_node", "peer_lines"]


def board_node(entry: str) -> str:
    return node_id("b_", entry)


def peer_lines(config: TeamConfig) -> list[str]:
    """Each peer (a rounded node) with its model; the board itself comes from :func:`board_lines`."""
    lines: list[str] = []
    for name in config.peers or []:
        agent = config.agents.get(name)
        model = (agent.model if agent is not None else None) or ""
        label = label_text(f"{name}<br/><small>peer{'; ' + model if model else ''}</small>")
        lines.append(f'  {agent_node(name)}(["{label}"])')
    return lines


def board_lines(config: TeamConfig, entry: str) -> list[str]:
    """A board (a hexagon with its lease and claim limits) and ``claims / posts`` arrows from each of its users
    (its ``write:``, else the team's peers)."""
    assert config.workspace is not None
    spec = config.workspace.entries[entry]
    node = board_node(entry)
    limit = f"; max_tasks {config.limits.max_tasks}" if config.limits and config.limits.max_tasks else ""
    label = f"{entry}<br/><small>board: lease {spec.lease_s:g} s, {spec.max_claims} claims{limit}</small>"
    users = spec.write if spec.write is not None else config.peers or []
    lines = [f'  {node}{{{{"{label}"}}}}']
    lines.extend(f"  {agent_node(user)} <-->|claims / posts| {node}" for user in users)
    return lines
