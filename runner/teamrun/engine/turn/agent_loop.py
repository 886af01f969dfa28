"""One agent's loop: model call → turn plan → actions → next step, until it answers.

A turn: check the limits (:meth:`BudgetLedger.check_before_model_call`), call
the model with the agent's :class:`ToolTable` (:func:`call_model`), plan the
reply (:func:`plan_turn`), run the planned actions concurrently (each returns
a :class:`CallResult` with its signals), then :func:`next_step` picks one of
:class:`FinalOutput`, :class:`RunAgain`, :class:`Stop` (one last turn without
tools) or :class:`HandOff`. A turn returns the messages it adds; :meth:`AgentLoop.run`
is the one place they are appended. Workers are run by the
:class:`~teamrun.engine.delegation.delegator.Delegator`, which is given
:func:`run_agent` to run them with.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Coroutine, Sequence
from dataclasses import dataclass, replace
from typing import Any, TypeVar

import structlog

from teamrun.defaults import DEFAULT_MAX_TOKENS
from teamrun.engine.delegation.delegator import Delegator
from teamrun.engine.delegation.hooks import HookFailed, HookRunner, iteration_context
from teamrun.engine.delegation.records import WorkerOutcome
from teamrun.engine.delegation.tools import workers_of
from teamrun.engine.limits.ledger import LimitReached, counters_of
from teamrun.engine.runtime import AgentFrame, RunContext, run_all
from teamrun.engine.turn.acceptance import Acceptance
from teamrun.engine.turn.actions import run_action
from teamrun.engine.turn.model_call import ModelCall, call_model
from teamrun.engine.turn.prompts import system_prompt
from teamrun.engine.turn.structured import OutputChecker
from teamrun.engine.turn.tool_table import ToolTable, build_tool_table
from teamrun.engine.turn.turn_plan import (
    FinalOutput,
    HandOff,
    NextStep,
    RunAgain,
    Stop,
    ends_turn,
    next_step,
    plan_turn,
)
from teamrun.errors import ModelError
from teamrun.llm.types import Message, ModelReply, ModelSettings, ToolCall, ToolSchema, Usage

LAST_TURN_NOTE = (
    "STOP: {reason}. You cannot call tools or delegate any more. "
    "Answer now with what you have verified, and list plainly what is still missing."
)
CONTINUE_NOTE = "Your answer was cut off. Continue exactly where it stopped; do not repeat anything."
EMPTY_NOTE = "Your reply was empty. Reply with your final answer."
T = TypeVar("T")
LAST_TURN_MIN_TOKENS = 200
"""The last turn may always write this many tokens, even when a token or cost limit is already used up."""


class EmptyAnswer(ModelError):
    """An agent's final answer was empty, also when asked once more."""


@dataclass(frozen=True)
class Turn:
    """What one turn added to the conversation, and what comes next."""

    messages: list[Message]
    next: NextStep


