"""A team drawn as a Mermaid graph (``teamrun graph``, the server's team pages): the delegation graph
(:mod:`~teamrun.config.graph.mermaid`), a peer team around its board (:mod:`~teamrun.config.graph.peers`) and a
workflow's steps (:mod:`~teamrun.config.graph.workflow`)."""

from teamrun.config.graph.mermaid import to_mermaid

__all__ = ["to_mermaid"]
