"""What the page's workbench asks besides runs: the served teams (description, shape, graph) and a thread's turns.

``GET /v1/teams`` describes each served team: its description, its shape (``supervisor``, ``handoffs``,
``workflow`` or ``peers``), its agents, and its graph — the Mermaid text ``teamrun graph`` prints and the
same graph as ``nodes`` and ``edges`` a page can draw without a Mermaid renderer. ``GET /v1/threads/{id}``
answers a thread's conversation (each user turn and each answer), masked with its team's secrets.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any, Literal

from teamrun.config.graph import to_mermaid
from teamrun.serve.served import Served

if TYPE_CHECKING:
    from teamrun.config.models import TeamConfig

__all__ = ["graph_of", "shape_of", "team_view"]

TeamShape = Literal["supervisor", "handoffs", "workflow", "peers"]

# A Mermaid node as `teamrun graph` writes it: an id, then a shape around a quoted label.
_SHAPES = {
    '(["': "terminal",  # the supervisor, a workflow's input and output
    '[["': "map",  # a workflow step run over a list
    '[("': "store",  # a workspace entry
    '[/"': "tool",
    '{{"': "board",
    '{"': "choice",  # a workflow route
    '["': "agent",
}
_NODE = re.compile(
    r"^(?P<id>[A-Za-z0-9_]+)(?P<open>\(\[\"|\[\[\"|\[\(\"|\[/\"|\{\{\"|\{\"|\[\")(?P<label>.*)\"[\]\)\}/]+$"
)
_EDGE = re.compile(r"^(?P<a>\S+?)\s+(?P<arrow><-->|-->|-\.->|---)\s*(?:\|(?P<label>[^|]*)\|\s*)?(?P<b>\S.*)$")
_TAG = re.compile(r"</?small>")


def _node(text: str) -> tuple[str, dict[str, Any] | None]:
    """The id of a node written as ``id`` or ``id["label"]``, and its description when it has a label."""
    found = _NODE.match(text.strip())
    if found is None:
        return text.strip(), None
    label, *details = (_TAG.sub("", part) for part in found["label"].split("<br/>"))
    return found["id"], {"id": found["id"], "label": label, "details": details, "shape": _SHAPES[found["open"]]}


def graph_of(config: TeamConfig) -> dict[str, Any]:
    """The team's graph (what ``teamrun graph`` draws) as ``{"mermaid", "nodes", "edges"}``.

    Each node: ``id``, ``label``, ``details`` (the smaller lines under it), ``shape`` (``terminal``, ``agent``,
    ``map``, ``choice``, ``tool``, ``store``, ``board``). Each edge: ``from``, ``to``, ``label`` and ``style``
    (``solid``: delegates or leads to; ``dotted``: hands off or reads; ``line``: uses a tool; ``both``: claims
    and posts on a board)."""
    mermaid = to_mermaid(config)
    nodes: dict[str, dict[str, Any]] = {}
    edges: list[dict[str, Any]] = []
    styles = {"-->": "solid", "-.->": "dotted", "---": "line", "<-->": "both"}
    for line in mermaid.splitlines()[1:]:
        edge = _EDGE.match(line.strip())
        if edge is None:
            node_id, node = _node(line)
            if node is not None:
                nodes.setdefault(node_id, node)
            continue
        ends = []
        for side in (edge["a"], edge["b"]):
            node_id, node = _node(side)
            if node is not None:
                nodes.setdefault(node_id, node)
            ends.append(node_id)
        edges.append({"from": ends[0], "to": ends[1], "label": edge["label"] or "", "style": styles[edge["arrow"]]})
    for end in (e[k] for e in edges for k in ("from", "to")):  # an end never described (not written so today)
        nodes.setdefault(end, {"id": end, "label": end, "details": [], "shape": "agent"})
    return {"mermaid": mermaid, "nodes": list(nodes.values()), "edges": edges}


def shape_of(config: TeamConfig) -> TeamShape:
    """How the team works: a ``workflow``, ``peers`` on a board, agents that hand off, or a supervisor."""
    if config.workflow is not None:
        return "workflow"
    if config.peers is not None:
        return "peers"
    if any(agent.handoffs for agent in config.agents.values()):
        return "handoffs"
    return "supervisor"


def team_view(name: str, served: Served) -> dict[str, Any]:
    config = served.team.config
    shown: dict[str, Any] = served.redactor.value(
        {
            "object": "teamrun.team",
            "name": name,
            "description": config.description or "",
            "shape": shape_of(config),
            "supervisor": config.supervisor,
            "agents": [{"name": n, "description": a.description or ""} for n, a in config.agents.items()],
            "graph": graph_of(config),
        }
    )
    return shown
