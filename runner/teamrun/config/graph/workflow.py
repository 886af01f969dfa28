"""A team file's ``workflow:`` as Mermaid lines: steps in order, maps, routes with their branches, loops.

Shapes: an agent step is a box, a map step a stacked box (``[[...]]``), a route
a diamond after its step, a loop a subgraph with an ``until`` arrow back to its
first step, a team step a rounded box with arrows to its supervisor's workers. With a ``workspace:``, a
step's ``write:`` is an arrow to its entry (``writes``), and each entry its templates read a dotted arrow
to the step (``reads``); the entries themselves are drawn by :func:`teamrun.config.graph.workspace_lines`.
"""

from __future__ import annotations

from collections.abc import Sequence

from teamrun.config.graph.nodes import label_text, node_id
from teamrun.config.models import Check, TeamConfig, WorkflowStep
from teamrun.config.workflow_workspace import entries_read

__all__ = ["entry_node", "workflow_lines"]


def entry_node(entry: str) -> str:
    """The Mermaid node of a workspace entry."""
    return node_id("w_", entry)


class _Drawing:
    def __init__(self, config: TeamConfig) -> None:
        self.config = config
        self.lines: list[str] = []
        self.count = 0

    def node(self, prefix: str) -> str:
        self.count += 1
        return f"{prefix}{self.count}"

    def chain(
        self, steps: Sequence[WorkflowStep], before: list[tuple[str, str]], indent: str
    ) -> tuple[str | None, list[tuple[str, str]]]:
        """Draw ``steps`` after the nodes in ``before`` (``(node, edge label)``): its first node, its open ends."""
        ends, first = before, None
        for step in steps:
            start, ends_now = self.step(step, indent)
            first = first or start
            for node, label in ends:
                arrow = f" -->|{label_text(label)}| " if label else " --> "
                self.lines.append(f"{indent}{node}{arrow}{start}")
            ends = ends_now
        return first, ends

    def step(self, step: WorkflowStep, indent: str) -> tuple[str, list[tuple[str, str]]]:
        """Draw one step: its first node and its open ends."""
        if step.loop is not None:
            loop = step.loop
            box = self.node("loop")
            checks = ", ".join(_check(c) for c in loop.until)
            title = f"{label_text(step.name)}: loop, at most {loop.max_iterations} times"
            self.lines.append(f'{indent}subgraph {box}["{title}"]')
            first, body_ends = self.chain(loop.steps, [], indent + "  ")
            self.lines.append(f"{indent}end")
            for node, _ in body_ends:
                self.lines.append(f'{indent}{node} -.->|"until {label_text(checks)}"| {first or box}')
            self.workspace(step, box, indent)
            return box, [(box, "")]
        agent = step.runs or ""
        node = self.node("s")
        title = f"{step.name}" + (f"<br/><small>{agent}</small>" if agent != step.name else "")
        if step.map is not None:
            title += f"<br/><small>map over {label_text(step.map)}</small>"
            self.lines.append(f'{indent}{node}[["{label_text(title)}"]]')
        elif step.team is not None:
            self.lines.append(f'{indent}{node}(["{label_text(title)}<br/><small>team</small>"])')
            for worker in self.config.agents[agent].delegates_to or []:
                worker_node = self.node("w")
                self.lines.append(f'{indent}{worker_node}["{label_text(worker)}"]')
                self.lines.append(f"{indent}{node} -->|delegates| {worker_node}")
        else:
            self.lines.append(f'{indent}{node}["{label_text(title)}"]')
        self.workspace(step, node, indent)
        if step.route is None:
            return node, [(node, "")]
        route = step.route
        choice = self.node("r")
        self.lines.append(f'{indent}{choice}{{"{label_text(route.on)}?"}}')
        self.lines.append(f"{indent}{node} --> {choice}")
        ends: list[tuple[str, str]] = []
        for value, branch in [*route.branches.items(), ("default", route.default)]:
            if branch:
                ends += self.chain(branch, [(choice, value)], indent)[1]
            else:
                ends.append((choice, value))
        return node, ends

    def workspace(self, step: WorkflowStep, node: str, indent: str) -> None:
        """The entries the step's templates read (dotted arrows to it) and the one it writes."""
        entries = self.config.workspace.entries if self.config.workspace is not None else {}
        reads = [*entries_read(step.input or ""), *entries_read(step.map or "", expression=True)]
        for entry in dict.fromkeys(r.entry for r in reads if r.entry in entries):
            assert entry is not None
            self.lines.append(f"{indent}{entry_node(entry)} -.->|reads| {node}")
        if step.write is not None and step.write in entries:
            self.lines.append(f"{indent}{node} -->|writes| {entry_node(step.write)}")


def _check(check: Check) -> str:
    if check.name:
        return check.name
    for kind in ("contains", "regex", "python"):
        value = getattr(check, kind)
        if value is not None:
            return f"{kind} {value}"
    return "json_schema" if check.json_schema is not None else "judge"


def workflow_lines(config: TeamConfig) -> list[str]:
    """The body of a ``flowchart TD`` for the config's workflow (it must have one)."""
    assert config.workflow is not None
    drawing = _Drawing(config)
    drawing.lines.append('  start(["input"])')
    _, ends = drawing.chain(config.workflow.steps, [("start", "")], "  ")
    drawing.lines.append('  finish(["output"])')
    entries = config.workspace.entries if config.workspace is not None else {}
    reads = entries_read(config.workflow.output or "")
    for entry in dict.fromkeys(r.entry for r in reads if r.entry in entries):
        assert entry is not None
        drawing.lines.append(f"  {entry_node(entry)} -.->|reads| finish")
    for node, label in ends:
        drawing.lines.append(f"  {node} -->|{label_text(label)}| finish" if label else f"  {node} --> finish")
    return drawing.lines
