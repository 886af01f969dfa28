"""An agent's tool table: every function its model is offered, by name, built once per invocation.

The table owns the naming rules (from :mod:`teamrun.config.tool_names`):
delegation tools (``ask_<worker>`` or one ``delegate_task``), handoff tools
(``transfer_to_<agent>``), the team's tools, the functions of tool sources
(MCP servers), which are only known once the source is started, and the
workspace tools its permissions give it (:mod:`teamrun.engine.workspace.tools`) and the memory tools the
team file gives it. It is built
asynchronously before the agent's first model call; two functions of one name
are a :class:`~teamrun.errors.UserError` naming both.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from teamrun.config.models import TeamConfig
from teamrun.config.tool_names import (
    OfferedName,
    clash_message,
    clashes,
    handoff_tool_name,
    offered_names,
)
from teamrun.engine.delegation.tools import background_tools, delegation_tools
from teamrun.engine.tool_sources import StartedSources
from teamrun.engine.workspace.board_calls import board_tools
from teamrun.engine.workspace.tools import workspace_tools
from teamrun.errors import TeamrunError, ToolError, UserError
from teamrun.llm.types import ToolSchema
from teamrun.tools.base import Tool, ToolSource

EntryKind = Literal["delegation", "handoff", "tool", "background", "workspace"]


@dataclass(frozen=True)
class TableEntry:
    """One function the model is offered, and what calling it means."""

    offered: OfferedName
    kind: EntryKind
    schema: ToolSchema
    tool: Tool | None = None
    """The tool to run (``kind == "tool"``)."""
    target: str | None = None
    """The agent that takes over (``kind == "handoff"``)."""

    @property
    def name(self) -> str:
        return self.offered.name


class ToolTable:
    """The functions one agent invocation is offered, by name. Clashing names are refused."""

    def __init__(self, agent: str, entries: Sequence[TableEntry], withheld: Sequence[str] = ()) -> None:
        found = clashes([e.offered for e in entries])
        if found:
            raise UserError("; ".join(clash_message(agent, first, later) for first, later in found))
        self.agent = agent
        self._entries = {e.name: e for e in entries}
        self.withheld = frozenset(withheld)
        """Declared tools this invocation's task left out (a call to one is refused, saying so)."""

    @property
    def schemas(self) -> list[ToolSchema]:
        return [e.schema for e in self._entries.values()]

    @property
    def names(self) -> list[str]:
        return list(self._entries)

    @property
    def entries(self) -> list[TableEntry]:
        """Every function, in offer order (delegation, handoff, then tools)."""
        return list(self._entries.values())

    def get(self, name: str) -> TableEntry | None:
        return self._entries.get(name)


async def build_tool_table(
    config: TeamConfig,
    tools: Mapping[str, Tool | ToolSource],
    sources: StartedSources,
    agent: str,
    *,
    allowed: frozenset[str] | None = None,
    memory: Sequence[Tool] = (),
) -> ToolTable:
    """``agent``'s table; tool sources it declares are started (once per ``sources``) for their functions.

    ``tools``: the team's tools by entry name; ``allowed``: the tool entries a narrowed task leaves it
    (delegation and handoff tools stay); ``memory``: the memory tools the run gives it
    (:mod:`teamrun.engine.memory.tools`), offered as plain tools.
    """
    delegation = {s["function"]["name"]: s for s in delegation_tools(config, agent)}
    background = {s["function"]["name"]: s for s in background_tools()}
    entries: list[TableEntry] = []
    withheld: list[str] = []
    for offered in offered_names(config.agents[agent]):
        if offered.origin == "tool" and allowed is not None and offered.source not in allowed:
            withheld.append(offered.name)
            continue
        if offered.origin == "delegation":
            entries.append(TableEntry(offered, "delegation", delegation[offered.name]))
        elif offered.origin == "background":
            entries.append(TableEntry(offered, "background", background[offered.name]))
        elif offered.origin == "handoff":
            entries.append(
                TableEntry(offered, "handoff", handoff_schema(config, offered.source), target=offered.source)
            )
        else:
            entries.extend(await _tool_entries(tools[offered.source], sources, offered))
    for schema in [*workspace_tools(config, agent), *board_tools(config, agent)]:  # from its workspace permissions
        name = schema["function"]["name"]
        entries.append(TableEntry(OfferedName(name, "workspace", name), "workspace", schema))
    for tool in memory:
        entries.append(TableEntry(OfferedName(tool.name, "memory", tool.name), "tool", tool.spec.as_openai(), tool))
    return ToolTable(agent, entries, withheld)


async def _tool_entries(declared: Tool | ToolSource, sources: StartedSources, offered: OfferedName) -> list[TableEntry]:
    if isinstance(declared, ToolSource):
        try:
            functions = await sources.tools(declared)
        except TeamrunError:
            raise
        except Exception as exc:  # a server that would not start: a run error, not a traceback
            raise ToolError(f"tool entry '{offered.source}' could not be started: {type(exc).__name__}: {exc}") from exc
        return [
            TableEntry(OfferedName(tool.name, "source", offered.source), "tool", tool.spec.as_openai(), tool)
            for tool in functions
        ]
    return [TableEntry(offered, "tool", declared.spec.as_openai(), declared)]


def handoff_schema(config: TeamConfig, target: str) -> ToolSchema:
    description = config.agents[target].description or ""
    return {
        "type": "function",
        "function": {
            "name": handoff_tool_name(target),
            "description": f"Hand the conversation to {target}, who then answers the user. {description}".strip(),
            "parameters": {
                "type": "object",
                "properties": {"reason": {"type": "string", "description": "Why this agent should take over."}},
                "additionalProperties": False,
            },
        },
    }


__all__ = ["TableEntry", "ToolTable", "build_tool_table", "handoff_schema"]
