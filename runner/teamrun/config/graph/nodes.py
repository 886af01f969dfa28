"""What the drawings share: a Mermaid node id made from a name, and text that cannot end a quoted label."""

from __future__ import annotations

import re

__all__ = ["agent_node", "label_text", "node_id"]


def node_id(prefix: str, name: str) -> str:
    """``prefix`` and ``name`` with every character Mermaid does not take in an id as ``_``."""
    return prefix + re.sub(r"[^A-Za-z0-9_]", "_", name)


def agent_node(name: str) -> str:
    """The node of an agent (the same in the delegation graph, a peer team and a workflow)."""
    return node_id("a_", name)


def label_text(text: str) -> str:
    """``text`` inside a quoted Mermaid label (a double quote would end it)."""
    return text.replace('"', "'")
