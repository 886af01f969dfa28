"""Delegation: the tools a supervisor gets for its workers, and running those workers.

Delegation is a tool call. ``per_agent`` gives one ``ask_<worker>`` tool per
worker; ``delegate_task`` one tool whose ``agents`` argument is an enum of the
allowed names. Several targets, and several delegation calls in one model
turn, run concurrently under the delegating agent's ``max_concurrency``; one
failing never loses the others' results.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

import structlog

from teamrun.config.models import Delegation, Limits
from teamrun.engine.filters import FilterFailed, as_context_block, filter_messages
from teamrun.engine.hooks import (
    HookActions,
    HookContext,
    HookFailed,
    HookRunner,
    complete_context,
    start_context,
)
from teamrun.engine.prompts import WorkerInfo, delegation_tool_name
from teamrun.engine.references import REFS_PARAMETER, RefRequest, parse_requests, render_blocks
from teamrun.engine.result import DelegationResult, DelegationStatus
from teamrun.engine.runtime import AgentFrame, RunContext, max_steps_for
from teamrun.errors import RunError
from teamrun.llm.types import Message, ToolSchema, Usage

_log = structlog.get_logger(__name__)

DELEGATE_TASK = "delegate_task"
_TASK = {"type": "string", "description": "The sub-task, with everything the worker needs: it sees nothing else."}
_CONTEXT = {"type": "string", "description": "Optional background from your conversation to pass along."}


@dataclass(frozen=True)
class WorkerOutcome:
    """What running a worker produced (returned by the agent loop)."""

    text: str
    status: str  # "ok" | "budget_exhausted"
    usage: Usage
    cost: float
    messages: Sequence[dict[str, Any]]
    stopped_by: str | None = None


@dataclass(frozen=True)
class DelegationRequest:
    """One delegation call, parsed: who, what, and what to hand along."""

    targets: list[str]
    task: str
    context: str | None = None
    refs: tuple[RefRequest, ...] = ()
    max_tool_calls: int | None = None


AgentRunner = Callable[[RunContext, AgentFrame, str], Awaitable[WorkerOutcome]]
"""``run_agent(ctx, frame, task)`` — passed in to avoid an import cycle with the loop."""


def delegation_settings(ctx: RunContext, agent: str) -> Delegation:
    return ctx.agent(agent).delegation or Delegation()


def workers_of(ctx: RunContext, agent: str) -> list[WorkerInfo]:
    return [
        WorkerInfo(name, ctx.agent(name).description or f"The {name} agent.", delegation_tool_name(name))
        for name in ctx.agent(agent).delegates_to or []
    ]


_MAX_TOOL_CALLS = {"type": "integer", "minimum": 0,
                   "description": "Optional cap on the tool calls the worker may make for this task."}


def delegation_tools(ctx: RunContext, agent: str) -> list[ToolSchema]:
    """The delegation tools offered to ``agent`` (none when it has no workers)."""
    workers = workers_of(ctx, agent)
    if not workers:
        return []
    settings = delegation_settings(ctx, agent)
    extra: dict[str, Any] = {"max_tool_calls": _MAX_TOOL_CALLS}
    if settings.result_references:
        extra["context_from_refs"] = REFS_PARAMETER
    if settings.tool == "delegate_task":
        names = [w.name for w in workers]
        listing = "; ".join(f"{w.name}: {w.description}" for w in workers)
        return [_function(
            DELEGATE_TASK,
            f"Delegate a sub-task to one or more workers (each runs it separately, in parallel). {listing}",
            {
                "task": _TASK,
                "agents": {"type": "array", "items": {"type": "string", "enum": names}, "minItems": 1,
                           "description": "Which workers should do this task."},
                "context": _CONTEXT,
                **extra,
            },
            ["task", "agents"],
        )]
    return [_function(w.tool, w.description, {"task": _TASK, "context": _CONTEXT, **extra}, ["task"])
            for w in workers]


def _function(name: str, description: str, properties: dict[str, Any], required: list[str]) -> ToolSchema:
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": {"type": "object", "properties": properties, "required": required,
                           "additionalProperties": False},
        },
    }


def parse_request(ctx: RunContext, frame: AgentFrame, tool: str, arguments: dict[str, Any]) -> DelegationRequest:
    """A delegation call's arguments, checked. Raises ``ValueError`` with a message for the model."""
    targets = delegation_targets(ctx, frame, tool, arguments)
    task = arguments.get("task")
    if not isinstance(task, str) or not task.strip():
        raise ValueError("'task' must be a non-empty string describing the sub-task")
    context = arguments.get("context") if isinstance(arguments.get("context"), str) else None
    cap = arguments.get("max_tool_calls")
    cap = cap if isinstance(cap, int) and not isinstance(cap, bool) and cap >= 0 else None
    return DelegationRequest(targets, task, context or None, tuple(parse_requests(arguments.get("context_from_refs"))),
                             cap)


