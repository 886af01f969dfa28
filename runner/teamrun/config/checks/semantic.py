"""Semantic checks: what a JSON Schema cannot say about a team file, all of them, in one order.

They run on the raw loaded data even when the schema found problems, so a user sees every mistake at once.
Each concern is one module whose checks are generators of located diagnostics over a
:class:`~teamrun.config.checks.context.CheckContext`; this module alone imports them all:

- ``references``: the supervisor, delegation/handoff/tool references, cycles, depth, unused agents (first: it
  tells the others whether the delegation graph is complete)
- ``agents``: inside each agent (templates, ``output_schema``, delegation section, message filter) and
  ``hooks`` (its hooks)
- ``fallbacks``: each model's fallback list (a model twice, an unknown provider, an empty list)
- ``budgets``: budgets and limits that cannot apply
- ``tools``: tool definitions (a ``cwd`` that exists) and the function names offered to each agent; ``mcp``:
  MCP servers
- ``acceptance``: ``accept:`` and ``max_attempts``
- ``workflow`` (and ``workflow_workspace``): a ``workflow:``
- ``workspace``: workspace entries; ``peers``: peers and boards
- ``remote``: remote (``a2a:``) agents
- ``memory``: long-term memory (who recalls, searches and saves; the embedding)
- ``imports``: ``--import-check``'s imports of user code (MCP servers, agent cards and fallbacks' key variables
  are checked by the CLI, above the config layer)
- ``templates``: templates and conditions (called by the checks above), then ``--var`` names
- ``sub_schemas``: the JSON Schemas inside a team file (called by the checks above)
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from teamrun.config.checks.acceptance import acceptance_checks
from teamrun.config.checks.agents import agent_checks
from teamrun.config.checks.budgets import budget_checks
from teamrun.config.checks.context import CheckContext
from teamrun.config.checks.fallbacks import fallback_checks
from teamrun.config.checks.imports import import_checks
from teamrun.config.checks.mcp import mcp_checks
from teamrun.config.checks.memory import memory_checks
from teamrun.config.checks.peers import peer_checks
from teamrun.config.checks.references import reference_checks
from teamrun.config.checks.remote import remote_checks
from teamrun.config.checks.templates import given_vars_checks
from teamrun.config.checks.tools import tool_checks
from teamrun.config.checks.workflow import workflow_checks
from teamrun.config.checks.workspace import workspace_checks
from teamrun.config.diagnostics import Diagnostic
from teamrun.config.yamlsrc import SourceMap

__all__ = ["check_semantics"]


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
    c = CheckContext(file, text, data, source_map)
    found = [
        *reference_checks(c),  # first: it tells whether the graph is complete
        *agent_checks(c),
        *fallback_checks(c),
        *budget_checks(c),
        *tool_checks(c),
        *mcp_checks(c),
        *acceptance_checks(c),
        *workflow_checks(c),
        *workspace_checks(c),
        *peer_checks(c),
        *remote_checks(c),
        *memory_checks(c),
    ]
    if import_check:
        found.extend(import_checks(c))
    found.extend(given_vars_checks(c, given_vars))  # after the templates: they fill vars_read
    return found
