"""Semantic checks of budgets and limits that can never apply as written."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from teamrun.config.checks.raw import mapping, number
from teamrun.config.diagnostics import Diagnostic

if TYPE_CHECKING:
    from teamrun.config.checks.context import CheckContext

__all__ = ["RUN_WIDE", "budget_checks"]

RUN_WIDE = (
    "max_tool_calls",
    "max_delegations",
    "max_handoffs",
    "max_total_tokens",
    "max_input_tokens",
    "max_output_tokens",
    "max_cost_usd",
    "timeout_s",
)
"""Limits a worker spends from the run's ledger: an agent's budget above the run's never applies."""


def budget_checks(c: CheckContext) -> Iterator[Diagnostic]:
    """An agent's budget above the run's limit; a concurrency that cannot apply."""
    run = mapping(c.data.get("limits"))
    for agent, spec in c.agents.items():
        budget = mapping(spec.get("budget"))
        for key in RUN_WIDE:
            mine, theirs = number(budget.get(key)), number(run.get(key))
            if mine is not None and theirs is not None and mine > theirs:
                yield c.warning(
                    ("agents", agent, "budget", key),
                    f"agents.{agent}.budget.{key} ({budget[key]}) is above limits.{key} ({run[key]}); "
                    "the run's limit is reached first",
                    "budget",
                )
        delegation = mapping(spec.get("delegation"))
        concurrency = number(delegation.get("max_concurrency"))
        if delegation.get("parallel") is False and concurrency is not None and concurrency > 1:
            yield c.warning(
                ("agents", agent, "delegation", "max_concurrency"),
                "max_concurrency has no effect with parallel: false (delegations run one at a time)",
                "budget",
            )