def delegation_targets(ctx: RunContext, frame: AgentFrame, tool: str, arguments: dict[str, Any]) -> list[str]:
    """Which workers a delegation call names; invented names are dropped with a warning.

    Raises ``ValueError`` (a message for the model) when no allowed worker is named.
    """
    allowed = list(ctx.agent(frame.name).delegates_to or [])
    if tool != DELEGATE_TASK:
        return [tool.removeprefix("ask_")]
    requested = arguments.get("agents")
    if isinstance(requested, str):
        requested = [requested]
    if not isinstance(requested, list) or not requested:
        raise ValueError(f"'agents' must list one or more of: {', '.join(allowed)}")
    targets: list[str] = []
    for name in requested:
        if name in allowed:
            if name not in targets:
                targets.append(name)
        else:
            ctx.warn(frame, f"{frame.name} asked for unknown agent '{name}'; ignored (allowed: {', '.join(allowed)})")
    if not targets:
        raise ValueError(f"none of {requested} is a worker you can delegate to; choose from: {', '.join(allowed)}")
    return targets


def is_delegation_tool(ctx: RunContext, agent: str, tool: str) -> bool:
    workers = ctx.agent(agent).delegates_to or []
    if delegation_settings(ctx, agent).tool == "delegate_task":
        return tool == DELEGATE_TASK and bool(workers)
    return tool.startswith("ask_") and tool.removeprefix("ask_") in workers


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
        async with asyncio.TaskGroup() as group:
            runs = [group.create_task(self._one(target, request, parent_messages)) for target in request.targets]
        return [run.result() for run in runs]

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
            done, messages = await self._run(worker, prompt, request, actions, result)
        return await self._complete(done, start, messages)

    def _refusal(self, worker: str) -> str | None:
        ctx, parent = self.ctx, self.frame
        max_depth = ctx.config.limits.max_depth if ctx.config.limits else None
        if max_depth is not None and parent.depth + 1 > max_depth:
            return f"limits.max_depth ({max_depth}) reached: {worker} cannot be delegated to from here"
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
                   result: Callable[..., DelegationResult]) -> tuple[DelegationResult, Sequence[Message]]:
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
            name=worker, path=(*parent.path, worker), span_id=span, parent_span_id=parent.span_id,
            ledger=parent.ledger.child(budget, label=f"agents.{worker}.budget", max_steps=steps),
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
        except Exception as exc:  # a bug in user code or ours must not lose the siblings
            _log.exception("worker_crashed", worker=worker)
            done = result("error", error=f"{type(exc).__name__}: {exc}")
        else:
            if outcome is None:
                done = result("budget_exhausted", error=f"agents.{worker}.budget.timeout_s ({timeout}) reached")
                self._span_end(done, span)
                return done, messages
            response = outcome.text if self.settings.output_mode == "last_message" else transcript(outcome.messages)
            status: DelegationStatus = "ok" if outcome.status == "ok" else "budget_exhausted"
            done = result(status, response, usage=outcome.usage, cost=outcome.cost, error=outcome.stopped_by)
            messages = outcome.messages
        self._span_end(done, span)
        return done, messages

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
                        messages: Sequence[Message]) -> DelegationResult:
        """``on_complete`` hooks and the result reference; then the record is kept."""
        if self.hooks.has("on_complete"):
            context = complete_context(start, success=done.status == "ok", error=done.error,
                                       result=done.response, messages=messages)
            try:
                actions = await self.hooks.run("on_complete", context)
            except HookFailed as exc:
                return self._finish(replace(done, status="error", error=str(exc)))
            self.frame.feedback.extend(actions.feedback)
            if actions.result_text is not None:
                done = replace(done, response=actions.result_text)
            if actions.bail:
                done = replace(done, bailed=True)
                self.bailed = self.bailed or done
        if self.settings.result_references and done.status == "ok" and done.response.strip():
            done = replace(done, ref=self.ctx.refs.add(done.agent, done.response))
        return self._finish(done)

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


def results_for_model(results: list[DelegationResult], *, single: bool) -> str:
    shown: Any = results[0].for_model() if single and len(results) == 1 else [r.for_model() for r in results]
    return json.dumps(shown, ensure_ascii=False, indent=1)
