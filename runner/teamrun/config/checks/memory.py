"""Semantic checks of a team file's ``memory:`` (long-term memory), each located at ``file:line:col``. What the schema
cannot say: agents named in ``recall``, ``search`` or ``save`` that are not defined (or are remote ``a2a:`` agents,
whose loop runs elsewhere), a memory tool whose name an agent's own tool already has, an embedding ``api_base`` that
is no endpoint (the agents' check: an http(s) URL with a host and no user info), an ``api_key_env`` given for the
``offline`` embedding (it calls nothing), and a ``memory:`` nobody uses (no agent recalls, searches or saves: a
warning). Like the other checks they read the raw data defensively.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from teamrun.config.checks.raw import mapping, names
from teamrun.config.diagnostics import Diagnostic, did_you_mean, listing
from teamrun.conventions import MEMORY_SAVE, MEMORY_SEARCH

if TYPE_CHECKING:
    from teamrun.config.checks.context import CheckContext

__all__ = ["memory_checks"]

_TOOL_OF = {"search": MEMORY_SEARCH, "save": MEMORY_SAVE}


def memory_checks(c: CheckContext) -> Iterator[Diagnostic]:
    """Every problem of ``memory:`` (none when the file has none)."""
    memory = c.data.get("memory")
    if not isinstance(memory, dict):
        return
    yield from _recallers(c, mapping(memory.get("recall")))
    for field in ("search", "save"):
        for index, agent in names(memory.get(field)):
            yield from _agent(c, ("memory", field, index), agent, f"memory.{field}")
            yield from _clash(c, agent, _TOOL_OF[field])
    yield from _embedding(c, mapping(memory.get("embedding")))
    if not memory.get("recall") and not memory.get("search") and not memory.get("save"):
        yield c.warning(
            ("memory",),
            "memory: no agent recalls, searches or saves, so the team never uses it; name agents under "
            "`recall`, `search` or `save`",
            "memory",
            key=True,
        )


def _recallers(c: CheckContext, recall: dict[str, object]) -> Iterator[Diagnostic]:
    for agent in recall:
        yield from _agent(c, ("memory", "recall", agent), str(agent), "memory.recall", key=True)


def _agent(
    c: CheckContext, path: tuple[str | int, ...], agent: str, where: str, *, key: bool = False
) -> Iterator[Diagnostic]:
    if not c.agents:
        return
    if agent not in c.agents:
        yield c.error(
            path,
            f"agent '{agent}' in {where} is not defined{did_you_mean(agent, list(c.agents))} "
            f"(defined agents: {listing(list(c.agents))})",
            "reference",
            key=key,
        )
    elif c.agents[agent].get("a2a") is not None:
        yield c.error(
            path,
            f"agent '{agent}' in {where} is a remote (a2a:) agent: its loop runs elsewhere, so it cannot recall "
            "or use memory tools here; name a local agent",
            "memory",
            key=key,
        )


def _clash(c: CheckContext, agent: str, tool: str) -> Iterator[Diagnostic]:
    declared = c.agents.get(agent, {}).get("tools")
    for index, name in names(declared):
        if name == tool:
            yield c.error(
                ("agents", agent, "tools", index),
                f"agents.{agent}: the tool '{tool}' and the memory tool '{tool}' would both be offered to the "
                "model; rename the tool (a model cannot tell two functions of one name apart)",
                "tool_name",
            )


def _embedding(c: CheckContext, embedding: dict[str, object]) -> Iterator[Diagnostic]:
    from teamrun.defaults import api_base_problem

    model = embedding.get("model", "offline")
    url = embedding.get("api_base")  # the agents' one check (an empty one, from ``${VAR:-}``, means unset)
    if isinstance(url, str) and url.strip() and "${" not in url and (problem := api_base_problem(url)) is not None:
        yield c.error(("memory", "embedding", "api_base"), f"memory.embedding.api_base: {problem}", "api_base")
    if model == "offline" and embedding.get("api_key_env") is not None:
        yield c.warning(
            ("memory", "embedding", "api_key_env"),
            "memory.embedding: the offline embedding calls no endpoint, so api_key_env is not used; "
            "remove it or name a LiteLLM embedding model",
            "memory",
        )
