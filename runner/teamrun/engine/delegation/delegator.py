"""One owner for a worker's life: prepare → slot → begin → run → settle, in the foreground or background.

Several targets, and several delegation calls in one model turn, run
concurrently under the delegating agent's ``max_concurrency`` (one at a time
with ``parallel: false``); one failing never loses the others' results.
For each worker the delegator does the refusal checks and ``on_start`` hooks
and writes the prompt (:meth:`Delegator.prepare`), waits for a slot, makes the
worker's frame under its ledger (:meth:`Delegator.begin`), runs it with the
``run_agent`` callable it was given (the agent loop), and settles it: the
``on_complete`` hooks and a result reference (:meth:`Delegator.settle`). Every
way a delegation ends reaches the ``on_complete`` hooks — a refusal
(``rejected``, or ``error`` for a failed ``on_start`` hook or filter), a
worker's answer, error or time-out, and a ``cancel_task`` (``cancelled``) —
except a cancellation of the whole run (Ctrl-C, the run's time-out), which
records the delegation and runs no more user code.

Each delegation is settled into a :class:`Settled`: its record, and the signal
it raises for the delegating agent's turn (a limit reached, a depth refusal,
a bail). Each runs in one delegation span (:meth:`Delegator.begin`, or
:meth:`Delegator._span` for one that never ran), a context manager that keeps
the record and emits ``delegation_end`` exactly once, however the block ends.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import replace
from typing import Any

from teamrun.config.models import Delegation, Hooks, Limits
from teamrun.config.tool_names import CANCEL_TASK, background_workers
from teamrun.engine.delegation.background import BackgroundTask, BackgroundTasks
from teamrun.engine.delegation.filters import FilterFailed, as_context_block, filter_messages
from teamrun.engine.delegation.hooks import (
    HookActions,
    HookContext,
    HookFailed,
    HookRunner,
    complete_context,
    start_context,
)
from teamrun.engine.delegation.records import (
    DelegationSpan,
    RunAgent,
    Settled,
    StartedWorker,
    WorkerFailed,
    WorkerOutcome,
    WorkerRun,
)
from teamrun.engine.delegation.tasks import TaskLedger, TaskRecord, TaskRefused
from teamrun.engine.delegation.tools import DelegationRequest, delegation_settings, results_for_model
from teamrun.engine.references import RefRequest, render_blocks
from teamrun.engine.result import DelegationResult, DelegationStatus
from teamrun.engine.runtime import WAITING_FOR_A_PERSON, AgentFrame, RunContext, max_steps_for, run_all
from teamrun.engine.signals import Bail, Refused, Signal
from teamrun.engine.workspace.answers import answer_to_entry
from teamrun.errors import RunError, UserError
from teamrun.llm.types import Message
from teamrun.logs import get_logger

__all__ = ["Delegator", "Settled", "StartedWorker", "WorkerFailed", "WorkerOutcome", "WorkerRun", "transcript"]

_log = get_logger(__name__)


class Delegator:
    """The delegations of one agent frame, bounded by its ``max_concurrency``; it owns each worker's life."""

    def __init__(
        self, ctx: RunContext, frame: AgentFrame, run_agent: RunAgent, settings: Delegation | None = None
    ) -> None:
        """``settings``: for a frame that is no agent of the file (a workflow's), its delegation settings."""
        self.ctx = ctx
        self.frame = frame
        self.run_agent = run_agent
        self.settings = settings or delegation_settings(ctx.config, frame.name)
        limit = self.settings.max_concurrency if self.settings.parallel else 1
        self.slots = asyncio.Semaphore(limit)
        self.hooks = HookRunner(ctx, frame, (self.settings.hooks or Hooks()) if settings is not None else None)
        self.tasks = TaskLedger(frame.name, self.settings.max_follow_ups)
        self.background_workers = frozenset(background_workers(ctx.agent(frame.name)) if settings is None else ())
        self.background = BackgroundTasks()
        self._cancel_asked: set[asyncio.Task[Any]] = set()
        """Background tasks the agent cancelled with ``cancel_task`` (their ``on_complete`` hooks run)."""

    # -- one delegation call ------------------------------------------------------------------

    async def delegate(
        self, request: DelegationRequest, keys: Mapping[str, str], parent_messages: Sequence[Message], *, single: bool
    ) -> tuple[str, tuple[Signal, ...]]:
        """Run one delegation call's workers (background ones are started and left running).

        ``keys``: each target's invocation key. The text the model sees, and the signals raised.
        """
        self._reserve_refs(request.targets, keys)  # before any await: in the order of the reply's calls
        started = [
            await self._start_background(worker, request, keys[worker], parent_messages)
            for worker in request.targets
            if worker in self.background_workers
        ]
        settled = await run_all(
            self._foreground(worker, request, keys[worker], parent_messages)
            for worker in request.targets
            if worker not in self.background_workers
        )
        if not started:
            content = results_for_model([s.result for s in settled], single=single)
        else:
            shown = [view for view, _ in started] + [s.result.for_model() for s in settled]
            content = json.dumps(shown[0] if len(shown) == 1 else shown, ensure_ascii=False, indent=1)
        signals = [s.signal for s in settled if s.signal is not None]
        signals += [signal for _, signal in started if signal is not None]
        return content, tuple(signals)

    async def control(self, name: str, arguments: dict[str, Any]) -> str:
        """A background-task tool call (``wait_for``, ``check_tasks``, ``cancel_task``): the text the model sees."""
        if name == CANCEL_TASK:
            handle = arguments.get("handle")
            item = self.background.items.get(handle) if isinstance(handle, str) else None
            if item is not None and not item.task.done():
                self._cancel_asked.add(item.task)
                await self.background.cancel(item.handle)
                if item.task.cancelled() and item.settled is None:  # cancelled before its first step
                    item.settled = await self._refused(self._cancelled_result(item.run), item.run.start)
        return await self.background.call(name, arguments)

    async def run_worker(self, worker: str, request: DelegationRequest, key: str) -> Settled:
        """One worker in the foreground, its whole life (a workflow step): prepare → slot → begin → run → settle."""
        self._reserve_refs((worker,), {worker: key})
        return await self._foreground(worker, request, key, ())

    def _reserve_refs(self, workers: Sequence[str], keys: Mapping[str, str]) -> None:
        """With ``result_references``, fix each worker's result id now, as the delegation is made: ids follow
        the order of the calls, not the order in which concurrent workers happen to finish."""
        if self.settings.result_references:
            for worker in workers:
                self.ctx.refs.reserve(worker, keys[worker])

    async def _foreground(
        self, worker: str, request: DelegationRequest, key: str, parent_messages: Sequence[Message]
    ) -> Settled:
        ready = await self.prepare(worker, request, key, parent_messages)
        if isinstance(ready, Settled):
            return ready
        return await self._live(ready, await _Slot.take(self.slots))

    async def _live(self, ready: WorkerRun, slot: _Slot, *, background: bool = False) -> Settled:
        """A ready worker in its slot: begin → run → settle, in its delegation span. The slot is freed when
        the run ends (``on_complete`` hooks hold none), the span after the worker is settled."""
        with slot, self.begin(ready, background=background) as started:
            outcome = await self._run(started)
            slot.free()
            try:
                return await self.settle(started, outcome)
            except asyncio.CancelledError:
                if not self._asked_to_cancel():
                    raise
                assert started.span.result is not None  # cancel_task while its on_complete hooks ran:
                return Settled(started.span.result)  # settled as the worker came to, one record

    async def _start_background(
        self, worker: str, request: DelegationRequest, key: str, parent_messages: Sequence[Message]
    ) -> tuple[dict[str, Any], Signal | None]:
        """Checks and hooks now; the worker runs on as a background task. What the model sees, and any signal."""
        ready = await self.prepare(worker, request, key, parent_messages)
        if isinstance(ready, Settled):
            return ready.result.for_model(), ready.signal
        task = asyncio.create_task(self._background(ready), name=f"teamrun:background:{worker}")
        handle = self.background.add(BackgroundTask("", worker, task, ready))
        view: dict[str, Any] = {"handle": handle, "agent": worker, "status": "running", "response": ""}
        if ready.record is not None:
            view = {"task_id": ready.record.task_id, **view}
        return view, None

    async def _background(self, ready: WorkerRun) -> Settled:
        try:
            slot = await _Slot.take(self.slots)
        except asyncio.CancelledError:  # cancelled while waiting for a slot: still one record
            if self._asked_to_cancel():
                return await self._refused(self._cancelled_result(ready), ready.start)
            self._not_run(self._cancelled_result(ready))
            raise
        return await self._live(ready, slot, background=True)

    def _asked_to_cancel(self) -> bool:
        """Whether the current (background) task was cancelled by ``cancel_task``; it then goes on to settle
        the delegation, so the cancellation is taken back."""
        task = asyncio.current_task()
        if task is None or task not in self._cancel_asked:
            return False
        task.uncancel()
        return True

    async def _run(self, started: StartedWorker) -> WorkerOutcome | DelegationResult:
        """The worker's run; a failure or its own timeout becomes its result (siblings go on)."""
        deadline = asyncio.timeout(started.timeout)
        try:
            async with deadline:
                return await self.run_agent(started.frame, started.run.prompt)
        except asyncio.CancelledError:
            if self._asked_to_cancel():  # cancel_task: settled like any ending, hooks included
                return self._cancelled_result(started.run, usage_known=started.frame.ledger.usage_known)
            raise  # the run is going down: the span ends it cancelled
        except (UserError, WorkerFailed):
            raise  # the team file is wrong (a template that cannot render), or a fatal worker: stop and say so
        except TimeoutError as exc:
            if deadline.expired():
                return self._timed_out(started)
            return self._failed(started, exc)
        except Exception as exc:  # a run error, or a bug in user code or ours must not lose the siblings
            return self._failed(started, exc)

    # -- the steps -----------------------------------------------------------------------------

    def _result(
        self, worker: str, task: str, status: DelegationStatus, response: str = "", **extra: Any
    ) -> DelegationResult:
        return DelegationResult(
            worker, task, status, response, parent=self.frame.name, agent_path=(*self.frame.path, worker), **extra
        )

    def _open_task(self, worker: str, request: DelegationRequest) -> tuple[TaskRecord | None, str | None]:
        """The tracked task of a request (``None`` for a plain delegation), or why it is refused.

        Opening checks the follow-up limit and marks the attempt running in one step (nothing awaits in
        between), so concurrent follow-ups of one task cannot all pass the check.
        """
        if not request.tracked:
            return None, None
        try:
            record, follow_up = self.tasks.open(
                worker,
                request.task,
                task_id=request.task_id,
                expected_output=request.expected_output,
                follow_up_of=request.follow_up_of,
            )
        except TaskRefused as exc:
            return None, str(exc)
        if not follow_up:
            self.ctx.record_task(record)
        return record, None

    async def prepare(
        self, worker: str, request: DelegationRequest, key: str, parent_messages: Sequence[Message]
    ) -> WorkerRun | Settled:
        """Checks, ``on_start`` hooks and the prompt; a delegation refused here is settled already."""
        record, refused = self._open_task(worker, request)
        if refused is not None:
            start = self._start(worker, request.task, request.follow_up_of or request.task_id)
            return await self._refused(
                self._result(
                    worker, request.task, "rejected", error=refused, task_id=request.follow_up_of or request.task_id
                ),
                start,
                step=request.step,
            )
        ready = await self._checked(worker, request, key, parent_messages, record)
        if record is not None and isinstance(ready, Settled):
            self.tasks.withdraw(record, ready.result.status, ready.result.response)
        return ready

    def _start(self, worker: str, task: str, task_id: str | None) -> HookContext:
        return replace(start_context(self.ctx, self.frame, worker, task), task_id=task_id)

    async def _checked(
        self,
        worker: str,
        request: DelegationRequest,
        key: str,
        parent_messages: Sequence[Message],
        record: TaskRecord | None,
    ) -> WorkerRun | Settled:
        parent = self.frame
        task_id = record.task_id if record is not None else None
        start = self._start(worker, request.task, task_id)
        too_deep = parent.ledger.check_depth(parent.depth + 1)
        if too_deep is not None:
            error = f"{too_deep} reached: {worker} cannot be delegated to from here"
            return await self._refused(
                self._result(worker, request.task, "rejected", error=error, task_id=task_id),
                start,
                Refused(too_deep),
                step=request.step,
            )
        reached = parent.ledger.check_before_delegation()
        if reached is not None:
            error = f"{reached} reached; no more delegations. Answer with what you have."
            return await self._refused(
                self._result(worker, request.task, "rejected", error=error, task_id=task_id),
                start,
                reached,
                step=request.step,
            )
        # counted now, with nothing awaited since the check: concurrent delegations are counted in the order
        # they started and cannot all pass one check while on_start hooks run; given back if a hook refuses
        parent.ledger.charge("delegations")
        try:
            actions = await self.hooks.run("on_start", start)
        except HookFailed as exc:
            parent.ledger.charge("delegations", -1)
            return await self._refused(
                self._result(worker, request.task, "error", error=str(exc), task_id=task_id), start, step=request.step
            )
        task = actions.prompt if actions.prompt is not None else request.task
        if actions.reject is not None:
            parent.ledger.charge("delegations", -1)
            return await self._refused(
                self._result(
                    worker, task, "rejected", actions.reject, error="rejected by an on_start hook", task_id=task_id
                ),
                start,
                step=request.step,
            )
        try:
            prompt = await self._prompt(worker, request, actions, parent_messages, record)
        except FilterFailed as exc:
            return await self._refused(
                self._result(worker, task, "error", error=str(exc), task_id=task_id), start, step=request.step
            )
        return WorkerRun(worker, task, prompt, request, actions, start, key, record)

    @contextmanager
    def begin(self, run: WorkerRun, *, background: bool = False) -> Iterator[StartedWorker]:
        """The worker's frame, under this agent's ledger, in its delegation span: the span starts now and
        ends when the block does (:meth:`_span`).

        ``background``: the delegating agent's ``background_timeout_s`` applies too (the shorter wins).
        """
        with self._span(run.worker, run.task, _task_id(run), asked=run.request.task, step=run.request.step) as span:
            yield self._started(run, span, background=background)

    def _started(self, run: WorkerRun, span: DelegationSpan, *, background: bool) -> StartedWorker:
        ctx, parent, worker = self.ctx, self.frame, run.worker
        budget = ctx.agent(worker).budget
        if run.request.max_tool_calls is not None:
            current = budget.max_tool_calls if budget else None
            cap = run.request.max_tool_calls if current is None else min(current, run.request.max_tool_calls)
            budget = (budget or Limits()).model_copy(update={"max_tool_calls": cap})
        steps = max_steps_for(ctx.config, budget)
        if run.actions.max_steps is not None:
            steps = run.actions.max_steps if steps is None else min(steps, run.actions.max_steps)
        child = AgentFrame(
            name=worker,
            path=(*parent.path, worker),
            span_id=ctx.bus.new_span_id(),
            parent_span_id=span.id,
            ledger=parent.ledger.child(
                budget, label=f"agents.{worker}.budget", max_steps=steps, depth=parent.depth + 1, agent=worker
            ),
            context=dict(run.actions.context),
            allowed_tools=frozenset(run.request.tools) if run.request.tools is not None else None,
            key=run.key,
        )
        timeout = budget.timeout_s if budget is not None else None
        label = f"agents.{worker}.budget.timeout_s"
        if background and (timeout is None or self.settings.background_timeout_s < timeout):
            timeout, label = self.settings.background_timeout_s, f"agents.{parent.name}.delegation.background_timeout_s"
        return StartedWorker(run, child, span, timeout, label)

    def _cancelled_result(self, run: WorkerRun, *, usage_known: bool = True) -> DelegationResult:
        """``usage_known``: false for a worker that ran and whose spending is not known (a remote one)."""
        return self._result(
            run.worker, run.task, "cancelled", error="cancelled", task_id=_task_id(run), usage_known=usage_known
        )

    def _timed_out(self, started: StartedWorker) -> DelegationResult:
        worker = started.run.worker
        error = f"{started.timeout_label} ({started.timeout}) reached"
        return self._result(
            worker,
            started.run.task,
            "budget_exhausted",
            error=error,
            timed_out=True,
            task_id=_task_id(started.run),
            usage_known=started.frame.ledger.usage_known,  # a remote worker's, unless it reported them: never 0
        )

    def _failed(self, started: StartedWorker, exc: Exception) -> DelegationResult:
        """A worker that raised: a run error is its result; a bug is logged and reported, siblings go on.

        A worker declared ``on_error: fail_run`` fails the run instead (:class:`WorkerFailed`).
        """
        worker = started.run.worker
        if not isinstance(exc, RunError):
            _log.exception("worker_crashed", worker=worker)
        error = _error_text(exc)
        failed = self._result(
            worker,
            started.run.task,
            "error",
            error=error,
            task_id=_task_id(started.run),
            usage_known=started.frame.ledger.usage_known,
        )
        if self.ctx.agent(worker).on_error == "fail_run":
            started.span.result = failed  # what its span's end reports
            raise WorkerFailed(f"worker {worker} failed and has on_error: fail_run: {error}") from exc
        return failed

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
            done = self._result(
                run.worker,
                run.task,
                status,
                response,
                usage=outcome.usage,
                cost=outcome.cost,
                error=outcome.stopped_by,
                task_id=_task_id(started.run),
                acceptance=outcome.acceptance,
                usage_known=outcome.usage_known and started.frame.ledger.usage_known,  # a model's malformed usage too
            )
            messages, finish_reason = outcome.messages, outcome.finish_reason
        settled = await self._complete(
            done, started.run.start, messages, started.span, finish_reason, key=started.run.key
        )
        # agents.<worker>.answer_to: the worker's answer goes to the workspace (not an on_complete hook's
        # result_text, which replaces only what the caller reads); the caller reads where, unless a hook rewrote it
        rewritten = settled.result.response != done.response
        answered = await answer_to_entry(self.ctx, started.frame, replace(settled.result, response=done.response))
        if answered is not None and not rewritten:
            started.span.result = answered
            settled = replace(settled, result=answered)
        if started.run.record is not None:
            self.tasks.settle(started.run.record, settled.result.status, settled.result.response)
        return settled

    async def _prompt(
        self,
        worker: str,
        request: DelegationRequest,
        actions: HookActions,
        parent_messages: Sequence[Message],
        record: TaskRecord | None = None,
    ) -> str:
        parts = [actions.prompt if actions.prompt is not None else request.task, *actions.append_prompt]
        if record is not None and request.follow_up_of is not None:
            parts.append(
                f"## This follows up task {record.task_id}\nThe task was: {record.task}\n"
                f"Your previous answer:\n{record.last_response}"
            )
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
                self.ctx.warn(
                    self.frame,
                    f"{self.frame.name} referenced unknown result '{ref.ref}'; skipped "
                    f"(known: {', '.join(self.ctx.refs.known()) or 'none'})",
                )
            else:
                found.append((ref, text))
        blocks = render_blocks(found)
        if blocks:
            parts.append(blocks)
        return "\n\n".join(parts)

    async def _complete(
        self,
        done: DelegationResult,
        start: HookContext,
        messages: Sequence[Message],
        span: DelegationSpan,
        finish_reason: str | None = None,
        *,
        key: str | None = None,
    ) -> Settled:
        """``on_complete`` hooks and the result reference (the id reserved for invocation ``key``); the span's
        record follows (so the ``delegation_end`` event its end emits carries what the delegating agent was
        actually given)."""
        span.result = done  # what the delegation came to, should the hooks not finish
        if self.hooks.has("on_complete"):
            context = complete_context(
                start,
                status="timeout" if done.timed_out else done.status,
                error=done.error,
                result=done.response,
                messages=messages,
                usage=done.usage.as_dict(),
                finish_reason=finish_reason,
            )
            try:
                actions = await self.hooks.run("on_complete", context)
            except HookFailed as exc:
                span.result = replace(done, status="error", error=str(exc))
                return Settled(span.result)
            if actions.result_text is not None:
                done = replace(done, response=actions.result_text)
            if actions.bail:
                done = replace(done, bailed=True)
        if self.settings.result_references and done.status == "ok" and done.response.strip():
            done = replace(done, ref=self.ctx.refs.add(done.agent, done.response, key))
        span.result = done
        return Settled(done, Bail(done) if done.bailed else None)

    async def _refused(
        self, result: DelegationResult, start: HookContext, signal: Signal | None = None, *, step: str | None = None
    ) -> Settled:
        """A delegation that ended before its worker ran (refused, or cancelled waiting): still one span,
        and the ``on_complete`` hooks see it. ``step``: the workflow step it was to run."""
        with self._span(result.agent, result.task, result.task_id, step=step) as span:
            span.result = result
            settled = await self._complete(result, start, (), span)
        return Settled(settled.result, signal or settled.signal)

    def _not_run(self, result: DelegationResult) -> DelegationResult:
        """A delegation cancelled with the whole run before its worker started: recorded, no hooks."""
        with self._span(result.agent, result.task, result.task_id) as span:
            span.result = result
        return result

    @contextmanager
    def _span(
        self, worker: str, task: str, task_id: str | None, *, asked: str | None = None, step: str | None = None
    ) -> Iterator[DelegationSpan]:
        """One delegation's span: ``delegation_start`` now; when the block ends, however it ends, the
        delegation's record is kept and ``delegation_end`` reports it, once (:meth:`_finish`).

        The record is the one the block left in :attr:`DelegationSpan.result`; a block left without one was
        cancelled (a ``cancelled`` record) or raised (an ``error`` one). ``task``: the record's task;
        ``asked``: the task as the model wrote it, for the start event (default ``task``).
        """
        span = DelegationSpan(self.ctx.bus.new_span_id(), worker, task, task_id)
        shown = task if asked is None else asked
        self.frame.emit(self.ctx, "delegation_start", span_id=span.id, worker=worker, task=shown, step=step)
        try:
            yield span
        except asyncio.CancelledError:
            if span.result is None:
                span.result = self._result(worker, task, "cancelled", error="cancelled", task_id=task_id)
            raise
        except BaseException as exc:
            if span.result is None:
                span.result = self._result(worker, task, "error", error=_error_text(exc), task_id=task_id)
            raise
        finally:
            if span.result is None:  # a block that neither settled nor raised: a bug, said as such
                span.result = self._result(worker, task, "error", error="ended without a result", task_id=task_id)
            self._finish(span.result, span.id)

    def _finish(self, result: DelegationResult, span: str) -> None:
        """Keep the record (once per delegation) and end its span."""
        self.ctx.record_delegation(result)
        if result.status == "cancelled" and result.task_id is not None:
            record = self.tasks.tasks.get(result.task_id)
            if record is not None:
                self.tasks.settle(record, "cancelled", "")
                record.review = "abandoned"
        waiting = result.status == "cancelled" and self.ctx.activity.stuck.is_set()  # suspended for a person
        self.frame.emit(
            self.ctx,
            "delegation_end",
            span_id=span,
            worker=result.agent,
            status="waiting" if waiting else result.status,
            usage=result.usage.as_dict(),
            cost=result.cost,
            error=WAITING_FOR_A_PERSON if waiting else result.error,
        )


class _Slot:
    """One of a delegator's concurrency slots, taken for one worker; freed once, when its run ends or the
    block it guards is left."""

    def __init__(self, slots: asyncio.Semaphore) -> None:
        self._slots = slots
        self._held = True

    @classmethod
    async def take(cls, slots: asyncio.Semaphore) -> _Slot:
        """Wait for a free slot and hold it."""
        await slots.acquire()
        return cls(slots)

    def free(self) -> None:
        if self._held:
            self._held = False
            self._slots.release()

    def __enter__(self) -> _Slot:
        return self

    def __exit__(self, *exc: object) -> None:
        self.free()


def _task_id(run: WorkerRun) -> str | None:
    return run.record.task_id if run.record is not None else None


def _error_text(exc: BaseException) -> str:
    """A failure as a delegation record says it: a run error's message, else the exception's type too."""
    return str(exc) if isinstance(exc, RunError) else f"{type(exc).__name__}: {exc}"


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
