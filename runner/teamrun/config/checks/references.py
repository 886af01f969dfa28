"""Semantic checks of who a team's agents name: the supervisor, delegation and handoff targets, tools.

Names that are not defined (with the closest one), agents that name themselves
or a target twice, delegation cycles, a chain deeper than ``limits.max_depth``,
agents the supervisor can never reach.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from teamrun.config.checks.raw import mapping, names
from teamrun.config.diagnostics import Diagnostic, JsonPath, did_you_mean, dotted, listing

if TYPE_CHECKING:
    from teamrun.config.checks.context import CheckContext

__all__ = ["is_agent_name", "reference_checks"]


def reference_checks(c: CheckContext) -> Iterator[Diagnostic]:
    """The references, then the graph they make (``_references`` tells whether it is complete)."""
    yield from _supervisor(c)
    yield from _references(c)
    yield from _cycles(c)
    yield from _depth(c)
    yield from _unused_agents(c)


def is_agent_name(name: str) -> bool:
    """Whether ``name`` is a well-formed agent name (else the schema reports it)."""
    from teamrun.config.schema import ecma_pattern, validation_schema

    return ecma_pattern(validation_schema()["properties"]["supervisor"]["pattern"]).search(name) is not None


def _supervisor(c: CheckContext) -> Iterator[Diagnostic]:
    name = c.supervisor
    if name is not None and c.agents and name not in c.agents and is_agent_name(name):
        hint = did_you_mean(name, list(c.agents))
        yield c.error(
            ("supervisor",),
            f"supervisor '{name}' is not defined in agents{hint} (defined agents: {listing(list(c.agents))})",
            "reference",
        )


def _references(c: CheckContext) -> Iterator[Diagnostic]:
    for agent, spec in c.agents.items():
        for field in ("delegates_to", "handoffs"):
            value = spec.get(field)
            if value is not None and len(names(value)) != (len(value) if isinstance(value, list) else -1):
                c.graph_complete = False
            seen: set[str] = set()
            for index, target in names(value):
                path = ("agents", agent, field, index)
                if target == agent:
                    verb = "delegate to" if field == "delegates_to" else "hand off to"
                    yield c.error(path, f"agent '{agent}' cannot {verb} itself", "reference")
                elif target not in c.agents:
                    c.graph_complete = False
                    if is_agent_name(target):  # (else the schema reports the bad name)
                        yield c.error(path, _unknown_agent(c, path, target), "reference")
                elif target in seen:
                    yield c.warning(path, f"'{target}' is listed twice in {dotted(path[:-1])}", "reference")
                seen.add(target)
        for index, tool in names(spec.get("tools")):
            if tool in c.tools or not is_agent_name(tool):
                continue
            path = ("agents", agent, "tools", index)
            if tool in c.agents:
                detail = f"; '{tool}' is an agent: list it under delegates_to"
            elif not c.tools:
                detail = "; no tools are defined yet (add them under a top-level 'tools:' section)"
            else:
                detail = did_you_mean(tool, list(c.tools)) + f" (defined tools: {listing(list(c.tools))})"
            yield c.error(path, f"{dotted(path)}: tool '{tool}' is not defined{detail}", "reference")


def _unknown_agent(c: CheckContext, path: JsonPath, target: str) -> str:
    message = f"{dotted(path)}: agent '{target}' is not defined"
    if target in c.tools:
        return message + f"; '{target}' is a tool: list it under tools"
    hint = did_you_mean(target, list(c.agents))
    return message + f"{hint} (defined agents: {listing(list(c.agents))})"


def _edges(c: CheckContext, agent: str) -> list[tuple[int, str]]:
    return [(i, t) for i, t in names(c.agents[agent].get("delegates_to")) if t in c.agents and t != agent]


def _cycles(c: CheckContext) -> Iterator[Diagnostic]:
    """Each delegation cycle once, at the delegates_to entry that closes it (iterative DFS)."""
    state: dict[str, str] = {}  # "active" while on the DFS stack, "done" after
    reported: set[frozenset[str]] = set()
    for root in c.agents:
        if root in state:
            continue
        state[root] = "active"
        stack: list[tuple[str, Iterator[tuple[int, str]]]] = [(root, iter(_edges(c, root)))]
        while stack:
            agent, edges = stack[-1]
            step = next(edges, None)
            if step is None:
                stack.pop()
                state[agent] = "done"
                continue
            index, target = step
            if state.get(target) == "active":
                on_stack = [name for name, _ in stack]
                loop = on_stack[on_stack.index(target) :]
                if frozenset(loop) not in reported:
                    reported.add(frozenset(loop))
                    chain = " → ".join([*loop, target])
                    yield c.error(
                        ("agents", agent, "delegates_to", index),
                        f"delegation cycle: {chain}; delegation must form a tree "
                        "(use handoffs for agents that pass control back and forth)",
                        "cycle",
                    )
            elif target not in state:
                state[target] = "active"
                stack.append((target, iter(_edges(c, target))))


def _longest_chain(c: CheckContext, start: str) -> list[str]:
    """The longest delegation chain from ``start``; edges that close a cycle are ignored."""
    best: dict[str, list[str]] = {}
    on_stack = {start}
    stack: list[tuple[str, Iterator[tuple[int, str]]]] = [(start, iter(_edges(c, start)))]
    while stack:
        agent, edges = stack[-1]
        step = next(edges, None)
        if step is None:
            stack.pop()
            on_stack.discard(agent)
            tails = [best[t] for _, t in _edges(c, agent) if t in best and t not in on_stack]
            best[agent] = [agent, *max(tails, key=len, default=[])]
            continue
        target = step[1]
        if target not in best and target not in on_stack:
            on_stack.add(target)
            stack.append((target, iter(_edges(c, target))))
    return best[start]


def _depth(c: CheckContext) -> Iterator[Diagnostic]:
    limit = mapping(c.data.get("limits")).get("max_depth")
    supervisor = c.supervisor
    if not isinstance(limit, int) or isinstance(limit, bool) or supervisor not in c.agents:
        return
    chain = _longest_chain(c, supervisor)
    depth = len(chain) - 1
    if depth > limit:
        shown = chain if len(chain) <= 8 else [*chain[:4], "…", *chain[-3:]]
        yield c.error(
            ("limits", "max_depth"),
            f"the delegation chain {' → '.join(shown)} is {depth} levels deep, more than "
            f"limits.max_depth ({limit}); raise the limit or flatten the team",
            "depth",
        )


def _unused_agents(c: CheckContext) -> Iterator[Diagnostic]:
    supervisor = c.supervisor
    if supervisor not in c.agents or not c.graph_complete or "workflow" in c.data:
        return  # (a workflow's unused agents: checks.workflow)
    reachable = {supervisor}
    frontier = [supervisor]
    while frontier:
        spec = c.agents[frontier.pop()]
        for field in ("delegates_to", "handoffs"):
            for _, target in names(spec.get(field)):
                if target in c.agents and target not in reachable:
                    reachable.add(target)
                    frontier.append(target)
    for agent in c.agents:
        if agent not in reachable:
            yield c.warning(
                ("agents", agent),
                f"agent '{agent}' is never used: the supervisor '{supervisor}' cannot reach it "
                "through delegates_to or handoffs",
                "unused",
                key=True,
            )