class AgentLoop:
    """Runs one agent frame to its answer (or to a handoff)."""

    def __init__(self, ctx: RunContext, frame: AgentFrame) -> None:
        self.ctx = ctx
        self.frame = frame
        self.agent = ctx.agent(frame.name)
        self.counters = counters_of(self.agent)
        """The counted limits this agent's work spends on: one used up elsewhere stops it too."""
        self.settings = ctx.settings_for(frame.name)
        self.delegator = Delegator(ctx, frame, lambda child, task: run_agent(ctx, child, task))
        self.hooks = HookRunner(ctx, frame)
        self.output = OutputChecker.for_agent(frame.name, self.agent)
        self.acceptance = Acceptance.for_frame(ctx, frame)
        """The ``accept:`` checks of this agent's answers (``None``: it has none)."""
        self.messages: list[Message] = []
        """The conversation: appended to only in :meth:`run`, from what each turn returns."""
        self.turns = 0
        self.asked_again = False
        """Whether an empty answer was already met with one more request."""
        self.finish_reason: str | None = None
        """Why the latest model call ended."""
        self.calls: tuple[ToolCall, ...] = ()
        """The tool calls of the latest reply (their positions name journal entries and workers)."""

    # -- the loop ------------------------------------------------------------------------

    async def run(self, task: str | None, history: Sequence[Message] = ()) -> WorkerOutcome | HandOff:
        """Start on ``task``, or take over ``history`` after a handoff."""
        ctx, frame = self.ctx, self.frame
        base_prompt = system_prompt(
            frame.name,
            self.agent,
            workers=workers_of(ctx.config, frame.name),
            template_context=ctx.template_context(frame.name, frame.context),
        )
        earlier = [m for m in history if m.get("role") != "system"] or [{"role": "user", "content": task or ""}]
        self.messages = [{"role": "system", "content": base_prompt}, *earlier]
        if self.acceptance is not None:
            self.acceptance.task = (
                task
                if task is not None
                else next((str(m.get("content") or "") for m in history if m.get("role") == "user"), "")
            )
        structlog.contextvars.bind_contextvars(agent=frame.name, agent_path="/".join(frame.path))
        frame.emit(ctx, "agent_start", model=self.settings.model, task=task or "(handoff)")
        status, stopped_by, text, accepted = "error", None, "", None
        try:
            # starts the tool sources it declares; a narrowed task leaves out the others
            table = await build_tool_table(ctx.config, ctx.tools, ctx.sources, frame.name, allowed=frame.allowed_tools)
            while True:
                ledger = self.delegator.tasks.summary()  # kept current at the end of the system prompt
                self.messages[0] = {
                    "role": "system",
                    "content": f"{base_prompt}\n\n{ledger}" if ledger else base_prompt,
                }
                turn = await self._step(table)
                self.messages.extend(turn.messages)
                step = turn.next
                if isinstance(step, HandOff):
                    status = "handed_off"
                    return step
                if isinstance(step, FinalOutput | Stop):
                    break
            if isinstance(step, Stop):
                last = await self._last_turn(step)
                self.messages.extend(last.messages)
                assert isinstance(last.next, FinalOutput)
                text, status = last.next.text, "budget_exhausted" if step.budget else "ok"
                stopped_by = step.reason if step.budget else None
            else:
                status, text = "ok", step.text
            if self.acceptance is not None:
                accepted = self.acceptance.finish(stopped_by or (step.reason if isinstance(step, Stop) else None))
        except asyncio.CancelledError:
            status = "waiting" if ctx.activity.stuck.is_set() else "cancelled"  # suspended for a person
            raise
        finally:
            await self.delegator.background.cancel_all()  # only still running if the agent did not answer
            if status != "handed_off":
                self.delegator.tasks.close()
            own = frame.ledger.own
            frame.emit(ctx, "agent_end", status=status, usage=own.usage.as_dict(), cost=own.cost, stopped_by=stopped_by)
        return WorkerOutcome(
            text,
            status,
            frame.ledger.own.usage,
            frame.ledger.own.cost,
            self.messages,
            stopped_by,
            self.finish_reason,
            accepted,
        )

    def _notes(self, *, feedback: bool = True) -> list[Message]:
        """What the agent is told before its next call: hooks' feedback, finished background work."""
        notes: list[Message] = []
        given = self.frame.take_feedback() if feedback else []
        if given:
            lines = "\n".join(f"- {note}" for note in given)
            notes.append({"role": "user", "content": f"Feedback on the work so far:\n{lines}"})
        announcement = self.delegator.background.announcement()
        if announcement is not None:
            notes.append({"role": "user", "content": announcement})
        return notes

    async def _step(self, table: ToolTable) -> Turn:
        reached = self.frame.ledger.check_before_model_call(self.counters)
        if reached is not None:
            return Turn([], Stop(reached))
        new = self._notes()
        reply = await self._call([*self.messages, *new], table.schemas)
        new.append(reply.as_message())
        self.calls = reply.tool_calls
        plan = plan_turn(reply, table)
        if plan.is_answer:
            background = self.delegator.background
            if background.running() or background.unseen():
                # not done while background work is unfinished: wait for it (each has a timeout), then it is
                # announced and the agent answers again
                async with self.ctx.activity.waiting():
                    await background.wait([item.handle for item in background.running()], None)
                return Turn(new, RunAgain())
            return await self._answer(reply, new)
        async with self.ctx.activity.waiting():  # each action works on its own
            results = await run_all(
                _working(
                    self.ctx,
                    run_action(
                        self.ctx,
                        self.frame,
                        self.delegator,
                        action,
                        turn=self.turns,
                        position=self._position(action.call),
                        messages=[*self.messages, *new],
                    ),
                )
                for action in plan.actions
            )
        new += [{"role": "tool", "tool_call_id": r.call.id, "content": r.content} for r in results]
        hook_stop = None if ends_turn(results) else await self._on_iteration([*self.messages, *new])
        return Turn(new, next_step(results, hook_stop=hook_stop))

    async def _answer(self, reply: ModelReply, new: list[Message]) -> Turn:
        """A reply without tool calls: continued once if cut off, asked again once if empty, checked."""
        text = reply.text or ""
        if reply.finish_reason == "length":
            new.append({"role": "user", "content": CONTINUE_NOTE})
            rest = await self._call([*self.messages, *new], (), past_limits=True)  # the rest of this answer
            new.append(rest.as_message())
            if rest.finish_reason == "length":
                self._warn_truncated("answer")
            text += rest.text or ""
        if not text.strip():
            if self.asked_again:
                raise EmptyAnswer(f"{self.frame.name} gave an empty final answer, also when asked once more")
            self.asked_again = True
            return Turn([*new, {"role": "user", "content": EMPTY_NOTE}], RunAgain())
        if self.output is not None:
            verdict = self.output.check(text)
            if not verdict.ok:
                return Turn([*new, {"role": "user", "content": verdict.repair_prompt}], RunAgain())
            text = verdict.text
        if self.acceptance is not None:
            feedback = await self.acceptance.review(text)
            if feedback is not None:
                return Turn([*new, {"role": "user", "content": feedback}], RunAgain())
        return Turn(new, FinalOutput(text))

    def _warn_truncated(self, what: str) -> None:
        self.ctx.warn(
            self.frame,
            f"truncated: {self.frame.name}'s {what} was cut off at the model's output limit "
            f"(finish_reason: length); raise max_tokens for {self.frame.name}",
        )

    async def _on_iteration(self, messages: Sequence[Message]) -> str | None:
        """Run ``on_iteration`` hooks (their feedback reaches the next call); why they stop the agent, if they do."""
        if not self.hooks.has("on_iteration"):
            return None
        try:
            actions = await self.hooks.run("on_iteration", iteration_context(self.ctx, self.frame, messages))
        except HookFailed as exc:
            return str(exc)
        return "an on_iteration hook asked to stop" if actions.stop else None

    async def _last_turn(self, stop: Stop) -> Turn:
        """One model call without tools; its output is capped to what the limits leave."""
        new = self._notes(feedback=False)
        new.append({"role": "user", "content": LAST_TURN_NOTE.format(reason=stop.note)})
        limit = stop.why if isinstance(stop.why, LimitReached) else None
        self.frame.emit(
            self.ctx,
            "budget",
            reason=stop.reason,
            limit=limit.limit if limit else None,
            value=limit.value if limit else None,
        )
        messages = [*self.messages, *new]
        reply = await self._call(messages, (), settings=self._last_turn_settings(messages), past_limits=True)
        if reply.finish_reason == "length":
            self._warn_truncated("last answer")
        return Turn([*new, reply.as_message()], FinalOutput(reply.text or ""))

    def _last_turn_settings(self, messages: Sequence[Message]) -> ModelSettings:
        sent = sum(len(json.dumps(m, default=str)) for m in messages) // 4  # a rough token count
        left = self.frame.ledger.tokens_left(sent)
        if left is None:
            return self.settings
        configured = self.settings.max_tokens or DEFAULT_MAX_TOKENS
        return replace(self.settings, max_tokens=min(configured, max(LAST_TURN_MIN_TOKENS, left)))

    async def _call(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolSchema],
        settings: ModelSettings | None = None,
        *,
        past_limits: bool = False,
    ) -> ModelReply:
        """One model call of this agent; ``past_limits``: the last turn, or the rest of a cut-off answer, which
        a used-up token or cost limit allows (the turn's limits were checked before its first call)."""
        self.turns += 1
        call = ModelCall(self.turns, journal=(self.frame.key, self.turns), check_limits=not past_limits)
        try:
            reply = await call_model(
                self.ctx,
                self.frame,
                messages,
                call,
                settings=settings or self.settings,
                tools=tools,
                response_format=self.output.response_format if self.output else None,
            )
        except ModelError as exc:
            raise ModelError(f"{self.frame.name}: {exc}") from exc
        self.finish_reason = reply.finish_reason
        return reply

    def _position(self, call: ToolCall) -> int:
        """Where ``call`` stands in the latest reply."""
        for position, asked in enumerate(self.calls):
            if asked is call:
                return position
        return self.calls.index(call) if call in self.calls else len(self.calls)


