"""One agent's loop: model call → tool calls → results → again, until it answers.

Each turn ends in one of a few small types, handled in one place:
:class:`FinalOutput` (the agent answered), :class:`RunAgain` (tool results
were added; call the model again), :class:`Stop` (a limit was reached or a
hook said stop; the agent gets one last turn without tools) or
:class:`HandOff` (control and the conversation pass to another agent).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, replace

import structlog

from teamrun.config.tool_names import DELEGATE_TASK, handoff_tool_name
from teamrun.engine.delegation import Delegator, WorkerOutcome
from teamrun.engine.delegation_tools import (
    delegation_tools,
    is_delegation_tool,
    parse_request,
    results_for_model,
    workers_of,
)
from teamrun.engine.hooks import HookFailed, HookRunner, iteration_context
from teamrun.engine.prompts import system_prompt
from teamrun.engine.runtime import AgentFrame, RunContext, run_all
from teamrun.engine.structured import OutputChecker
from teamrun.errors import ModelError
from teamrun.llm.types import (
    CallScope,
    Message,
    ModelReply,
    ToolCall,
    ToolSchema,
    Usage,
    current_scope,
    parse_arguments,
)
from teamrun.tools.base import Tool
from teamrun.tools.invoke import invoke_tool
from teamrun.tools.mcp.table import expand_tools

LAST_TURN_NOTE = (
    "STOP: {reason}. You cannot call tools or delegate any more. "
    "Answer now with what you have verified, and list plainly what is still missing."
)


@dataclass(frozen=True)
class FinalOutput:
    text: str


@dataclass(frozen=True)
class RunAgain:
    pass


@dataclass(frozen=True)
class Stop:
    reason: str
    budget: bool = True
    """True when a limit stopped the agent (the run then ends ``budget_exhausted``)."""


@dataclass(frozen=True)
class HandOff:
    target: str
    messages: Sequence[Message]
    usage: Usage
    cost: float


NextStep = FinalOutput | RunAgain | Stop | HandOff


class AgentLoop:
    """Runs one agent frame to its answer (or to a handoff)."""

    def __init__(self, ctx: RunContext, frame: AgentFrame) -> None:
        self.ctx = ctx
        self.frame = frame
        self.agent = ctx.agent(frame.name)
        self.settings = ctx.settings_for(frame.name)
        self.delegator = Delegator(ctx, frame, run_agent)
        self.hooks = HookRunner(ctx, frame)
        self.output = OutputChecker.for_agent(frame.name, self.agent)
        self.tool_names = list(self.agent.tools or [])
        self.handoffs = {handoff_tool_name(name): name for name in self.agent.handoffs or []}
        self.tool_schemas: list[ToolSchema] = [
            *delegation_tools(ctx, frame.name),
            *(_handoff_schema(tool, ctx.agent(target).description) for tool, target in self.handoffs.items()),
        ]
        self.tools: dict[str, Tool] = {}
        """The agent's functions by the name the model sees (MCP entries expanded in :meth:`run`)."""
        self.usage = Usage()
        self.cost = 0.0
        self.messages: list[Message] = []
        self.handoff_to: str | None = None
        self.turns = 0

    # -- the loop ------------------------------------------------------------------------

    async def run(self, task: str | None, history: Sequence[Message] = ()) -> WorkerOutcome | HandOff:
        """Start on ``task``, or take over ``history`` after a handoff."""
        ctx, frame = self.ctx, self.frame
        system = {"role": "system", "content": self._system_prompt()}
        if history:
            self.messages = [system, *(m for m in history if m.get("role") != "system")]
        else:
            self.messages = [system, {"role": "user", "content": task or ""}]
        ctx.spend(frame.name).invocations += 1
        taken = [s["function"]["name"] for s in self.tool_schemas]
        self.tools = await expand_tools(ctx.tools, self.tool_names, agent=frame.name, taken=taken)
        self.tool_schemas += [tool.spec.as_openai() for tool in self.tools.values()]
        structlog.contextvars.bind_contextvars(agent=frame.name, agent_path="/".join(frame.path))
        frame.emit(ctx, "agent_start", model=self.settings.model, task=task or "(handoff)")
        status, stopped_by, text = "error", None, ""
        try:
            while True:
                step = await self._step()
                if isinstance(step, HandOff):
                    status = "handed_off"
                    return step
                if isinstance(step, FinalOutput):
                    status, text = "ok", step.text
                    break
                if isinstance(step, Stop):
                    text = await self._last_turn(step.reason)
                    status = "budget_exhausted" if step.budget else "ok"
                    stopped_by = step.reason if step.budget else None
                    break
        except asyncio.CancelledError:
            status = "cancelled"
            raise
        finally:
            frame.emit(ctx, "agent_end", status=status, usage=self.usage.as_dict(), cost=self.cost,
                       stopped_by=stopped_by)
        return WorkerOutcome(text, status, self.usage, self.cost, self.messages, stopped_by)

    async def _step(self) -> NextStep:
        frame = self.frame
        reason = frame.stop_reason or frame.ledger.check_before_model_call()
        if reason is not None:
            return Stop(reason, frame.stop_is_budget if frame.stop_reason else True)
        self._add_feedback()
        reply = await self._call_model(self.tool_schemas)
        self.messages.append(reply.as_message())
        if not reply.tool_calls:
            return self._checked_answer(reply.text or "")
        contents = await self._run_tool_calls(reply.tool_calls)
        for call, content in zip(reply.tool_calls, contents, strict=True):
            self.messages.append({"role": "tool", "tool_call_id": call.id, "content": content})
        if self.delegator.bailed is not None:
            return FinalOutput(self.delegator.bailed.response)
        if self.handoff_to is not None:
            return HandOff(self.handoff_to, self.messages, self.usage, self.cost)
        await self._after_iteration()
        return RunAgain()

    def _checked_answer(self, text: str) -> NextStep:
        if self.output is None:
            return FinalOutput(text)
        verdict = self.output.check(text)
        if verdict.ok:
            return FinalOutput(verdict.text)
        self.messages.append({"role": "user", "content": verdict.repair_prompt})
        return RunAgain()

    async def _after_iteration(self) -> None:
        if not self.hooks.has("on_iteration"):
            return
        try:
            actions = await self.hooks.run("on_iteration", iteration_context(self.ctx, self.frame, self.messages))
        except HookFailed as exc:
            self.frame.stop(str(exc), budget=False)
            return
        self.frame.feedback.extend(actions.feedback)
        if actions.stop:
            self.frame.stop("an on_iteration hook asked to stop", budget=False)

    def _add_feedback(self) -> None:
        if self.frame.feedback:
            notes = "\n".join(f"- {note}" for note in self.frame.feedback)
            self.messages.append({"role": "user", "content": f"Feedback on the work so far:\n{notes}"})
            self.frame.feedback.clear()

    async def _last_turn(self, reason: str) -> str:
        self.messages.append({"role": "user", "content": LAST_TURN_NOTE.format(reason=_reached(reason))})
        self.frame.emit(self.ctx, "budget", reason=reason)
        reply = await self._call_model(())
        self.messages.append(reply.as_message())
        return reply.text or ""

    def _system_prompt(self) -> str:
        return system_prompt(
            self.frame.name,
            self.agent,
            workers=workers_of(self.ctx, self.frame.name),
            template_context=self.ctx.template_context(self.frame.name, self.frame.context),
        )

    # -- model calls -----------------------------------------------------------------------

    async def _call_model(self, tools: Sequence[ToolSchema]) -> ModelReply:
        ctx, frame = self.ctx, self.frame
        span = ctx.bus.new_span_id()
        frame.emit(ctx, "llm_start", span_id=span, model=self.settings.model, messages=len(self.messages))
        self.turns += 1
        scope = current_scope.set(CallScope(frame.path, self.turns, span, ctx.bus.run_id))
        try:
            reply = await ctx.model.complete(
                self.messages, settings=self.settings, tools=list(tools),
                response_format=self.output.response_format if self.output else None,
            )
        except ModelError as exc:
            frame.emit(ctx, "llm_end", span_id=span, status="error", error=str(exc))
            raise ModelError(f"{frame.name}: {exc}") from exc
        finally:
            current_scope.reset(scope)
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
        return await run_all(self._one_call(call) for call in calls)

    async def _one_call(self, call: ToolCall) -> str:
        if is_delegation_tool(self.ctx, self.frame.name, call.name):
            return await self._delegate(call)
        if call.name in self.handoffs:
            return self._hand_off(self.handoffs[call.name])
        if call.name in self.tools:
            return await self._tool(call)
        available = [s["function"]["name"] for s in self.tool_schemas]
        return f"Error: there is no tool named '{call.name}'. Available tools: {', '.join(available) or 'none'}."

    async def _delegate(self, call: ToolCall) -> str:
        try:
            request = parse_request(self.ctx, self.frame, call.name, parse_arguments(call.arguments))
        except ValueError as exc:
            return f"Error: {exc}. Call {call.name} again with corrected arguments."
        results = await self.delegator.delegate(request, self.messages)
        return results_for_model(results, single=call.name != DELEGATE_TASK)

    def _hand_off(self, target: str) -> str:
        if self.handoff_to is not None:
            return f"Ignored: control already passes to {self.handoff_to}."
        reached = self.frame.ledger.check_before_handoff()
        if reached is not None:
            self.frame.stop(reached)
            return f"Error: {reached} reached; no more transfers. Answer the user yourself."
        self.frame.ledger.charge("handoffs")
        self.handoff_to = target
        return f"Transferred to {target}: it now answers the user."

    async def _tool(self, call: ToolCall) -> str:
        ctx, frame = self.ctx, self.frame
        reached = frame.ledger.check_before_tool_call()
        if reached is not None:
            frame.stop(reached)
            return f"Error: {reached} reached; this call was not run. Answer with what you have."
        frame.ledger.charge("tool_calls")
        ctx.spend(frame.name).tool_calls += 1
        span = ctx.bus.new_span_id()
        frame.emit(ctx, "tool_start", span_id=span, tool=call.name)
        outcome = await invoke_tool(self.tools[call.name], call.arguments, approver=ctx.approver)
        frame.emit(ctx, "tool_end", span_id=span, tool=call.name, status="ok" if outcome.ok else "error",
                   error=outcome.error, chars=len(outcome.content))
        return outcome.content


