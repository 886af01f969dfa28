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
from dataclasses import dataclass
from typing import Any

import structlog

from teamrun.config.models import Delegation
from teamrun.engine.prompts import WorkerInfo, delegation_tool_name
from teamrun.engine.result import DelegationResult
from teamrun.engine.runtime import AgentFrame, RunContext
from teamrun.errors import RunError
from teamrun.llm.types import ToolSchema, Usage

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


AgentRunner = Callable[[RunContext, AgentFrame, str], Awaitable[WorkerOutcome]]
"""``run_agent(ctx, frame, task)`` — passed in to avoid an import cycle with the loop."""


def delegation_settings(ctx: RunContext, agent: str) -> Delegation:
    return ctx.agent(agent).delegation or Delegation()


def workers_of(ctx: RunContext, agent: str) -> list[WorkerInfo]:
    return [
        WorkerInfo(name, ctx.agent(name).description or f"The {name} agent.", delegation_tool_name(name))
        for name in ctx.agent(agent).delegates_to or []
    ]


def delegation_tools(ctx: RunContext, agent: str) -> list[ToolSchema]:
    """The delegation tools offered to ``agent`` (none when it has no workers)."""
    workers = workers_of(ctx, agent)
    if not workers:
        return []
    if delegation_settings(ctx, agent).tool == "delegate_task":
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
            },
            ["task", "agents"],
        )]
    return [_function(w.tool, w.description, {"task": _TASK, "context": _CONTEXT}, ["task"]) for w in workers]


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
    """Runs the delegations of one agent frame, bounded by its ``max_concurrency``."""

    def __init__(self, ctx: RunContext, frame: AgentFrame, run_agent: AgentRunner) -> None:
        self.ctx = ctx
        self.frame = frame
        self.run_agent = run_agent
        self.settings = delegation_settings(ctx, frame.name)
        limit = self.settings.max_concurrency if self.settings.parallel else 1
        self.slots = asyncio.Semaphore(limit)

    async def delegate(self, targets: list[str], task: str, context: str | None) -> list[DelegationResult]:
        """Run ``task`` on each target concurrently; results come back in target order."""
        async with asyncio.TaskGroup() as group:
            runs = [group.create_task(self._one(target, task, context)) for target in targets]
        return [run.result() for run in runs]

    async def _one(self, worker: str, task: str, context: str | None) -> DelegationResult:
        ctx, parent = self.ctx, self.frame
        refused = self._refusal(worker)
        if refused is not None:
            return self._finish(DelegationResult(worker, task, "rejected", "", error=refused,
                                                 parent=parent.name, agent_path=(*parent.path, worker)))
        parent.ledger.charge("delegations")
        async with self.slots:
            return await self._run(worker, task, context)

    def _refusal(self, worker: str) -> str | None:
        ctx, parent = self.ctx, self.frame
        max_depth = (ctx.config.limits.max_depth if ctx.config.limits else None)
        if max_depth is not None and parent.depth + 1 > max_depth:
            return f"limits.max_depth ({max_depth}) reached: {worker} cannot be delegated to from here"
        reached = parent.ledger.check_before_delegation()
        if reached is not None:
            parent.stop_reason = reached
            return f"{reached} reached; no more delegations. Answer with what you have."
        return None

    async def _run(self, worker: str, task: str, context: str | None) -> DelegationResult:
        ctx, parent = self.ctx, self.frame
        span = ctx.bus.new_span_id()
        path = (*parent.path, worker)
        budget = ctx.agent(worker).budget
        child = AgentFrame(
            name=worker,
            path=path,
            span_id=span,
            parent_span_id=parent.span_id,
            ledger=parent.ledger.child(budget, label=f"agents.{worker}.budget",
                                       max_steps=_steps(budget, ctx)),
        )
        prompt = task if not context else f"{task}\n\n## Context from {parent.name}\n{context}"
        parent.emit(ctx, "delegation_start", span_id=span, worker=worker, task=task)
        try:
            outcome = await self.run_agent(ctx, child, prompt)
        except asyncio.CancelledError:
            self._finish(DelegationResult(worker, task, "cancelled", "", error="cancelled",
                                          parent=parent.name, agent_path=path), span)
            raise
        except RunError as exc:
            return self._finish(DelegationResult(worker, task, "error", "", error=str(exc),
                                                 parent=parent.name, agent_path=path), span)
        except Exception as exc:  # a bug in user code or ours must not lose the siblings
            _log.exception("worker_crashed", worker=worker)
            return self._finish(DelegationResult(worker, task, "error", "", error=f"{type(exc).__name__}: {exc}",
                                                 parent=parent.name, agent_path=path), span)
        response = outcome.text if self.settings.output_mode == "last_message" else transcript(outcome.messages)
        status = "ok" if outcome.status == "ok" else "budget_exhausted"
        return self._finish(DelegationResult(
            worker, task, status, response, usage=outcome.usage, cost=outcome.cost,
            parent=parent.name, agent_path=path, error=outcome.stopped_by,
        ), span)

    def _finish(self, result: DelegationResult, span: str | None = None) -> DelegationResult:
        self.ctx.record_delegation(result)
        if span is not None:
            self.frame.emit(self.ctx, "delegation_end", span_id=span, worker=result.agent, status=result.status,
                            usage=result.usage.as_dict(), cost=result.cost, error=result.error)
        return result


def _steps(budget: Any, ctx: RunContext) -> int | None:
    if budget is not None and budget.max_steps is not None:
        return int(budget.max_steps)
    return ctx.config.limits.max_steps if ctx.config.limits else None


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
