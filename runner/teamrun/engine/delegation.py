"""Running delegations: each worker in its own context, concurrently, nothing lost.

Several targets, and several delegation calls in one model turn, run
concurrently under the delegating agent's ``max_concurrency`` (one at a time
with ``parallel: false``); one failing never loses the others' results.
Around each worker run: refusal checks, ``on_start`` hooks, the prompt,
``on_complete`` hooks and a result reference.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from teamrun.config.models import Limits
from teamrun.engine.delegation_tools import DelegationRequest, delegation_settings
from teamrun.engine.filters import FilterFailed, as_context_block, filter_messages
from teamrun.engine.hooks import (
    HookActions,
    HookContext,
    HookFailed,
    HookRunner,
    complete_context,
    start_context,
)
from teamrun.engine.references import RefRequest, render_blocks
from teamrun.engine.result import DelegationResult, DelegationStatus
from teamrun.engine.runtime import AgentFrame, RunContext, max_steps_for, run_all
from teamrun.errors import RunError, UserError
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


AgentRunner = Callable[[RunContext, AgentFrame, str], Awaitable[WorkerOutcome]]
"""``run_agent(ctx, frame, task)`` — passed in to avoid an import cycle with the loop."""


class Delegator:
    """Runs the delegations of one agent frame, bounded by its ``max_concurrency``.

    Around each worker run: refusal checks (depth, delegation budget), ``on_start``
    hooks, the prompt (task, context, filtered parent conversation, referenced
    results), the run itself, ``on_complete`` hooks, and a result reference.
    """

    def __init__(self, ctx: RunContext, frame: AgentFrame, run_agent: AgentRunner) -> None:
        self.ctx = ctx
        self.frame = frame
        self.run_agent = run_agent
        self.settings = delegation_settings(ctx, frame.name)
        limit = self.settings.max_concurrency if self.settings.parallel else 1
        self.slots = asyncio.Semaphore(limit)
        self.hooks = HookRunner(ctx, frame)
        self.bailed: DelegationResult | None = None
        """Set when an ``on_complete`` hook bails: the loop ends with this result."""

    async def delegate(self, request: DelegationRequest, parent_messages: Sequence[Message]) -> list[DelegationResult]:
        """Run the request on each target concurrently; results come back in target order."""
        return await run_all(self._one(target, request, parent_messages) for target in request.targets)

    async def _one(
        self, worker: str, request: DelegationRequest, parent_messages: Sequence[Message]
    ) -> DelegationResult:
        parent = self.frame
        path = (*parent.path, worker)

        asked = [request.task]  # what the worker is asked; an on_start hook may rewrite it

        def result(status: DelegationStatus, response: str = "", **extra: Any) -> DelegationResult:
            return DelegationResult(worker, asked[0], status, response, parent=parent.name,
                                    agent_path=path, **extra)

        refused = self._refusal(worker)
        if refused is not None:
            return self._not_run(result("rejected", error=refused))
        start = start_context(self.ctx, parent, worker, request.task)
        try:
            actions = await self.hooks.run("on_start", start)
        except HookFailed as exc:
            return self._not_run(result("error", error=str(exc)))
        if actions.prompt is not None:
            asked[0] = actions.prompt
        if actions.reject is not None:
            return self._not_run(result("rejected", actions.reject, error="rejected by an on_start hook"))
        parent.ledger.charge("delegations")
        try:
            prompt = await self._prompt(worker, request, actions, parent_messages)
        except FilterFailed as exc:
            return self._not_run(result("error", error=str(exc)))
        async with self.slots:
            done, messages, span = await self._run(worker, prompt, request, actions, result)
        return await self._complete(done, start, messages, span)

    def _refusal(self, worker: str) -> str | None:
        parent = self.frame
        too_deep = parent.ledger.check_depth(parent.depth + 1)
        if too_deep is not None:
            return f"{too_deep} reached: {worker} cannot be delegated to from here"
        reached = parent.ledger.check_before_delegation()
        if reached is not None:
            parent.stop(reached)
            return f"{reached} reached; no more delegations. Answer with what you have."
        return None

    async def _prompt(self, worker: str, request: DelegationRequest, actions: HookActions,
                      parent_messages: Sequence[Message]) -> str:
        parts = [actions.prompt if actions.prompt is not None else request.task, *actions.append_prompt]
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

    async def _run(self, worker: str, prompt: str, request: DelegationRequest, actions: HookActions,
                   result: Callable[..., DelegationResult]) -> tuple[DelegationResult, Sequence[Message], str]:
        ctx, parent = self.ctx, self.frame
        span = ctx.bus.new_span_id()
        budget = ctx.agent(worker).budget
        if request.max_tool_calls is not None:
            current = budget.max_tool_calls if budget else None
            cap = request.max_tool_calls if current is None else min(current, request.max_tool_calls)
            budget = (budget or Limits()).model_copy(update={"max_tool_calls": cap})
        steps = max_steps_for(ctx.config, budget)
        if actions.max_steps is not None:
            steps = actions.max_steps if steps is None else min(steps, actions.max_steps)
        child = AgentFrame(
            name=worker, path=(*parent.path, worker), span_id=ctx.bus.new_span_id(), parent_span_id=span,
            ledger=parent.ledger.child(budget, label=f"agents.{worker}.budget", max_steps=steps,
                                       depth=parent.depth + 1),
            context=dict(actions.context),
        )
        parent.emit(ctx, "delegation_start", span_id=span, worker=worker, task=request.task)
        messages: Sequence[Message] = ()
        timeout = budget.timeout_s if budget is not None else None
        try:
            outcome = await self._run_within(timeout, child, prompt)
        except asyncio.CancelledError:
            self._finish(result("cancelled", error="cancelled"), span)
            raise
        except RunError as exc:
            done = result("error", error=str(exc))
        except UserError:
            raise  # the team file is wrong (a template that cannot render): stop and say so
        except Exception as exc:  # a bug in user code or ours must not lose the siblings
            _log.exception("worker_crashed", worker=worker)
            done = result("error", error=f"{type(exc).__name__}: {exc}")
        else:
            if outcome is None:
                done = result("budget_exhausted", error=f"agents.{worker}.budget.timeout_s ({timeout}) reached")
                return done, messages, span
            response = outcome.text if self.settings.output_mode == "last_message" else transcript(outcome.messages)
            status: DelegationStatus = "ok" if outcome.status == "ok" else "budget_exhausted"
            done = result(status, response, usage=outcome.usage, cost=outcome.cost, error=outcome.stopped_by)
            messages = outcome.messages
        return done, messages, span

    async def _run_within(self, timeout: float | None, child: AgentFrame, prompt: str) -> WorkerOutcome | None:
        """Run the worker; ``None`` when its own ``budget.timeout_s`` ran out."""
        deadline = asyncio.timeout(timeout)
        try:
            async with deadline:
                return await self.run_agent(self.ctx, child, prompt)
        except TimeoutError:
            if deadline.expired():
                return None
            raise

    async def _complete(self, done: DelegationResult, start: HookContext,
                        messages: Sequence[Message], span: str) -> DelegationResult:
        """``on_complete`` hooks and the result reference; then the record is kept and the span ends
        (so the ``delegation_end`` event carries what the delegating agent was actually given)."""
        if self.hooks.has("on_complete"):
            context = complete_context(start, success=done.status == "ok", error=done.error,
                                       result=done.response, messages=messages)
            try:
                actions = await self.hooks.run("on_complete", context)
            except HookFailed as exc:
                return self._finish(replace(done, status="error", error=str(exc)), span)
            self.frame.feedback.extend(actions.feedback)
            if actions.result_text is not None:
                done = replace(done, response=actions.result_text)
            if actions.bail:
                done = replace(done, bailed=True)
                self.bailed = self.bailed or done
        if self.settings.result_references and done.status == "ok" and done.response.strip():
            done = replace(done, ref=self.ctx.refs.add(done.agent, done.response))
        return self._finish(done, span)

    def _not_run(self, result: DelegationResult) -> DelegationResult:
        """A delegation refused before its worker started: still one start/end pair of events."""
        span = self.ctx.bus.new_span_id()
        self.frame.emit(self.ctx, "delegation_start", span_id=span, worker=result.agent, task=result.task)
        return self._finish(result, span)

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