def _reached(reason: str) -> str:
    return f"{reason} has been reached" if reason.endswith(")") else reason


def _handoff_schema(tool: str, description: str | None) -> ToolSchema:
    target = tool.removeprefix("transfer_to_")
    return {
        "type": "function",
        "function": {
            "name": tool,
            "description": f"Hand the conversation to {target}, who then answers the user. {description or ''}".strip(),
            "parameters": {"type": "object", "properties": {
                "reason": {"type": "string", "description": "Why this agent should take over."}},
                "additionalProperties": False},
        },
    }


async def run_agent(ctx: RunContext, frame: AgentFrame, task: str) -> WorkerOutcome:
    """Run ``frame``'s agent on ``task`` until an agent answers, following handoffs."""
    usage, cost = Usage(), 0.0
    outcome = await AgentLoop(ctx, frame).run(task)
    while isinstance(outcome, HandOff):
        usage, cost = usage + outcome.usage, cost + outcome.cost
        frame = frame.handed_to(ctx, outcome.target)
        outcome = await AgentLoop(ctx, frame).run(None, history=outcome.messages)
    return replace(outcome, usage=outcome.usage + usage, cost=outcome.cost + cost)


__all__ = ["AgentLoop", "FinalOutput", "HandOff", "NextStep", "RunAgain", "Stop", "run_agent"]
