"""The delegation graph of a team, as Mermaid text."""

from __future__ import annotations

from teamrun.config.graph.nodes import agent_node, label_text, node_id
from teamrun.config.graph.peers import board_lines, peer_lines
from teamrun.config.graph.workflow import entry_node, workflow_lines
from teamrun.config.models import TeamConfig


def _url_label(url: str) -> str:
    """A URL in a Mermaid label: quotes and angle brackets as Mermaid entities (``#quot;``, ``#lt;``,
    ``#gt;``), so a URL cannot end the label or put HTML (``<script>``) into the drawing."""
    return "".join({'"': "#quot;", "<": "#lt;", ">": "#gt;", "`": "#96;"}.get(c, c) for c in url)


def to_mermaid(config: TeamConfig) -> str:
    """``flowchart TD``: solid arrows for delegation, dotted ones for handoffs, tools as notes, remote
    (``a2a:``) agents as hexagons labelled ``a2a: <url>``; workspace
    entries as cylinders, with who writes them (``writes``) and who only reads them (``reads``); long-term memory
    as a cylinder, with who recalls, searches and saves."""
    lines = ["flowchart TD"]
    if config.workflow is not None:  # the steps (a team step shows its supervisor's workers)
        return "\n".join([*lines, *workflow_lines(config), *workspace_lines(config), *memory_lines(config)]) + "\n"
    if config.peers is not None:  # the peers around their board (the board is drawn with the workspace)
        return "\n".join([*lines, *peer_lines(config), *workspace_lines(config), *memory_lines(config)]) + "\n"
    for name, agent in config.agents.items():
        role = "supervisor" if name == config.supervisor else (agent.model or "")
        shown = label_text(role)
        if agent.a2a is not None:  # a remote worker: a hexagon, labelled with where it runs
            shown = f"a2a: {_url_label(agent.a2a.url)}"
        label = f"{name}<br/><small>{shown}</small>" if shown else name
        shape = f'(["{label}"])' if name == config.supervisor else f'["{label}"]'
        if agent.a2a is not None and name != config.supervisor:
            shape = f'{{{{"{label}"}}}}'
        lines.append(f"  {agent_node(name)}{shape}")
    for name, agent in config.agents.items():
        for target in agent.delegates_to or []:
            lines.append(f"  {agent_node(name)} -->|delegates| {agent_node(target)}")
        for target in agent.handoffs or []:
            lines.append(f"  {agent_node(name)} -.->|hands off| {agent_node(target)}")
        for tool in agent.tools or []:
            tool_id = f"t_{agent_node(name)}_{node_id('', tool)}"
            lines.append(f'  {agent_node(name)} --- {tool_id}[/"{label_text(tool)}"/]')
    return "\n".join([*lines, *workspace_lines(config), *memory_lines(config)]) + "\n"


MEMORY_NODE = "long_term_memory"
"""The node of the team's long-term memory (no agent's or entry's node id has this form)."""


def memory_lines(config: TeamConfig) -> list[str]:
    """Long-term memory (``memory:``) as one cylinder: a dotted arrow to each agent that recalls before its turns
    (``recalls``) or searches it (``searches``), a solid one from each agent that saves to it (``saves``)."""
    memory = config.memory
    if memory is None:
        return []
    label = f"long-term memory<br/><small>per resource; {memory.embedding.model}</small>"
    lines = [f'  {MEMORY_NODE}[("{label_text(label)}")]']
    lines.extend(f"  {MEMORY_NODE} -.->|recalls| {agent_node(agent)}" for agent in memory.recall or {})
    lines.extend(f"  {MEMORY_NODE} -.->|searches| {agent_node(agent)}" for agent in memory.search or [])
    lines.extend(f"  {agent_node(agent)} -->|saves| {MEMORY_NODE}" for agent in memory.save or [])
    return lines


def workspace_lines(config: TeamConfig) -> list[str]:
    """The workspace's entries (``rule``), an arrow from each writer, a dotted one to each reader that only reads.

    Readers left unnamed (every agent reads by default) are not drawn one by one: the entry's label says so."""
    if config.workspace is None:
        return []
    lines: list[str] = []
    for entry, spec in config.workspace.entries.items():
        if spec.kind == "board":
            lines.extend(board_lines(config, entry))
            continue
        node = entry_node(entry)
        readers = "every agent reads" if spec.read is None else ""
        label = f"{entry}<br/><small>{spec.merge}{'; ' + readers if readers else ''}</small>"
        lines.append(f'  {node}[("{label_text(label)}")]')
        writers = list(spec.write or [])
        lines.extend(f"  {agent_node(agent)} -->|writes| {node}" for agent in writers)
        lines.extend(f"  {node} -.->|reads| {agent_node(agent)}" for agent in spec.read or [] if agent not in writers)
    return lines
