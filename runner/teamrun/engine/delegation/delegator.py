"""Running delegations: each worker in its own context, concurrently, nothing lost.

Several targets, and several delegation calls in one model turn, run
concurrently under the delegating agent's ``max_concurrency`` (one at a time
with ``parallel: false``); one failing never loses the others' results.
Around each worker run (which the agent loop does): refusal checks,
``on_start`` hooks, the prompt, ``on_complete`` hooks and a result reference.
Each delegation is settled into a :class:`Settled`: its record, and the signal
it raises for the delegating agent's turn (a limit reached, a depth refusal,
a bail).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from teamrun.config.models import Limits
from teamrun.config.tool_names import background_workers
from teamrun.engine.delegation.background import BackgroundTasks
from teamrun.engine.delegation.tools import DelegationRequest, delegation_settings
from teamrun.engine.delegation.filters import FilterFailed, as_context_block, filter_messages
from teamrun.engine.delegation.hooks import (
    HookActions,
    HookContext,
    HookFailed,
    HookRunner,
    complete_context,
    start_context,
)
from teamrun.engine.delegation.references import RefRequest, render_blocks
from teamrun.engine.result import AcceptanceRecord, DelegationResult, DelegationStatus
from teamrun.engine.runtime import AgentFrame, RunContext, max_steps_for
from teamrun.engine.delegation.tasks import TaskLedger, TaskRecord, TaskRefused
from teamrun.engine.turn.turn_plan import Bail, Refused, Signal
from teamrun.errors import RunError
from teamrun.llm.types import Message, Usage
from teamrun.logs import get_logger

_log = get_logger(__name__)


@dataclass(frozen=True)
class WorkerOutcome:
    """What running a worker produced (returned by the agent loop)."""

    text: str
    status: str  # "ok" | "budget_exhausted"
    usage: Usage
    cost: float
    messages: Sequence[dict[str, Any]]
    stopped_by: str | None = None
    finish_reason: str | None = None
    """Why the worker's last model call ended."""
    acceptance: AcceptanceRecord | None = None
    """How its answers fared against its ``accept:`` checks (``None``: it has none)."""


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
    record: TaskRecord | None = None
    """The tracked task this run is an attempt at."""


@dataclass(frozen=True)
class StartedWorker:
    """A worker being run: its frame (and ledger) and its delegation span."""

    run: WorkerRun
    frame: AgentFrame
    span: str
    timeout: float | None
    timeout_label: str = ""
    """The setting the timeout comes from (``agents.<worker>.budget.timeout_s``...)."""


