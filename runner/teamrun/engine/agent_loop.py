"""One agent's loop: model call → turn plan → actions → next step, until it answers.

A turn: check the limits (:meth:`BudgetLedger.check_before_model_call`), call
the model with the agent's :class:`ToolTable`, plan the reply
(:func:`plan_turn`), run the planned actions concurrently (each returns a
:class:`CallResult` with its signals), then :func:`next_step` picks one of
:class:`FinalOutput`, :class:`RunAgain`, :class:`Stop` (one last turn without
tools) or :class:`HandOff`. Workers are run from here too (:func:`run_agent`),
between the delegator's checks and its ``on_complete`` hooks.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import structlog

from teamrun.defaults import DEFAULT_MAX_TOKENS
from teamrun.engine.acceptance import Acceptance
from teamrun.engine.delegation import Delegator, Settled, StartedWorker, WorkerFailed, WorkerOutcome, WorkerRun
from teamrun.engine.delegation_tools import DelegationRequest, parse_request, results_for_model, workers_of
from teamrun.engine.hooks import HookFailed, HookRunner, iteration_context
from teamrun.engine.journal import EntryKey, JournalEntry, tool_hash, tool_idempotent
from teamrun.engine.ledger import LimitReached, counters_of
from teamrun.engine.prompts import system_prompt
from teamrun.engine.result import DelegationResult
from teamrun.engine.runtime import AgentFrame, RunContext, run_all
from teamrun.engine.structured import OutputChecker
from teamrun.engine.tool_table import ToolTable, build_tool_table
from teamrun.engine.turn_plan import (
    Action,
    CallResult,
    Control,
    Delegate,
    ExtraTransfer,
    FinalOutput,
    HandedOff,
    HandOff,
    NextStep,
    RunAgain,
    RunTool,
    Signal,
    Stop,
    Transfer,
    Unknown,
    ends_turn,
    next_step,
    plan_turn,
)
from teamrun.errors import ModelError, UserError
from teamrun.llm.cassette import reply_to_dict
from teamrun.llm.types import (
    CallScope,
    Message,
    ModelReply,
    ModelSettings,
    ToolCall,
    ToolSchema,
    Usage,
    current_scope,
    parse_arguments,
)
from teamrun.tools.base import ToolOutcome
from teamrun.tools.invoke import invoke_tool

LAST_TURN_NOTE = (
    "STOP: {reason}. You cannot call tools or delegate any more. "
    "Answer now with what you have verified, and list plainly what is still missing."
)
CONTINUE_NOTE = "Your answer was cut off. Continue exactly where it stopped; do not repeat anything."
EMPTY_NOTE = "Your reply was empty. Reply with your final answer."
LAST_TURN_MIN_TOKENS = 200
"""The last turn may always write this many tokens, even when a token or cost limit is already used up."""


class EmptyAnswer(ModelError):
    """An agent's final answer was empty, also when asked once more."""


