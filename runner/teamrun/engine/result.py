"""What a run hands back: the answer, its status, and who spent what."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any, Literal

from teamrun.llm.types import Usage


def new_run_id() -> str:
    """A new run's id (12 hex digits): the one place run ids are made."""
    return uuid.uuid4().hex[:12]


RunStatus = Literal["done", "failed", "budget_exhausted", "cancelled", "waiting"]
DelegationStatus = Literal["ok", "error", "rejected", "budget_exhausted", "cancelled"]


@dataclass(frozen=True)
class AcceptanceRecord:
    """How one agent invocation's answers fared against its ``accept:`` checks (and the team's)."""

    agent: str
    agent_path: tuple[str, ...]
    attempts: int
    """Answers checked (the first included)."""
    max_attempts: int
    """Answers allowed (the smallest ``max_attempts`` of the checks that applied)."""
    passed: bool
    """The last answer checked passed every check."""
    failed_check: str | None = None
    """The check the last answer failed (``None`` when it passed)."""
    detail: str = ""
    """Why that check failed."""
    stopped_by: str | None = None
    """A limit that ended the attempts before they were used up."""
    history: tuple[tuple[dict[str, Any], ...], ...] = ()
    """Per attempt, every check's outcome (``{name, passed, detail, score?}``)."""

    @property
    def failure(self) -> str | None:
        """``check: detail`` of the last answer's failed check, for people and models."""
        if self.failed_check is None:
            return None
        return f"{self.failed_check}: {self.detail}" if self.detail else self.failed_check

    def as_dict(self) -> dict[str, Any]:
        return {
            "agent": self.agent,
            "agent_path": list(self.agent_path),
            "attempts": self.attempts,
            "max_attempts": self.max_attempts,
            "passed": self.passed,
            "failed_check": self.failed_check,
            "detail": self.detail,
            "stopped_by": self.stopped_by,
            "history": [list(outcomes) for outcomes in self.history],
        }


@dataclass(frozen=True)
class DelegationResult:
    """One worker's answer to one delegated task."""

    agent: str
    task: str
    status: DelegationStatus
    response: str
    usage: Usage = field(default_factory=Usage)
    cost: float = 0.0
    bailed: bool = False
    ref: str | None = None
    error: str | None = None
    parent: str = ""
    """The agent that delegated."""
    agent_path: tuple[str, ...] = ()
    task_id: str | None = None
    """The tracked task this delegation is an attempt at (see :mod:`teamrun.engine.delegation.tasks`)."""
    timed_out: bool = False
    """The worker's own ``budget.timeout_s`` stopped it (its status is then ``budget_exhausted``)."""
    acceptance: AcceptanceRecord | None = None
    """The worker's ``accept:`` checks: attempts, and the check its answer failed (``None``: it has none)."""
    usage_known: bool = True
    """False when the worker's tokens and cost are unknown (a remote ``a2a:`` agent that reported none):
    ``usage`` and ``cost`` are then zeros that mean "not reported", and :meth:`as_dict` says so."""

    def for_model(self) -> dict[str, Any]:
        """What the delegating model sees: the answer, not the bookkeeping."""
        shown: dict[str, Any] = {"agent": self.agent, "status": self.status, "response": self.response}
        if self.task_id:
            shown = {"task_id": self.task_id, **shown}
        if self.error:
            shown["error"] = self.error
        if self.acceptance is not None:
            shown["attempts"] = self.acceptance.attempts
            if not self.acceptance.passed and self.acceptance.failure:
                shown["accept_failed"] = self.acceptance.failure
        if self.ref:
            shown["ref"] = self.ref
        return shown

    def as_dict(self) -> dict[str, Any]:
        shown: dict[str, Any] = {
            "agent": self.agent,
            "parent": self.parent,
            "agent_path": list(self.agent_path),
            "task": self.task,
            "status": self.status,
            "response": self.response,
            "usage": self.usage.as_dict(),
            "cost": self.cost,
            "bailed": self.bailed,
            "ref": self.ref,
            "error": self.error,
            "task_id": self.task_id,
            "timed_out": self.timed_out,
            "acceptance": self.acceptance.as_dict() if self.acceptance is not None else None,
        }
        if not self.usage_known:  # a remote agent that reported none: unknown, not zero
            shown.update(usage=None, cost=None, usage_known=False)
        return shown


