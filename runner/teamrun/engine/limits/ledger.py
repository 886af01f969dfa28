"""Budgets: the one record of what was spent, apart from what may be spent (limits).

Each agent invocation gets a :class:`BudgetLedger` whose parent is the
delegating agent's ledger, up to the run's root ledger. Spending is charged
once, here: to the invocation's own figures and to every ancestor's totals, so
a child spends from its parent's budget. Per-agent figures in the run result
(:meth:`BudgetLedger.per_agent`), delegation records and ``agent_end`` events
are read from it.

Where each limit is checked (the loop asks at fixed points; a
:class:`LimitReached` answer names the limit):

* before each model call — :meth:`~BudgetLedger.check_before_model_call`:
  a limit that already refused something, ``max_steps``, tokens, cost;
* before each tool call — ``max_tool_calls``; before each delegation —
  ``max_depth`` then ``max_delegations``; before each handoff — ``max_handoffs``.

A counted limit (tool calls, delegations, handoffs) that refuses something
stays reached: every agent under that ledger that would spend on it (see
:func:`counters_of`) stops at its next check, so a run-level limit ends the
whole run whichever agent hit it — a supervisor whose workers can no longer
call tools stops delegating — while a worker already running that never
delegates is not stopped by a used-up ``max_delegations``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from teamrun.config.models import Agent, Limits
from teamrun.defaults import DEFAULT_MAX_STEPS
from teamrun.engine.result import AgentSpend
from teamrun.llm.types import Usage


@dataclass(frozen=True)
class LimitReached:
    """A limit that stops or refuses something: ``agents.researcher.budget.max_tool_calls (6)``."""

    limit: str
    """The limit's place in the team file: ``limits.max_cost_usd``, ``agents.x.budget.max_steps``."""
    value: int | float
    default: bool = False
    """True when the value is teamrun's default, not set in the file."""

    def __str__(self) -> str:
        if self.default:
            return f"{self.limit} ({self.value}, teamrun's default; set it in the team file to allow more)"
        return f"{self.limit} ({self.value})"


@dataclass
class Spend:
    """Counters. ``steps`` counts this agent's own model calls only; the rest include descendants'."""

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


@dataclass
class OwnUse:
    """What one invocation itself used (its own model calls and tool calls, no descendants')."""

    usage: Usage = field(default_factory=Usage)
    cost: float = 0.0
    tool_calls: int = 0


def counters_of(agent: Agent) -> frozenset[str]:
    """The counted limits an agent's work spends on: tool calls (its own or its workers'),
    delegations, handoffs."""
    counters = set()
    if agent.tools or agent.delegates_to:
        counters.add("tool_calls")
    if agent.delegates_to:
        counters.add("delegations")
    if agent.handoffs:
        counters.add("handoffs")
    return frozenset(counters)


_SPEND = (
    ("max_total_tokens", "total_tokens"),
    ("max_input_tokens", "input_tokens"),
    ("max_output_tokens", "output_tokens"),
    ("max_cost_usd", "cost_usd"),
)
"""Token and cost limits: (limit, counter) pairs, children's spending included."""


@dataclass(frozen=True)
class RunCeiling:
    """Spending one run may not exceed on top of the team file's limits (a batch row's, an eval case's).

    Checked like every limit, before each model call; messages name it ``<label>.max_tokens (N)``.
    """

    max_tokens: int | None = None
    max_cost_usd: float | None = None
    label: str = "ceiling"

    def ledger(self) -> BudgetLedger:
        """The ledger above the run's root that holds these limits."""
        return BudgetLedger(
            Limits(max_total_tokens=self.max_tokens, max_cost_usd=self.max_cost_usd),
            label=self.label,
            names={"max_total_tokens": "max_tokens"},
        )


