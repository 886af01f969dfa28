"""One agent's loop: model call → tool calls → results → again, until it answers.

Each turn ends in one of three small types, handled in one place:
:class:`FinalOutput` (the agent answered), :class:`RunAgain` (tool results
were added; call the model again) or :class:`OutOfBudget` (a limit was
reached; the agent gets one last turn without tools).
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from typing import Any

from teamrun.engine.delegation import (
    DELEGATE_TASK,
    Delegator,
    WorkerOutcome,
    delegation_targets,
    delegation_tools,
    is_delegation_tool,
    results_for_model,
    workers_of,
)
from teamrun.engine.prompts import system_prompt
from teamrun.engine.runtime import AgentFrame, RunContext
from teamrun.errors import ModelError
from teamrun.llm.types import Message, ModelReply, ToolCall, ToolSchema, Usage, parse_arguments
from teamrun.tools.invoke import invoke_tool

LAST_TURN_NOTE = (
    "STOP: {reason} has been reached. You cannot call tools or delegate any more. "
    "Answer now with what you have verified, and list plainly what is still missing."
)


@dataclass(frozen=True)
class FinalOutput:
    text: str


@dataclass(frozen=True)
class RunAgain:
    pass


@dataclass(frozen=True)
class OutOfBudget:
    reason: str


NextStep = FinalOutput | RunAgain | OutOfBudget


class AgentLoop:
    """Runs one agent frame to its answer."""

    def __init__(self, ctx: RunContext, frame: AgentFrame) -> None:
        self.ctx = ctx
        self.frame = frame
        self.agent = ctx.agent(frame.name)
        self.settings = ctx.settings_for(frame.name)
        self.delegator = Delegator(ctx, frame, run_agent)
        self.tool_names = list(self.agent.tools or [])
        self.tool_schemas: list[ToolSchema] = [
            *delegation_tools(ctx, frame.name),
            *(ctx.tools[name].spec.as_openai() for name in self.tool_names),
        ]
        self.usage = Usage()
        self.cost = 0.0
        self.messages: list[Message] = []

    # -- the loop ------------------------------------------------------------------------

    async def run(self, task: str) -> WorkerOutcome:
        ctx, frame = self.ctx, self.frame
        self.messages = [
            {"role": "system", "content": self._system_prompt()},
            {"role": "user", "content": task},
        ]
        ctx.spend(frame.name).invocations += 1
        frame.emit(ctx, "agent_start", model=self.settings.model, task=task)
        status, stopped_by, text = "ok", None, ""
        try:
            while True:
                step = await self._step()
                if isinstance(step, FinalOutput):
                    text = step.text
                    break
                if isinstance(step, OutOfBudget):
                    status, stopped_by = "budget_exhausted", step.reason
                    text = await self._last_turn(step.reason)
                    break
        finally:
            frame.emit(ctx, "agent_end", status=status if text or status != "ok" else "ok",
                       usage=self.usage.as_dict(), cost=self.cost, stopped_by=stopped_by)
        return WorkerOutcome(text, status, self.usage, self.cost, self.messages, stopped_by)

    async def _step(self) -> NextStep:
        reason = self.frame.stop_reason or self.frame.ledger.check_before_model_call()
        if reason is not None:
            return OutOfBudget(reason)
        reply = await self._call_model(self.tool_schemas)
        self.messages.append(reply.as_message())
        if not reply.tool_calls:
            return FinalOutput(reply.text or "")
        contents = await self._run_tool_calls(reply.tool_calls)
        for call, content in zip(reply.tool_calls, contents, strict=True):
            self.messages.append({"role": "tool", "tool_call_id": call.id, "content": content})
        return RunAgain()

    async def _last_turn(self, reason: str) -> str:
        self.messages.append({"role": "user", "content": LAST_TURN_NOTE.format(reason=reason)})
        self.frame.emit(self.ctx, "budget", reason=reason)
        reply = await self._call_model(())
        self.messages.append(reply.as_message())
        return reply.text or ""

    def _system_prompt(self) -> str:
        return system_prompt(
            self.frame.name,
            self.agent,
            workers=workers_of(self.ctx, self.frame.name),
            template_context=self.ctx.template_context(self.frame.name),
        )

    # -- model calls -----------------------------------------------------------------------

    async def _call_model(self, tools: Any) -> ModelReply:
        ctx, frame = self.ctx, self.frame
        span = ctx.bus.new_span_id()
        frame.emit(ctx, "llm_start", span_id=span, model=self.settings.model, messages=len(self.messages))
        try:
            reply = await ctx.model.complete(self.messages, settings=self.settings, tools=list(tools))
        except ModelError as exc:
            frame.emit(ctx, "llm_end", span_id=span, status="error", error=str(exc))
            raise ModelError(f"{frame.name}: {exc}") from exc
        frame.ledger.charge_model(reply.usage, reply.cost_usd)
        ctx.record_model_use(frame.name, reply.usage, reply.cost_usd)
        self.usage = self.usage + reply.usage
        self.cost += reply.cost_usd
        frame.emit(ctx, "llm_end", span_id=span, status="ok", usage=reply.usage.as_dict(),
                   cost=reply.cost_usd, tool_calls=[c.name for c in reply.tool_calls])
        return reply

    # -- tool calls ------------------------------------------------------------------------

    async def _run_tool_calls(self, calls: tuple[ToolCall, ...]) -> list[str]:
        """Run one turn's tool calls concurrently; the contents come back in call order."""
        async with asyncio.TaskGroup() as group:
            runs = [group.create_task(self._one_call(call)) for call in calls]
        return [run.result() for run in runs]

    async def _one_call(self, call: ToolCall) -> str:
        if is_delegation_tool(self.ctx, self.frame.name, call.name):
            return await self._delegate(call)
        if call.name in self.tool_names:
            return await self._tool(call)
        available = [s["function"]["name"] for s in self.tool_schemas]
        return f"Error: there is no tool named '{call.name}'. Available tools: {', '.join(available) or 'none'}."

    async def _delegate(self, call: ToolCall) -> str:
        try:
            arguments = parse_arguments(call.arguments)
            targets = delegation_targets(self.ctx, self.frame, call.name, arguments)
            task = arguments.get("task")
            if not isinstance(task, str) or not task.strip():
                raise ValueError("'task' must be a non-empty string describing the sub-task")
        except ValueError as exc:
            return f"Error: {exc}. Call {call.name} again with corrected arguments."
        context = arguments.get("context") if isinstance(arguments.get("context"), str) else None
        results = await self.delegator.delegate(targets, task, context)
        return results_for_model(results, single=call.name != DELEGATE_TASK)

    async def _tool(self, call: ToolCall) -> str:
        ctx, frame = self.ctx, self.frame
        reached = frame.ledger.check_before_tool_call()
        if reached is not None:
            frame.stop_reason = reached
            return f"Error: {reached} reached; this call was not run. Answer with what you have."
        frame.ledger.charge("tool_calls")
        ctx.spend(frame.name).tool_calls += 1
        span = ctx.bus.new_span_id()
        frame.emit(ctx, "tool_start", span_id=span, tool=call.name)
        outcome = await invoke_tool(ctx.tools[call.name], call.arguments, approver=ctx.approver)
        frame.emit(ctx, "tool_end", span_id=span, tool=call.name, status="ok" if outcome.ok else "error",
                   error=outcome.error, chars=len(outcome.content))
        return outcome.content


async def run_agent(ctx: RunContext, frame: AgentFrame, task: str) -> WorkerOutcome:
    """Run ``frame``'s agent on ``task`` until it answers (or runs out of budget)."""
    return await AgentLoop(ctx, frame).run(task)


__all__ = ["AgentLoop", "FinalOutput", "NextStep", "OutOfBudget", "RunAgain", "json", "run_agent"]