@dataclass
class AgentSpend:
    """Everything one agent (by name, over all its invocations) used."""

    usage: Usage = field(default_factory=Usage)
    cost: float = 0.0
    invocations: int = 0
    tool_calls: int = 0
    usage_known: bool = True
    """False when one of its invocations was a remote worker that reported no usage."""

    def as_dict(self) -> dict[str, Any]:
        shown: dict[str, Any] = {
            "usage": self.usage.as_dict(),
            "cost": self.cost,
            "invocations": self.invocations,
            "tool_calls": self.tool_calls,
        }
        if not self.usage_known:  # not known, never a pretended 0
            shown.update(usage=None, cost=None, usage_known=False)
        return shown


@dataclass
class ModelSpend:
    """What one model (the team file's model string) answered in a run, over every agent."""

    usage: Usage = field(default_factory=Usage)
    cost: float = 0.0
    calls: int = 0
    fallback_calls: int = 0
    """Calls it answered as a fallback, after a model before it in the list failed or was skipped."""
    usage_known: bool = True
    """False when one of its answers carried malformed usage figures."""

    def as_dict(self) -> dict[str, Any]:
        shown: dict[str, Any] = {"usage": self.usage.as_dict(), "cost": self.cost, "calls": self.calls}
        if self.fallback_calls:
            shown["fallback_calls"] = self.fallback_calls
        if not self.usage_known:  # not known, never a pretended 0
            shown.update(usage=None, cost=None, usage_known=False)
        return shown


@dataclass
class RunResult:
    """The outcome of ``team.run(...)``. Never lost: a failed or stopped run still has one."""

    run_id: str
    team: str
    status: RunStatus
    final_text: str
    agents: dict[str, AgentSpend] = field(default_factory=dict)
    delegations: list[DelegationResult] = field(default_factory=list)
    stopped_by: str | None = None
    """The limit that ended the run early (``limits.max_cost_usd``...), or why it failed."""
    error: str | None = None
    hook_errors: list[dict[str, str]] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    tasks: list[Any] = field(default_factory=list)
    """Tracked delegation tasks (:class:`~teamrun.engine.delegation.tasks.TaskRecord`), in the order issued."""
    duration_s: float = 0.0
    overshoot: dict[str, dict[str, float]] = field(default_factory=dict)
    """Token and cost limits the run went past (the last turn may), by limit: ``{limit, used, over}``."""
    limits_in_force: dict[str, Any] = field(default_factory=dict)
    """The limits that applied: the file's ``limits`` and budgets, and teamrun's defaults where it set none."""
    answered_by: str | None = None
    """The agent that gave the final answer: the supervisor, or the agent the conversation was handed to."""
    handoffs: list[dict[str, Any]] = field(default_factory=list)
    """Handoffs in the order they happened: ``{from, to, agent_path}``."""
    thread_id: str | None = None
    """The thread this run is a turn of (``run(..., thread=...)``, ``--thread``)."""
    acceptance: list[AcceptanceRecord] = field(default_factory=list)
    """Every agent invocation that had ``accept:`` checks (its own or the team's), in the order they ended."""
    models: dict[str, ModelSpend] = field(default_factory=dict)
    """Tokens, cost and calls by the model that answered them (a fallback's under its own name)."""
    workspace: dict[str, Any] | None = None
    """The shared workspace at the run's end (``{version, entries: {name: {version, value, written_by}}}``);
    ``None`` when the team file has no ``workspace:``."""

    @property
    def usage(self) -> Usage:
        total = Usage()
        for spend in self.agents.values():
            total = total + spend.usage
        return total

    @property
    def cost(self) -> float:
        return sum(spend.cost for spend in self.agents.values())

    @property
    def usage_known(self) -> bool:
        """False when an agent's tokens and cost are not known (a remote worker that reported none): :attr:`usage`
        and :attr:`cost` then count only what is known."""
        return all(spend.usage_known for spend in self.agents.values())

    @property
    def delegated_to(self) -> list[str]:
        return [d.agent for d in self.delegations]

    def as_dict(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "team": self.team,
            "status": self.status,
            "final_text": self.final_text,
            "stopped_by": self.stopped_by,
            "error": self.error,
            "usage": self.usage.as_dict(),
            "cost": self.cost,
            **({} if self.usage_known else {"usage_known": False}),
            "duration_s": round(self.duration_s, 3),
            "agents": {name: spend.as_dict() for name, spend in self.agents.items()},
            "models": {name: spend.as_dict() for name, spend in self.models.items()},
            "delegations": [d.as_dict() for d in self.delegations],
            "hook_errors": self.hook_errors,
            "warnings": self.warnings,
            "tasks": [t.as_dict() for t in self.tasks],
            "overshoot": self.overshoot,
            "limits_in_force": self.limits_in_force,
            "answered_by": self.answered_by,
            "handoffs": self.handoffs,
            "thread_id": self.thread_id,
            "acceptance": [a.as_dict() for a in self.acceptance],
            "workspace": self.workspace,
        }
