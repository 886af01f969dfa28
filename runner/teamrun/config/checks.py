"""Semantic checks: what a JSON Schema cannot say about a team file.

They run on the raw loaded data even when the schema found problems, so a
user sees every mistake at once; each check therefore reads the data
defensively (a value of the wrong type is simply skipped — the schema has
already reported it).

One module per concern, each check a generator of located diagnostics; this one
holds the file being checked (:class:`SemanticChecker`: its data, where each value
is, the state the checks share) and runs them all in one order:

- ``graph_checks``: the supervisor, delegation/handoff/tool references, cycles, depth, unused agents
- ``agent_checks``: inside each agent (templates, ``output_schema``, delegation section, message
  filter) and ``hook_checks`` (its hooks)
- ``budget_checks``: budgets and limits that cannot apply
- ``tool_checks``: tool definitions and the function names offered to each agent; ``mcp_checks``: MCP servers
- ``acceptance_checks``: ``accept:`` and ``max_attempts``
- ``workflow_checks``: a ``workflow:``
- ``remote_checks``: remote (``a2a:``) agents; with ``--import-check`` their cards are fetched
- ``import_checks``: ``--import-check``
- ``template_checks``: templates and conditions (called by the checks above), then ``--var`` names
- ``sub_schema_checks``: the JSON Schemas inside a team file (called by the checks above)
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from teamrun.config import templates
from teamrun.config.acceptance_checks import acceptance_checks
from teamrun.config.agent_checks import agent_checks
from teamrun.config.budget_checks import budget_checks
from teamrun.config.diagnostics import Diagnostic, JsonPath
from teamrun.config.graph_checks import graph_checks, is_agent_name
from teamrun.config.hook_checks import HOOK_ACTIONS, HOOK_POINTS, HOOK_TEMPLATES
from teamrun.config.import_checks import import_checks
from teamrun.config.mcp_checks import mcp_checks
from teamrun.config.peer_checks import peer_checks
from teamrun.config.raw import mapping as _mapping
from teamrun.config.remote_checks import remote_card_checks, remote_checks
from teamrun.config.template_checks import (
    HOOK_NAMES,
    INSTRUCTION_NAMES,
    PROMPT_NAMES,
    find,
    given_vars_checks,
    template,
    unknown_names,
)
from teamrun.config.tool_checks import team_as_read as _team_as_read  # noqa: F401  (read here by a test)
from teamrun.config.tool_checks import tool_checks
from teamrun.config.workflow_checks import workflow_checks
from teamrun.config.workspace_checks import workspace_checks
from teamrun.config.yamlsrc import SourceMap

__all__ = [
    "HOOK_ACTIONS",
    "HOOK_NAMES",
    "HOOK_POINTS",
    "HOOK_TEMPLATES",
    "INSTRUCTION_NAMES",
    "PROMPT_NAMES",
    "SemanticChecker",
    "check_semantics",
    "mcp_checks",
]


class SemanticChecker:
    """One team file under check: its data, where each value is, and what the checks share."""

    def __init__(self, file: str, text: str, data: Any, source_map: SourceMap) -> None:
        self.file = file
        self.lines = text.splitlines()
        self.data = _mapping(data)
        self.source_map = source_map
        self.agents = {k: _mapping(v) for k, v in _mapping(self.data.get("agents")).items()}
        self.tools = {k: _mapping(v) for k, v in _mapping(self.data.get("tools")).items()}
        supervisor = self.data.get("supervisor")
        self.supervisor = supervisor if isinstance(supervisor, str) else None
        """The supervisor's name when it is a string (the schema reports anything else)."""
        self.graph_complete = True
        """False once a delegates_to/handoffs entry is unusable: then reachability says nothing."""
        self.vars_read: set[str] = set()
        """The ``vars`` keys the templates read (filled by the template checks)."""

    def check(self, *, import_check: bool = False, given_vars: Iterable[str] = ()) -> list[Diagnostic]:
        """Every problem; ``given_vars``: the names of the run's ``--var`` values, checked against the file."""
        found = [
            *graph_checks(self),  # first: it tells whether the graph is complete
            *agent_checks(self),
            *budget_checks(self),
            *tool_checks(self),
            *mcp_checks(self),
            *acceptance_checks(self),
            *workflow_checks(self),
            *workspace_checks(self),
            *peer_checks(self),
            *remote_checks(self),
        ]
        if import_check:
            found.extend(import_checks(self))
            found.extend(remote_card_checks(self))
        found.extend(given_vars_checks(self, given_vars))  # after the templates: they fill vars_read
        return found

    # -- locating a diagnostic -------------------------------------------------------------

    def _error(self, path: JsonPath, message: str, rule: str, *, key: bool = False) -> Diagnostic:
        mark = self.source_map.key(path) if key else self.source_map.value(path)
        return Diagnostic(self.file, mark.line, mark.column, message, rule=rule)

    def _warning(self, path: JsonPath, message: str, rule: str, *, key: bool = False) -> Diagnostic:
        mark = self.source_map.key(path) if key else self.source_map.value(path)
        return Diagnostic(self.file, mark.line, mark.column, message, "warning", rule)

    # -- what workflow_checks reads through its checker ---------------------------------------

    _is_name = staticmethod(is_agent_name)

    def _template(self, path: JsonPath, source: Any, names: tuple[str, ...]) -> Iterator[Diagnostic]:
        return template(self, path, source, names)

    def _names(
        self, path: JsonPath, source: str, uses: list[templates.NameUse], names: tuple[str, ...], *, kind: str
    ) -> Iterator[Diagnostic]:
        return unknown_names(self, path, source, uses, names, kind=kind)

    def _find(self, path: JsonPath, source: str, template_line: int, pattern: str) -> tuple[int, int]:
        return find(self, path, source, template_line, pattern)


def check_semantics(
    file: str,
    text: str,
    data: Any,
    source_map: SourceMap,
    *,
    import_check: bool = False,
    given_vars: Iterable[str] = (),
) -> list[Diagnostic]:
    """Every semantic problem in one loaded team file (``given_vars``: the names of the run's ``--var``)."""
    return SemanticChecker(file, text, data, source_map).check(import_check=import_check, given_vars=given_vars)