class Delegator:
    """The delegations of one agent frame, bounded by its ``max_concurrency``.

    Around each worker run (which the agent loop does, between :meth:`begin` and
    :meth:`settle`): refusal checks (depth, delegation budget), ``on_start`` hooks,
    the prompt (task, context, filtered parent conversation, referenced results),
    ``on_complete`` hooks, and a result reference.
    """

    def __init__(self, ctx: RunContext, frame: AgentFrame) -> None:
        self.ctx = ctx
        self.frame = frame
        self.settings = delegation_settings(ctx, frame.name)
        limit = self.settings.max_concurrency if self.settings.parallel else 1
        self.slots = asyncio.Semaphore(limit)
        self.hooks = HookRunner(ctx, frame)
        self.tasks = TaskLedger(frame.name, self.settings.max_follow_ups)
        self.background_workers = frozenset(background_workers(ctx.agent(frame.name)))
        self.background = BackgroundTasks()

    def _result(self, worker: str, task: str, status: DelegationStatus, response: str = "",
                **extra: Any) -> DelegationResult:
        return DelegationResult(worker, task, status, response, parent=self.frame.name,
                                agent_path=(*self.frame.path, worker), **extra)

    def _open_task(self, worker: str, request: DelegationRequest) -> tuple[TaskRecord | None, str | None]:
        """The tracked task of a request (``None`` for a plain delegation), or why it is refused."""
        if not request.tracked:
            return None, None
        try:
            record, follow_up = self.tasks.open(worker, request.task, task_id=request.task_id,
                                                expected_output=request.expected_output,
                                                follow_up_of=request.follow_up_of)
        except TaskRefused as exc:
            return None, str(exc)
        if not follow_up:
            self.ctx.result.tasks.append(record)
        return record, None

    async def prepare(self, worker: str, request: DelegationRequest,
                      parent_messages: Sequence[Message]) -> WorkerRun | Settled:
        """Checks, ``on_start`` hooks and the prompt; a delegation refused here is settled already."""
        record, refused = self._open_task(worker, request)
        if refused is not None:
            return self._not_run(self._result(worker, request.task, "rejected", error=refused,
                                              task_id=request.follow_up_of or request.task_id))
        settled = await self._checked(worker, request, parent_messages, record)
        if record is not None:
            if isinstance(settled, Settled):
                self.tasks.settle(record, settled.result.status, settled.result.response)
            else:
                self.tasks.attempt(record)
        return settled

    async def _checked(self, worker: str, request: DelegationRequest, parent_messages: Sequence[Message],
                       record: TaskRecord | None) -> WorkerRun | Settled:
        parent = self.frame
        task_id = record.task_id if record is not None else None
        too_deep = parent.ledger.check_depth(parent.depth + 1)
        if too_deep is not None:
            error = f"{too_deep} reached: {worker} cannot be delegated to from here"
            return self._not_run(self._result(worker, request.task, "rejected", error=error, task_id=task_id),
                                 Refused(too_deep))
        reached = parent.ledger.check_before_delegation()
        if reached is not None:
            error = f"{reached} reached; no more delegations. Answer with what you have."
            return self._not_run(self._result(worker, request.task, "rejected", error=error, task_id=task_id),
                                 reached)
        start = replace(start_context(self.ctx, parent, worker, request.task), task_id=task_id)
        try:
            actions = await self.hooks.run("on_start", start)
        except HookFailed as exc:
            return self._not_run(self._result(worker, request.task, "error", error=str(exc), task_id=task_id))
        task = actions.prompt if actions.prompt is not None else request.task
        if actions.reject is not None:
            return self._not_run(self._result(worker, task, "rejected", actions.reject,
                                              error="rejected by an on_start hook", task_id=task_id))
        parent.ledger.charge("delegations")
        try:
            prompt = await self._prompt(worker, request, actions, parent_messages, record)
        except FilterFailed as exc:
            return self._not_run(self._result(worker, task, "error", error=str(exc), task_id=task_id))
        return WorkerRun(worker, task, prompt, request, actions, start, record)

    def begin(self, run: WorkerRun, *, background: bool = False) -> StartedWorker:
        """The worker's frame, under this agent's ledger; its delegation span starts.

        ``background``: the delegating agent's ``background_timeout_s`` applies too (the shorter wins).
        """
        ctx, parent, worker = self.ctx, self.frame, run.worker
        span = ctx.bus.new_span_id()
        budget = ctx.agent(worker).budget
        if run.request.max_tool_calls is not None:
            current = budget.max_tool_calls if budget else None
            cap = run.request.max_tool_calls if current is None else min(current, run.request.max_tool_calls)
            budget = (budget or Limits()).model_copy(update={"max_tool_calls": cap})
        steps = max_steps_for(ctx.config, budget)
        if run.actions.max_steps is not None:
            steps = run.actions.max_steps if steps is None else min(steps, run.actions.max_steps)
        child = AgentFrame(
            name=worker, path=(*parent.path, worker), span_id=ctx.bus.new_span_id(), parent_span_id=span,
            ledger=parent.ledger.child(budget, label=f"agents.{worker}.budget", max_steps=steps,
                                       depth=parent.depth + 1, agent=worker),
            context=dict(run.actions.context),
            allowed_tools=frozenset(run.request.tools) if run.request.tools is not None else None,
        )
        parent.emit(ctx, "delegation_start", span_id=span, worker=worker, task=run.request.task)
        timeout = budget.timeout_s if budget is not None else None
        label = f"agents.{worker}.budget.timeout_s"
        if background and (timeout is None or self.settings.background_timeout_s < timeout):
            timeout, label = self.settings.background_timeout_s, f"agents.{parent.name}.delegation.background_timeout_s"
        return StartedWorker(run, child, span, timeout, label)

    def _task_id(self, started: StartedWorker) -> str | None:
        return started.run.record.task_id if started.run.record is not None else None

    def cancelled(self, started: StartedWorker) -> None:
        if started.run.record is not None:
            self.tasks.settle(started.run.record, "cancelled", "")
            started.run.record.review = "abandoned"
        self._finish(self._result(started.run.worker, started.run.task, "cancelled", error="cancelled",
                                  task_id=self._task_id(started)), started.span)

    def never_started(self, run: WorkerRun) -> None:
        """A background delegation cancelled before its worker started."""
        if run.record is not None:
            self.tasks.settle(run.record, "cancelled", "")
            run.record.review = "abandoned"
        self._not_run(self._result(run.worker, run.task, "cancelled", error="cancelled",
                                   task_id=run.record.task_id if run.record is not None else None))

    def timed_out(self, started: StartedWorker) -> DelegationResult:
        worker = started.run.worker
        error = f"{started.timeout_label} ({started.timeout}) reached"
        return self._result(worker, started.run.task, "budget_exhausted", error=error, timed_out=True,
                            task_id=self._task_id(started))

    def failed(self, started: StartedWorker, exc: Exception) -> DelegationResult:
        """A worker that raised: a run error is its result; a bug is logged and reported, siblings go on.

        A worker declared ``on_error: fail_run`` fails the run instead (:class:`WorkerFailed`).
        """
        worker = started.run.worker
        if isinstance(exc, WorkerFailed):
            raise exc  # a fatal failure further down the tree: the run fails, whoever's worker it was
        if not isinstance(exc, RunError):
            _log.exception("worker_crashed", worker=worker)
        error = str(exc) if isinstance(exc, RunError) else f"{type(exc).__name__}: {exc}"
        if self.ctx.agent(worker).on_error == "fail_run":
            self._finish(self._result(worker, started.run.task, "error", error=error,
                                      task_id=self._task_id(started)), started.span)
            raise WorkerFailed(f"worker {worker} failed and has on_error: fail_run: {error}") from exc
        return self._result(worker, started.run.task, "error", error=error, task_id=self._task_id(started))

    async def settle(self, started: StartedWorker, outcome: WorkerOutcome | DelegationResult) -> Settled:
        """The worker's record (what the delegating agent is given), after ``on_complete`` hooks."""
        messages: Sequence[Message] = ()
        finish_reason: str | None = None
        if isinstance(outcome, DelegationResult):
            done = outcome
        else:
            run = started.run
            response = outcome.text if self.settings.output_mode == "last_message" else transcript(outcome.messages)
            status: DelegationStatus = "ok" if outcome.status == "ok" else "budget_exhausted"
            done = self._result(run.worker, run.task, status, response, usage=outcome.usage, cost=outcome.cost,
                                error=outcome.stopped_by, task_id=self._task_id(started),
                                acceptance=outcome.acceptance)
            messages, finish_reason = outcome.messages, outcome.finish_reason
        settled = await self._complete(done, started.run.start, messages, started.span, finish_reason)
        if started.run.record is not None:
            self.tasks.settle(started.run.record, settled.result.status, settled.result.response)
        return settled

    async def _prompt(self, worker: str, request: DelegationRequest, actions: HookActions,
                      parent_messages: Sequence[Message], record: TaskRecord | None = None) -> str:
        parts = [actions.prompt if actions.prompt is not None else request.task, *actions.append_prompt]
        if record is not None and request.follow_up_of is not None:
            parts.append(f"## This follows up task {record.task_id}\nThe task was: {record.task}\n"
                         f"Your previous answer:\n{record.last_response}")
        if record is not None and record.expected_output:
            parts.append(f"## Expected output\n{record.expected_output}")
        if request.context:
            parts.append(f"## Context from {self.frame.name}\n{request.context}")
        if self.settings.message_filter is not None:
            kept = await filter_messages(self.ctx, self.frame, self.settings.message_filter, parent_messages)
            if kept:
                parts.append(as_context_block(self.frame.name, kept))
        found: list[tuple[RefRequest, str]] = []
        for ref in request.refs:
            text = self.ctx.refs.get(ref.ref)
            if text is None:
                self.ctx.warn(self.frame, f"{self.frame.name} referenced unknown result '{ref.ref}'; skipped "
                                          f"(known: {', '.join(self.ctx.refs.known()) or 'none'})")
            else:
                found.append((ref, text))
        blocks = render_blocks(found)
        if blocks:
            parts.append(blocks)
        return "\n\n".join(parts)

    async def _complete(self, done: DelegationResult, start: HookContext,
                        messages: Sequence[Message], span: str, finish_reason: str | None = None) -> Settled:
        """``on_complete`` hooks and the result reference; then the record is kept and the span ends
        (so the ``delegation_end`` event carries what the delegating agent was actually given)."""
        if self.hooks.has("on_complete"):
            context = complete_context(start, status="timeout" if done.timed_out else done.status,
                                       error=done.error, result=done.response, messages=messages,
                                       usage=done.usage.as_dict(), finish_reason=finish_reason)
            try:
                actions = await self.hooks.run("on_complete", context)
            except HookFailed as exc:
                return Settled(self._finish(replace(done, status="error", error=str(exc)), span))
            self.frame.feedback.extend(actions.feedback)
            if actions.result_text is not None:
                done = replace(done, response=actions.result_text)
            if actions.bail:
                done = replace(done, bailed=True)
        if self.settings.result_references and done.status == "ok" and done.response.strip():
            done = replace(done, ref=self.ctx.refs.add(done.agent, done.response))
        return Settled(self._finish(done, span), Bail(done) if done.bailed else None)

    def _not_run(self, result: DelegationResult, signal: Signal | None = None) -> Settled:
        """A delegation refused before its worker started: still one start/end pair of events."""
        span = self.ctx.bus.new_span_id()
        self.frame.emit(self.ctx, "delegation_start", span_id=span, worker=result.agent, task=result.task)
        return Settled(self._finish(result, span), signal)

    def _finish(self, result: DelegationResult, span: str | None = None) -> DelegationResult:
        """Keep the record (once per delegation) and hand it back."""
        self.ctx.record_delegation(result)
        if span is not None:
            self._span_end(result, span)
        return result

    def _span_end(self, result: DelegationResult, span: str) -> None:
        self.frame.emit(self.ctx, "delegation_end", span_id=span, worker=result.agent, status=result.status,
                        usage=result.usage.as_dict(), cost=result.cost, error=result.error)


def transcript(messages: Sequence[dict[str, Any]]) -> str:
    """A worker's conversation as text, for ``output_mode: full_history``."""
    lines: list[str] = []
    for message in messages:
        role = message.get("role")
        if role == "system":
            continue
        content = message.get("content") or ""
        if message.get("tool_calls"):
            calls = ", ".join(f"{c['function']['name']}({c['function']['arguments']})" for c in message["tool_calls"])
            content = f"{content}\n[calls: {calls}]".strip()
        lines.append(f"[{role}] {content}")
    return "\n".join(lines)