class BudgetLedger:
    """Counters and limits for one agent invocation (or the whole run, at the root)."""

    def __init__(
        self,
        limits: Limits | None,
        *,
        label: str,
        parent: BudgetLedger | None = None,
        max_steps: int | None = None,
        depth: int = 0,
        agent: str | None = None,
        names: dict[str, str] | None = None,
    ) -> None:
        self.limits = limits or Limits()
        self.label = label
        self.names = names or {}
        """How this ledger's limits are called in messages when not by their field name."""
        """How the limits are named in messages: ``limits`` or ``agents.x.budget``."""
        self.parent = parent
        self.agent = agent
        """The agent this invocation runs (``None`` for the run's root ledger)."""
        self.spend = Spend()
        self.own = OwnUse()
        self.usage_known = True
        """False for a remote (``a2a:``) worker that reported no (usable) usage: its zeros are not known."""
        explicit = max_steps if max_steps is not None else self.limits.max_steps
        self.steps_default = explicit is None
        self.max_steps: int = DEFAULT_MAX_STEPS if explicit is None else explicit
        self.depth = depth
        """The delegation depth of the agent this ledger is for (the supervisor and the run: 0)."""
        self.refused: dict[str, LimitReached] = {}
        """This ledger's counted limits that refused something (they stay reached), by counter."""
        self.root: BudgetLedger = parent.root if parent is not None else self
        self.nodes: list[BudgetLedger] = []
        """At the root: every invocation's ledger, in the order they were made."""
        self.root.nodes.append(self)

    def child(
        self, limits: Limits | None, *, label: str, depth: int, max_steps: int | None = None, agent: str | None = None
    ) -> BudgetLedger:
        return BudgetLedger(limits, label=label, parent=self, max_steps=max_steps, depth=depth, agent=agent)

    def _chain(self) -> list[BudgetLedger]:
        chain: list[BudgetLedger] = []
        node: BudgetLedger | None = self
        while node is not None:
            chain.append(node)
            node = node.parent
        return chain

    # -- charging (the only place spending is counted) ---------------------------------

    def charge_model(self, usage: Usage, cost_usd: float, *, step: bool = True) -> None:
        """Count a model call's tokens and cost; ``step=False`` for a call that is not the agent's own
        turn (an ``accept:`` judge), which spends tokens and cost but no step."""
        if step:
            self.spend.steps += 1
        self.own.usage = self.own.usage + usage
        self.own.cost += cost_usd
        for node in self._chain():
            node.spend.input_tokens += usage.input_tokens
            node.spend.output_tokens += usage.output_tokens
            node.spend.cost_usd += cost_usd

    def charge(self, counter: str, amount: int = 1) -> None:
        if counter == "tool_calls":
            self.own.tool_calls += amount
        for node in self._chain():
            setattr(node.spend, counter, getattr(node.spend, counter) + amount)

    # -- checks at fixed points of the loop ------------------------------------------------

    def check_before_model_call(self, counters: frozenset[str] = frozenset()) -> LimitReached | None:
        """May this agent call its model again? Refused limits it spends on (``counters``), steps,
        tokens and cost."""
        for node in self._chain():
            for counter, reached in node.refused.items():
                if counter in counters:
                    return reached
        if self.spend.steps >= self.max_steps:
            return LimitReached(f"{self.label}.max_steps", self.max_steps, default=self.steps_default)
        return self._spent()

    def check_spent(self) -> LimitReached | None:
        """Is a token or cost limit up the chain used up? (Checked before every model call, a judge's too.)"""
        return self._spent()

    def check_before_tool_call(self) -> LimitReached | None:
        return self._over("max_tool_calls", "tool_calls")

    def check_before_delegation(self) -> LimitReached | None:
        return self._over("max_delegations", "delegations")

    def check_before_handoff(self) -> LimitReached | None:
        return self._over("max_handoffs", "handoffs")

    def check_depth(self, child_depth: int) -> LimitReached | None:
        """May an agent at ``child_depth`` be started? ``max_depth`` counts levels below its ledger's agent.

        A depth refusal is not spending: it stops only the agent that asked, not the ledger's others.
        """
        for node in self._chain():
            limit = node.limits.max_depth
            if limit is not None and child_depth - node.depth > limit:
                return LimitReached(f"{node.label}.max_depth", limit)
        return None

    def spend_limits(self) -> list[str]:
        """The token and cost limits up the chain, as the team file names them (``limits.max_total_tokens``):
        what a call whose usage is unknown cannot be held to."""
        return [
            f"{node.label}.{node.names.get(limit_name, limit_name)}"
            for node in self._chain()
            for limit_name, _ in _SPEND
            if getattr(node.limits, limit_name) is not None
        ]

    def _spent(self) -> LimitReached | None:
        """The first token or cost limit already used up, anywhere up the chain."""
        for node in self._chain():
            for limit_name, counter in _SPEND:
                limit = getattr(node.limits, limit_name)
                if limit is not None and getattr(node.spend, counter) >= limit:
                    return LimitReached(f"{node.label}.{node.names.get(limit_name, limit_name)}", limit)
        return None

    def _over(self, limit_name: str, counter: str) -> LimitReached | None:
        """Would one more of ``counter`` go past a limit anywhere up the chain? That limit stays reached."""
        for node in self._chain():
            limit = getattr(node.limits, limit_name)
            if limit is not None and getattr(node.spend, counter) + 1 > limit:
                reached = LimitReached(f"{node.label}.{limit_name}", limit)
                node.refused.setdefault(counter, reached)
                return reached
        return None

    # -- what is left, and what went past ---------------------------------------------------

    def tokens_left(self, input_tokens: int) -> int | None:
        """Output tokens a call sending ``input_tokens`` may produce within the token and cost limits
        up the chain (``None``: no such limit). Cost is turned into tokens at the average price so far."""
        left: int | None = None
        for node in self._chain():
            limits, spend = node.limits, node.spend
            rooms: list[int] = []
            if limits.max_total_tokens is not None:
                rooms.append(limits.max_total_tokens - spend.total_tokens - input_tokens)
            if limits.max_output_tokens is not None:
                rooms.append(limits.max_output_tokens - spend.output_tokens)
            if limits.max_cost_usd is not None and spend.cost_usd > 0 and spend.total_tokens > 0:
                per_token = spend.cost_usd / spend.total_tokens
                rooms.append(int((limits.max_cost_usd - spend.cost_usd) / per_token) - input_tokens)
            for room in rooms:
                left = room if left is None else min(left, room)
        return left

    def overshoot(self) -> dict[str, dict[str, float]]:
        """Token and cost limits anywhere in the run that ended above their value, by limit."""
        found: dict[str, dict[str, float]] = {}
        for node in self.root.nodes:
            for limit_name, counter in _SPEND:
                limit = getattr(node.limits, limit_name)
                used = getattr(node.spend, counter)
                key = f"{node.label}.{node.names.get(limit_name, limit_name)}"
                if limit is not None and used > limit and used - limit > found.get(key, {}).get("over", 0):
                    found[key] = {"limit": limit, "used": _rounded(used), "over": _rounded(used - limit)}
        return found

    def per_agent(self) -> dict[str, AgentSpend]:
        """What each agent used over all its invocations, read from the run's ledgers."""
        spends: dict[str, AgentSpend] = {}
        for node in self.root.nodes:
            if node.agent is None:
                continue
            spend = spends.setdefault(node.agent, AgentSpend())
            spend.usage = spend.usage + node.own.usage
            spend.cost += node.own.cost
            spend.tool_calls += node.own.tool_calls
            spend.invocations += 1
            spend.usage_known = spend.usage_known and node.usage_known
        return spends


def _rounded(value: float) -> float:
    return value if isinstance(value, int) else round(value, 6)


__all__ = ["BudgetLedger", "LimitReached", "OwnUse", "RunCeiling", "Spend", "counters_of"]