async def _working(ctx: RunContext, action: Coroutine[Any, Any, T]) -> T:
    """``action`` counted as work of the run (:class:`~teamrun.engine.durability.pending.RunActivity`)."""
    async with ctx.activity.working():
        return await action


async def run_agent(ctx: RunContext, frame: AgentFrame, task: str) -> WorkerOutcome:
    """Run ``frame``'s agent on ``task`` until an agent answers, following handoffs.

    The outcome's usage and cost are read from the ledgers of every agent that held the conversation.
    """
    async with ctx.activity.working():
        return await _run_agent(ctx, frame, task)


async def _run_agent(ctx: RunContext, frame: AgentFrame, task: str) -> WorkerOutcome:
    frames = [frame]
    loop = AgentLoop(ctx, frame)
    history = ctx.thread.history_for(frame.name, frame.depth, task) if ctx.thread is not None else ()
    outcome = await loop.run(task, history)
    while isinstance(outcome, HandOff):
        ctx.record_handoff(frame, outcome.target)
        frame = frame.handed_to(ctx, outcome.target)
        frames.append(frame)
        history = loop.messages
        loop = AgentLoop(ctx, frame)
        outcome = await loop.run(None, history=history)
    if frame.depth == 0:
        ctx.record_answer(frame)
    elif ctx.thread is not None and outcome.status == "ok":
        ctx.thread.remember(frames[0].name, task, outcome.text)
    usage = sum((f.ledger.own.usage for f in frames), Usage())
    return replace(outcome, usage=usage, cost=sum(f.ledger.own.cost for f in frames))


__all__ = ["AgentLoop", "EmptyAnswer", "Turn", "run_agent"]
