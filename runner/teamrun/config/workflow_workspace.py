"""What a workflow's templates read of the ``workspace:``, told from their source (no rendering).

A step's templates read ``workspace.<entry>`` (or ``workspace['<entry>']``): the
entry's value as the step starts. The checks (:mod:`teamrun.config.checks.workflow_workspace`),
the graph (:mod:`teamrun.config.graph.workflow`) and the engine (which reads the
workspace only for a step whose templates use it) all ask this module.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

from teamrun.config import templates

__all__ = ["WORKSPACE_NAME", "EntryRead", "entries_read", "reads_workspace"]

WORKSPACE_NAME = "workspace"
"""The name a workflow template reads the workspace's entries under: ``{{ workspace.findings }}``."""


@dataclass(frozen=True)
class EntryRead:
    """One read of the workspace in a template: the entry (``None``: the whole ``workspace``) and its line."""

    entry: str | None
    line: int
    """1-based line inside the template."""


@functools.lru_cache(maxsize=512)
def entries_read(source: str, *, expression: bool = False) -> tuple[EntryRead, ...]:
    """Each read of ``workspace`` in ``source`` (a template, or a ``map:`` expression), in source order.

    ``workspace.x`` and ``workspace['x']`` name their entry; any other use (``workspace | length``, a
    computed key) reads the whole workspace (``entry`` ``None``). A template that does not parse reads
    nothing here (its syntax error is reported elsewhere)."""
    if not expression and templates.is_plain_text(source):
        return ()
    from jinja2 import nodes

    try:
        tree = templates.environment().parse("{{ " + source + " }}" if expression else source)
    except templates.TemplateSyntaxError:
        return ()
    named: set[int] = set()
    found: list[EntryRead] = []
    node: Any
    for node in tree.find_all((nodes.Getattr, nodes.Getitem)):
        inner = node.node
        if not (isinstance(inner, nodes.Name) and inner.name == WORKSPACE_NAME and inner.ctx == "load"):
            continue
        if isinstance(node, nodes.Getattr):
            entry: str | None = str(node.attr)
        elif isinstance(node.arg, nodes.Const) and isinstance(node.arg.value, str):
            entry = node.arg.value
        else:
            continue
        named.add(id(inner))
        found.append(EntryRead(entry, node.lineno))
    for name in tree.find_all(nodes.Name):
        if name.name == WORKSPACE_NAME and name.ctx == "load" and id(name) not in named:
            found.append(EntryRead(None, name.lineno))
    if found and _shadowed(tree):
        return ()
    return tuple(sorted(found, key=lambda r: r.line))


def _shadowed(tree: object) -> bool:
    """The template sets ``workspace`` itself (``{% set workspace = ... %}``, a loop variable): no read."""
    from jinja2 import meta

    return WORKSPACE_NAME not in meta.find_undeclared_variables(tree)  # type: ignore[arg-type]


def reads_workspace(*sources: str | None, expression: bool = False) -> bool:
    """Whether any of ``sources`` reads the workspace."""
    return any(source is not None and entries_read(source, expression=expression) for source in sources)