class AgentLoop:
    """Runs one agent frame to its answer (or to a handoff)."""

    def __init__(self, ctx: RunContext, frame: AgentFrame) -> None:
        self.ctx = ctx
        self.frame = frame
        self.agent = ctx.agent(frame.name)
        self.counters = counters_of(self.agent)
        """The counted limits this agent's work spends on: one used up elsewhere stops it too."""
        self.settings = ctx.settings_for(frame.name)
        self.delegator = Delegator(ctx, frame)
        self.hooks = HookRunner(ctx, frame)
        self.output = OutputChecker.for_agent(frame.name, self.agent)
        self.acceptance = Acceptance.for_frame(ctx, frame)
        """The ``accept:`` checks of this agent's answers (``None``: it has none)."""
        self.messages: list[Message] = []
        self.turns = 0
        self.asked_again = False
        """Whether an empty answer was already met with one more request."""
        self.finish_reason: str | None = None
        """Why the latest model call ended."""
        self.base_prompt = ""
        """The system prompt without the task ledger (which is refreshed each turn)."""
        self.calls: tuple[ToolCall, ...] = ()
        """The tool calls of the latest reply (their positions name journal entries and workers)."""

    # -- the loop ------------------------------------------------------------------------

    async def run(self, task: str | None, history: Sequence[Message] = ()) -> WorkerOutcome | HandOff:
        """Start on ``task``, or take over ``history`` after a handoff."""
        ctx, frame = self.ctx, self.frame
        self.base_prompt = self._system_prompt()
        system = {"role": "system", "content": self.base_prompt}
        if history:
            self.messages = [system, *(m for m in history if m.get("role") != "system")]
        else:
            self.messages = [system, {"role": "user", "content": task or ""}]
        if self.acceptance is not None:
            self.acceptance.task = task if task is not None else next(
                (str(m.get("content") or "") for m in history if m.get("role") == "user"), "")
        structlog.contextvars.bind_contextvars(agent=frame.name, agent_path="/".join(frame.path))
        frame.emit(ctx, "agent_start", model=self.settings.model, task=task or "(handoff)")
        status, stopped_by, text = "error", None, ""
        accepted = None
        try:
            # starts the tool sources it declares; a narrowed task leaves out the others
            table = await build_tool_table(ctx, frame.name, allowed=frame.allowed_tools)
            while True:
                step = await self._step(table)
                if isinstance(step, HandOff):
                    status = "handed_off"
                    return step
                if isinstance(step, FinalOutput):
                    status, text = "ok", step.text
                    break
                if isinstance(step, Stop):
                    text = await self._last_turn(step)
                    status = "budget_exhausted" if step.budget else "ok"
                    stopped_by = step.reason if step.budget else None
                    break
            if self.acceptance is not None:
                accepted = self.acceptance.finish(stopped_by or (step.reason if isinstance(step, Stop) else None))
        except asyncio.CancelledError:
            status = "cancelled"
            raise
        finally:
            await self.delegator.background.cancel_all()  # only still running if the agent did not answer
            if status != "handed_off":
                self.delegator.tasks.close()
            own = frame.ledger.own
            frame.emit(ctx, "agent_end", status=status, usage=own.usage.as_dict(), cost=own.cost,
                       stopped_by=stopped_by)
        return WorkerOutcome(text, status, frame.ledger.own.usage, frame.ledger.own.cost, self.messages, stopped_by,
                             self.finish_reason, accepted)

    async def _step(self, table: ToolTable) -> NextStep:
        reached = self.frame.ledger.check_before_model_call(self.counters)
        if reached is not None:
            return Stop(reached)
        self._add_feedback()
        self._announce()
        self._show_tasks()
        reply = await self._call_model(table.schemas)
        self.messages.append(reply.as_message())
        self.calls = reply.tool_calls
        plan = plan_turn(reply, table)
        if plan.is_answer:
            background = self.delegator.background
            if background.running() or background.unseen():
                # not done while background work is unfinished: wait for it (each has a timeout), then it is
                # announced and the agent answers again
                await background.wait([item.handle for item in background.running()], None)
                return RunAgain()
            return await self._answer(reply)
        results = await run_all(self._run_action(action) for action in plan.actions)
        for result in results:
            self.messages.append({"role": "tool", "tool_call_id": result.call.id, "content": result.content})
        hook_stop = None if ends_turn(results) else await self._on_iteration()
        return next_step(results, hook_stop=hook_stop)

    async def _answer(self, reply: ModelReply) -> NextStep:
        """A reply without tool calls: continued once if cut off, asked again once if empty, checked."""
        text = reply.text or ""
        if reply.finish_reason == "length":
            text = await self._continuation(text)
        if not text.strip():
            if self.asked_again:
                raise EmptyAnswer(f"{self.frame.name} gave an empty final answer, also when asked once more")
            self.asked_again = True
            self.messages.append({"role": "user", "content": EMPTY_NOTE})
            return RunAgain()
        if self.output is not None:
            verdict = self.output.check(text)
            if not verdict.ok:
                self.messages.append({"role": "user", "content": verdict.repair_prompt})
                return RunAgain()
            text = verdict.text
        if self.acceptance is not None:
            feedback = await self.acceptance.review(text)
            if feedback is not None:
                self.messages.append({"role": "user", "content": feedback})
                return RunAgain()
        return FinalOutput(text)

    async def _continuation(self, text: str) -> str:
        """One more call for the rest of an answer cut off at the output limit (``finish_reason: length``)."""
        self.messages.append({"role": "user", "content": CONTINUE_NOTE})
        reply = await self._call_model(())
        self.messages.append(reply.as_message())
        if reply.finish_reason == "length":
            self._warn_truncated("answer")
        return text + (reply.text or "")

    def _warn_truncated(self, what: str) -> None:
        self.ctx.warn(self.frame, f"truncated: {self.frame.name}'s {what} was cut off at the model's output limit "
                                  f"(finish_reason: length); raise max_tokens for {self.frame.name}")

    async def _on_iteration(self) -> str | None:
        """Run ``on_iteration`` hooks; why they stop the agent, if they do."""
        if not self.hooks.has("on_iteration"):
            return None
        try:
            actions = await self.hooks.run("on_iteration", iteration_context(self.ctx, self.frame, self.messages))
        except HookFailed as exc:
            return str(exc)
        self.frame.feedback.extend(actions.feedback)
        return "an on_iteration hook asked to stop" if actions.stop else None

    def _announce(self) -> None:
        """Finished background work the agent has not seen yet, as a message before its next call."""
        announcement = self.delegator.background.announcement()
        if announcement is not None:
            self.messages.append({"role": "user", "content": announcement})

    def _show_tasks(self) -> None:
        """The compact task ledger, kept current at the end of the system prompt (it does not pile up)."""
        ledger = self.delegator.tasks.summary()
        if ledger and self.messages and self.messages[0].get("role") == "system":
            self.messages[0] = {"role": "system", "content": f"{self.base_prompt}\n\n{ledger}"}

    def _add_feedback(self) -> None:
        if self.frame.feedback:
            notes = "\n".join(f"- {note}" for note in self.frame.feedback)
            self.messages.append({"role": "user", "content": f"Feedback on the work so far:\n{notes}"})
            self.frame.feedback.clear()

    async def _last_turn(self, stop: Stop) -> str:
        """One model call without tools; its output is capped to what the limits leave."""
        self._announce()
        self.messages.append({"role": "user", "content": LAST_TURN_NOTE.format(reason=stop.note)})
        limit = stop.why if isinstance(stop.why, LimitReached) else None
        self.frame.emit(self.ctx, "budget", reason=stop.reason, limit=limit.limit if limit else None,
                        value=limit.value if limit else None)
        reply = await self._call_model((), settings=self._last_turn_settings())
        self.messages.append(reply.as_message())
        if reply.finish_reason == "length":
            self._warn_truncated("last answer")
        return reply.text or ""

    def _last_turn_settings(self) -> ModelSettings:
        sent = sum(len(json.dumps(m, default=str)) for m in self.messages) // 4  # a rough token count
        left = self.frame.ledger.tokens_left(sent)
        if left is None:
            return self.settings
        configured = self.settings.max_tokens or DEFAULT_MAX_TOKENS
        return replace(self.settings, max_tokens=min(configured, max(LAST_TURN_MIN_TOKENS, left)))

    def _system_prompt(self) -> str:
        return system_prompt(
            self.frame.name,
            self.agent,
            workers=workers_of(self.ctx, self.frame.name),
            template_context=self.ctx.template_context(self.frame.name, self.frame.context),
        )

    # -- model calls -----------------------------------------------------------------------

    async def _call_model(self, tools: Sequence[ToolSchema], settings: ModelSettings | None = None) -> ModelReply:
        ctx, frame = self.ctx, self.frame
        settings = settings or self.settings
        span = ctx.bus.new_span_id()
        frame.emit(ctx, "llm_start", span_id=span, model=settings.model, messages=len(self.messages))
        self.turns += 1
        response_format = self.output.response_format if self.output else None
        journal, reply, fingerprint = ctx.journal, None, ""
        if journal is not None:
            fingerprint = journal.request_hash(self.messages, settings, tools, response_format)
            reply = journal.replay.model(frame.key, self.turns, fingerprint)
        scope = current_scope.set(CallScope(frame.path, self.turns, span, ctx.bus.run_id))
        try:
            if reply is None:
                reply = await ctx.model.complete(
                    self.messages, settings=settings, tools=list(tools), response_format=response_format,
                )
                if journal is not None:  # durable before the engine acts on it
                    await journal.write_now(JournalEntry(EntryKey(frame.key, self.turns, "model"), fingerprint,
                                                         reply_to_dict(reply)))
        except ModelError as exc:
            frame.emit(ctx, "llm_end", span_id=span, status="error", error=str(exc))
            raise ModelError(f"{frame.name}: {exc}") from exc
        finally:
            current_scope.reset(scope)
        frame.ledger.charge_model(reply.usage, reply.cost_usd)
        self.finish_reason = reply.finish_reason
        frame.emit(ctx, "llm_end", span_id=span, status="ok", usage=reply.usage.as_dict(),
                   cost=reply.cost_usd, tool_calls=[c.name for c in reply.tool_calls],
                   finish_reason=reply.finish_reason)
        return reply

    # -- the planned actions ---------------------------------------------------------------

    async def _run_action(self, action: Action) -> CallResult:
        if isinstance(action, Delegate):
            return await self._delegate(action)
        if isinstance(action, Transfer):
            return self._transfer(action)
        if isinstance(action, ExtraTransfer):
            return CallResult(action.call, f"Ignored: only one transfer per turn; {action.first} was asked first.")
        if isinstance(action, RunTool):
            return await self._tool(action)
        if isinstance(action, Control):
            return CallResult(action.call, await self.delegator.background.call(
                action.call.name, parse_arguments(action.call.arguments)))
        assert isinstance(action, Unknown)
        return CallResult(action.call, action.message())

    def _position(self, call: ToolCall) -> int:
        """Where ``call`` stands in the latest reply."""
        for position, asked in enumerate(self.calls):
            if asked is call:
                return position
        return self.calls.index(call) if call in self.calls else len(self.calls)

    def _child_key(self, call: ToolCall, worker: str) -> str:
        return f"{self.frame.key}/{worker}@{self.turns}.{self._position(call)}"

    async def _delegate(self, action: Delegate) -> CallResult:
        call = action.call
        try:
            request = parse_request(self.ctx, self.frame, action.worker, parse_arguments(call.arguments))
        except ValueError as exc:
            return CallResult(call, f"Error: {exc}. Call {call.name} again with corrected arguments.")
        background = self.delegator.background_workers
        started = [await self._start_background(worker, request, self._child_key(call, worker))
                   for worker in request.targets if worker in background]
        settled = await run_all(self._delegate_to(worker, request, self._child_key(call, worker))
                                for worker in request.targets if worker not in background)
        if not started:
            content = results_for_model([s.result for s in settled], single=action.worker is not None)
        else:
            shown = [view for view, _ in started] + [s.result.for_model() for s in settled]
            content = json.dumps(shown[0] if len(shown) == 1 else shown, ensure_ascii=False, indent=1)
        signals = [s.signal for s in settled if s.signal is not None]
        signals += [signal for _, signal in started if signal is not None]
        return CallResult(call, content, tuple(signals))

    async def _start_background(self, worker: str, request: DelegationRequest,
                                key: str) -> tuple[dict[str, Any], Signal | None]:
        """Checks and hooks now; the worker runs on as a background task. What the model sees, and any signal."""
        ready = await self.delegator.prepare(worker, request, self.messages)
        if isinstance(ready, Settled):
            return ready.result.for_model(), ready.signal
        task = asyncio.create_task(self._run_in_background(ready, key), name=f"teamrun:background:{worker}")
        handle = self.delegator.background.add(worker, task)
        view: dict[str, Any] = {"handle": handle, "agent": worker, "status": "running", "response": ""}
        if ready.record is not None:
            view = {"task_id": ready.record.task_id, **view}
        return view, None

    async def _run_in_background(self, ready: WorkerRun, key: str) -> Settled:
        started: StartedWorker | None = None
        try:
            async with self.delegator.slots:
                started = self.delegator.begin(ready, background=True)
                started.frame.key = key
                outcome = await self._run_worker(started)
            return await self.delegator.settle(started, outcome)
        except asyncio.CancelledError:
            if started is None:  # cancelled while waiting for a slot: still one record
                self.delegator.never_started(ready)
            raise

    async def _delegate_to(self, worker: str, request: DelegationRequest, key: str) -> Settled:
        ready = await self.delegator.prepare(worker, request, self.messages)
        if isinstance(ready, Settled):
            return ready
        async with self.delegator.slots:
            started = self.delegator.begin(ready)
            started.frame.key = key
            outcome = await self._run_worker(started)
        return await self.delegator.settle(started, outcome)

    async def _run_worker(self, started: StartedWorker) -> WorkerOutcome | DelegationResult:
        """The worker's run; a failure or its own timeout becomes its result (siblings go on)."""
        deadline = asyncio.timeout(started.timeout)
        try:
            async with deadline:
                return await run_agent(self.ctx, started.frame, started.run.prompt)
        except asyncio.CancelledError:
            self.delegator.cancelled(started)
            raise
        except (UserError, WorkerFailed):
            raise  # the team file is wrong (a template that cannot render), or a fatal worker: stop and say so
        except TimeoutError as exc:
            if deadline.expired():
                return self.delegator.timed_out(started)
            return self.delegator.failed(started, exc)
        except Exception as exc:  # a run error, or a bug in user code or ours must not lose the siblings
            return self.delegator.failed(started, exc)

    def _transfer(self, action: Transfer) -> CallResult:
        reached = self.frame.ledger.check_before_handoff()
        if reached is not None:
            return CallResult(action.call, f"Error: {reached} reached; no more transfers. Answer the user yourself.",
                              (reached,))
        self.frame.ledger.charge("handoffs")
        return CallResult(action.call, f"Transferred to {action.target}: it now answers the user.",
                          (HandedOff(action.target),))

    async def _tool(self, action: RunTool) -> CallResult:
        ctx, frame, call = self.ctx, self.frame, action.call
        reached = frame.ledger.check_before_tool_call()
        if reached is not None:
            return CallResult(call, f"Error: {reached} reached; this call was not run. Answer with what you have.",
                              (reached,))
        frame.ledger.charge("tool_calls")
        span = ctx.bus.new_span_id()
        frame.emit(ctx, "tool_start", span_id=span, tool=call.name)
        outcome = await self._journaled_tool(action)
        frame.emit(ctx, "tool_end", span_id=span, tool=call.name, status="ok" if outcome.ok else "error",
                   error=outcome.error, chars=len(outcome.content))
        return CallResult(call, outcome.content)


    async def _journaled_tool(self, action: RunTool) -> ToolOutcome:
        """Run the tool, or replay its journaled outcome; a non-idempotent tool's start is written first."""
        ctx, call, journal = self.ctx, action.call, self.ctx.journal
        if journal is None:
            return await invoke_tool(action.tool, call.arguments, approver=ctx.approver)
        position, fingerprint = self._position(call), tool_hash(call.name, call.arguments)
        outcome = journal.replay.tool(self.frame.key, self.turns, position, fingerprint)
        if outcome is not None:
            return outcome
        if not tool_idempotent(action.tool, ctx.config.tools):
            await journal.write_now(JournalEntry(EntryKey(self.frame.key, self.turns, "tool_start", position),
                                                 fingerprint, {"tool": call.name, "arguments": call.arguments}))
        outcome = await invoke_tool(action.tool, call.arguments, approver=ctx.approver)
        journal.write(JournalEntry(EntryKey(self.frame.key, self.turns, "tool", position), fingerprint,
                                   {"ok": outcome.ok, "content": outcome.content, "error": outcome.error}))
        return outcome


async def run_agent(ctx: RunContext, frame: AgentFrame, task: str) -> WorkerOutcome:
    """Run ``frame``'s agent on ``task`` until an agent answers, following handoffs.

    The outcome's usage and cost are read from the ledgers of every agent that held the conversation.
    """
    frames = [frame]
    loop = AgentLoop(ctx, frame)
    outcome = await loop.run(task, ctx.thread.history_for(frame, task) if ctx.thread is not None else ())
    while isinstance(outcome, HandOff):
        ctx.result.handoffs.append({"from": frame.name, "to": outcome.target, "agent_path": list(frame.path)})
        frame = frame.handed_to(ctx, outcome.target)
        frames.append(frame)
        history = loop.messages
        loop = AgentLoop(ctx, frame)
        outcome = await loop.run(None, history=history)
    if frame.depth == 0:
        ctx.result.answered_by = frame.name
    elif ctx.thread is not None:
        ctx.thread.remember(frames[0], task, outcome)
    usage = sum((f.ledger.own.usage for f in frames), Usage())
    return replace(outcome, usage=usage, cost=sum(f.ledger.own.cost for f in frames))


__all__ = ["AgentLoop", "EmptyAnswer", "run_agent"]
