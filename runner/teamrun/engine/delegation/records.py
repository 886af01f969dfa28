"""What a delegation is on its way through the delegator: ready, started, run, settled.

Plain records shared by the delegator (:mod:`teamrun.engine.delegation.delegator`),
the background tasks (:mod:`teamrun.engine.delegation.background`) and the agent
loop, so none of them imports another for its types.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from teamrun.engine.delegation.hooks import HookActions, HookContext
from teamrun.engine.delegation.tasks import TaskRecord
from teamrun.engine.delegation.tools import DelegationRequest
from teamrun.engine.result import AcceptanceRecord, DelegationResult
from teamrun.engine.runtime import AgentFrame
from teamrun.engine.signals import Signal
from teamrun.errors import RunError
from teamrun.llm.types import Usage

__all__ = ["DelegationSpan", "RunAgent", "Settled", "StartedWorker", "WorkerFailed", "WorkerOutcome", "WorkerRun"]


@dataclass(frozen=True)
class WorkerOutcome:
    """What running an agent produced (returned by the agent loop)."""

    text: str
    status: str  # "ok" | "budget_exhausted"
    usage: Usage
    cost: float
    messages: Sequence[dict[str, Any]]
    stopped_by: str | None = None
    finish_reason: str | None = None
    """Why the agent's last model call ended."""
    acceptance: AcceptanceRecord | None = None
    """How its answers fared against its ``accept:`` checks (``None``: it has none)."""
    usage_known: bool = True
    """False when the worker's tokens and cost are not known (a remote agent that reported none)."""


RunAgent = Callable[[AgentFrame, str], Awaitable[WorkerOutcome]]
"""Runs an agent frame on a task to its outcome (the agent loop's ``run_agent``, handoffs followed)."""


class WorkerFailed(RunError):
    """A worker with ``on_error: fail_run`` failed: the whole run fails."""


@dataclass(frozen=True)
class Settled:
    """One delegation's record, and the signal it raises for the delegating agent's turn."""

    result: DelegationResult
    signal: Signal | None = None


@dataclass(frozen=True)
class WorkerRun:
    """A delegation that passed its checks and hooks, ready to run once a slot is free."""

    worker: str
    task: str
    """What the worker is asked (an ``on_start`` hook may have rewritten it)."""
    prompt: str
    request: DelegationRequest
    actions: HookActions
    start: HookContext
    key: str
    """The worker invocation's stable name in the run (its frame's ``key``)."""
    record: TaskRecord | None = None
    """The tracked task this run is an attempt at."""


@dataclass
class DelegationSpan:
    """One open delegation span (``delegation_start`` … ``delegation_end``), and the record its end reports."""

    id: str
    worker: str
    task: str
    """What the worker is asked (the record's task)."""
    task_id: str | None = None
    """The tracked task the delegation is an attempt at."""
    result: DelegationResult | None = None
    """The delegation's record so far; ``None`` while its worker runs (a span left then ends ``cancelled`` or
    ``error``)."""


@dataclass(frozen=True)
class StartedWorker:
    """A worker being run: its frame (and ledger) and its delegation span."""

    run: WorkerRun
    frame: AgentFrame
    span: DelegationSpan
    timeout: float | None
    timeout_label: str = ""
    """The setting the timeout comes from (``agents.<worker>.budget.timeout_s``...)."""
