"""Budgets: what has been spent (counters) apart from what may be spent (limits).

Each agent invocation gets a :class:`BudgetLedger` whose parent is the
delegating agent's ledger, up to the run's root ledger. Spending is charged to
the ledger and every ancestor, so a child spends from its parent's budget.
The loop asks ``check_*`` at fixed points; a non-``None`` answer names the
limit that is reached (``"agents.researcher.budget.max_tool_calls (6)"``).
"""

from __future__ import annotations

from dataclasses import dataclass

from teamrun.config.models import Limits
from teamrun.llm.types import Usage


@dataclass
class Spend:
    """Counters. ``steps`` counts this agent's own model calls only."""

    steps: int = 0
    tool_calls: int = 0
    delegations: int = 0
    handoffs: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens


_SPEND = (
    ("max_total_tokens", "total_tokens"),
    ("max_input_tokens", "input_tokens"),
    ("max_output_tokens", "output_tokens"),
    ("max_cost_usd", "cost_usd"),
)
"""Token and cost limits: (limit, counter) pairs, children's spending included."""


class BudgetLedger:
    """Counters and limits for one agent invocation (or the whole run, at the root)."""

    def __init__(self, limits: Limits | None, *, label: str, parent: BudgetLedger | None = None,
                 max_steps: int | None = None, depth: int = 0) -> None:
        self.limits = limits or Limits()
        self.label = label
        """How the limits are named in messages: ``limits`` or ``agents.x.budget``."""
        self.parent = parent
        self.spend = Spend()
        self.max_steps = max_steps if max_steps is not None else self.limits.max_steps
        self.depth = depth
        """The delegation depth of the agent this ledger is for (the supervisor and the run: 0)."""

    def child(self, limits: Limits | None, *, label: str, depth: int, max_steps: int | None = None) -> BudgetLedger:
        return BudgetLedger(limits, label=label, parent=self, max_steps=max_steps, depth=depth)

    def _chain(self) -> list[BudgetLedger]:
        chain: list[BudgetLedger] = []
        node: BudgetLedger | None = self
        while node is not None:
            chain.append(node)
            node = node.parent
        return chain

    # -- charging ----------------------------------------------------------------------

    def charge_model(self, usage: Usage, cost_usd: float) -> None:
        self.spend.steps += 1
        for node in self._chain():
            node.spend.input_tokens += usage.input_tokens
            node.spend.output_tokens += usage.output_tokens
            node.spend.cost_usd += cost_usd

    def charge(self, counter: str, amount: int = 1) -> None:
        for node in self._chain():
            setattr(node.spend, counter, getattr(node.spend, counter) + amount)

    # -- checks at fixed points of the loop ------------------------------------------------

    def _spent(self) -> str | None:
        """The first token or cost limit already used up, anywhere up the chain."""
        for node in self._chain():
            for limit_name, counter in _SPEND:
                limit = getattr(node.limits, limit_name)
                if limit is not None and getattr(node.spend, counter) >= limit:
                    return f"{node.label}.{limit_name} ({limit})"
        return None

    def check_before_model_call(self) -> str | None:
        """Steps, tokens and cost: may this agent call its model again?"""
        if self.max_steps is not None and self.spend.steps >= self.max_steps:
            return f"{self.label}.max_steps ({self.max_steps})"
        return self._spent()

    def check_before_tool_call(self) -> str | None:
        return self._over("max_tool_calls", "tool_calls")

    def check_before_delegation(self) -> str | None:
        return self._over("max_delegations", "delegations")

    def check_depth(self, child_depth: int) -> str | None:
        """May an agent at ``child_depth`` be started? ``max_depth`` counts levels below its ledger's agent."""
        for node in self._chain():
            limit = node.limits.max_depth
            if limit is not None and child_depth - node.depth > limit:
                return f"{node.label}.max_depth ({limit})"
        return None

    def check_before_handoff(self) -> str | None:
        return self._over("max_handoffs", "handoffs")

    def _over(self, limit_name: str, counter: str) -> str | None:
        """Would one more of ``counter`` go past a limit anywhere up the chain?"""
        for node in self._chain():
            limit = getattr(node.limits, limit_name)
            if limit is not None and getattr(node.spend, counter) + 1 > limit:
                return f"{node.label}.{limit_name} ({limit})"
        return None


__all__ = ["BudgetLedger", "Spend"]
