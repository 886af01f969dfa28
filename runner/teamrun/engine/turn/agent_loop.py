"""One agent's loop: model call → turn plan → actions → next step, until it answers.

A turn: check the limits (:meth:`BudgetLedger.check_before_model_call`), call
the model with the agent's :class:`ToolTable` (:func:`call_model`), plan the
reply (:func:`plan_turn`), run the planned actions concurrently (each returns
a :class:`CallResult` with its signals), then :func:`next_step` picks one of
:class:`FinalOutput`, :class:`RunAgain`, :class:`Stop` (one last turn without
tools) or :class:`HandOff`. A turn returns the messages it adds; :meth:`AgentLoop._turns`
is the one place they are appended. A reply without tool calls is the agent's
answer, completed and checked by :class:`~teamrun.engine.turn.answer.Answering`,
which also makes the last turn. The system prompt stays the same every turn (the
provider's cached prefix); what changes between turns (:attr:`AgentLoop.context`)
goes in each request after the conversation. The whole invocation runs in the frame's agent
span (:meth:`AgentFrame.agent_span`: ``agent_start`` … ``agent_end``, ended once
however it ends). Workers are run by the
:class:`~teamrun.engine.delegation.delegator.Delegator`, which is given
:func:`run_agent` to run them with.
"""

from __future__ import annotations

from collections.abc import Coroutine, Sequence
from dataclasses import replace
from typing import Any, TypeVar

import structlog

from teamrun.conventions import workspace_index_block
from teamrun.engine.delegation.delegator import Delegator
from teamrun.engine.delegation.hooks import HookFailed, HookRunner, iteration_context
from teamrun.engine.delegation.records import WorkerOutcome
from teamrun.engine.delegation.tools import workers_of
from teamrun.engine.kinds import Reach, admit
from teamrun.engine.limits.ledger import counters_of
from teamrun.engine.memory.recall import recall_query, recalled_part
from teamrun.engine.memory.tools import memory_tools
from teamrun.engine.result import AcceptanceRecord
from teamrun.engine.runtime import AgentFrame, RunContext, Span, run_all
from teamrun.engine.turn.actions import run_action
from teamrun.engine.turn.answer import Answering, EmptyAnswer
from teamrun.engine.turn.model_call import ModelCall, call_model
from teamrun.engine.turn.prompts import system_prompt
from teamrun.engine.turn.tool_table import ToolTable, build_tool_table
from teamrun.engine.turn.turn_plan import (
    FinalOutput,
    HandOff,
    RunAgain,
    Stop,
    Turn,
    ends_turn,
    history_message,
    next_step,
    plan_turn,
)
from teamrun.errors import ModelError
from teamrun.llm.caching import runner_context
from teamrun.llm.types import Message, ModelReply, ModelSettings, ToolCall, ToolSchema, Usage

T = TypeVar("T")


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
        self.answering = Answering(ctx, frame, self.settings, self._call)
        """Its answers completed and checked (``output_schema``, ``accept:``), and its last turn."""
        self.messages: list[Message] = []
        """The conversation: appended to only in :meth:`_turns`, from what each turn returns. Its system prompt
        is the agent's base prompt, byte-identical every turn (the provider's cached prefix)."""
        self.context = ""
        """What changes between turns — the task ledger, the workspace index, the recalled memories — refreshed
        before each turn and sent after the conversation in each of its requests as one trailing message
        (:func:`~teamrun.llm.caching.runner_context`); never in :attr:`messages`, so never in the history
        (nor a handoff's or a thread's) and never in the cached prefix."""
        self.turns = 0
        self.finish_reason: str | None = None
        """Why the latest model call ended."""
        self.query = ""
        self.calls: tuple[ToolCall, ...] = ()
        """The tool calls of the latest reply (their positions name journal entries and workers)."""

    # -- the loop ------------------------------------------------------------------------

    async def run(self, task: str | None, history: Sequence[Message] = ()) -> WorkerOutcome | HandOff:
        """Start on ``task``, or take over ``history`` after a handoff; all of it in the agent's span."""
        ctx, frame = self.ctx, self.frame
        base_prompt = system_prompt(
            frame.name,
            self.agent,
            workers=workers_of(ctx.config, frame.name),
            template_context=ctx.template_context(frame.name, frame.context),
        )
        earlier = [m for m in history if m.get("role") != "system"] or [{"role": "user", "content": task or ""}]
        self.messages = [{"role": "system", "content": base_prompt}, *earlier]
        self.query = recall_query(earlier)
        """What a recalling agent recalls for before each turn (its task, or the user's latest message)."""
        acceptance = self.answering.acceptance
        if acceptance is not None:
            acceptance.task = (
                task
                if task is not None
                else next((str(m.get("content") or "") for m in history if m.get("role") == "user"), "")
            )
        structlog.contextvars.bind_contextvars(agent=frame.name, agent_path="/".join(frame.path))
        with frame.agent_span(ctx, model=self.settings.model, task=task or "(handoff)") as span:
            try:
                step, stop = await self._turns()
                if isinstance(step, HandOff):
                    span.end["status"] = "handed_off"
                    return step
                if stop is not None and stop.budget:
                    span.end.update(status="budget_exhausted", stopped_by=stop.reason)
                accepted = acceptance.finish(stop.reason if stop else None) if acceptance is not None else None
            finally:
                await self.delegator.background.cancel_all()  # only still running if the agent did not answer
                if span.end["status"] != "handed_off":
                    self.delegator.tasks.close()
        return self._outcome(step.text, span, accepted)

    async def _turns(self) -> tuple[FinalOutput | HandOff, Stop | None]:
        """Turns until the agent answers or hands off; a stop is followed by one last turn without tools.

        Also the stop that led to the last turn, if one did. Each turn returns the messages it adds; this is
        the one place they are appended (and :attr:`context` refreshed before each turn).
        """
        ctx, frame = self.ctx, self.frame
        # starts the tool sources it declares; a narrowed task leaves out the others
        table = await build_tool_table(
            ctx.config, ctx.tools, ctx.sources, frame.name, allowed=frame.allowed_tools, memory=memory_tools(ctx, frame)
        )
        stop: Stop | None = None
        while True:
            if stop is None:
                ledger = self.delegator.tasks.summary()
                recalled = await recalled_part(ctx, frame, self.query, self.turns + 1)
                self.context = "\n\n".join(part for part in (ledger, self._workspace_index(), recalled) if part)
                turn = await self._step(table)
            else:  # the last turn: with the context of the turn that was stopped
                turn = await self.answering.last_turn(stop, self.messages, self._notes(feedback=False))
            self.messages.extend(turn.messages)
            if isinstance(turn.next, FinalOutput | HandOff):
                if isinstance(turn.next, FinalOutput) and turn.next.stopped is not None:
                    stop = turn.next.stopped  # a limit reached while the answer was checked
                return turn.next, stop
            if isinstance(turn.next, Stop):
                stop = turn.next

    def _workspace_index(self) -> str:
        """A delegating agent's view of the workspace: entries, versions, writers (never the values); masked in
        the journal's request hash, since it shows what others wrote so far (also in the trailing context)."""
        if self.ctx.workspace is None or not self.agent.delegates_to:
            return ""
        return workspace_index_block(self.ctx.workspace.index())

    def _outcome(self, text: str, span: Span, accepted: AcceptanceRecord | None) -> WorkerOutcome:
        own = self.frame.ledger.own
        end = span.end
        return WorkerOutcome(
            text, end["status"], own.usage, own.cost, self.messages, end["stopped_by"], self.finish_reason, accepted
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
        plan = plan_turn(reply, table)
        new.append(history_message(reply, plan))  # refused arguments are not sent back to the provider
        self.calls = reply.tool_calls
        if plan.is_answer:
            background = self.delegator.background
            if background.running() or background.unseen():
                # not done while background work is unfinished: wait for it (each has a timeout), then it is
                # announced and the agent answers again
                async with self.ctx.activity.waiting():
                    await background.wait([item.handle for item in background.running()], None)
                return Turn(new, RunAgain())
            return await self.answering.answer(reply, self.messages, new)
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
                    key=f"{self.frame.key}#{self.turns}.{self._position(action.call)}",
                )
                for action in plan.actions
            )
        new += [{"role": "tool", "tool_call_id": r.call.id, "content": r.content} for r in results]
        hook_stop = None if ends_turn(results) else await self._on_iteration([*self.messages, *new])
        return Turn(new, next_step(results, hook_stop=hook_stop))

    async def _on_iteration(self, messages: Sequence[Message]) -> str | None:
        """Run ``on_iteration`` hooks (their feedback reaches the next call); why they stop the agent, if they do."""
        if not self.hooks.has("on_iteration"):
            return None
        try:
            actions = await self.hooks.run("on_iteration", iteration_context(self.ctx, self.frame, messages))
        except HookFailed as exc:
            return str(exc)
        return "an on_iteration hook asked to stop" if actions.stop else None

    async def _call(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolSchema],
        settings: ModelSettings | None = None,
        *,
        past_limits: bool = False,
    ) -> ModelReply:
        """One model call of this agent, its :attr:`context` (when it has one) the request's last message;
        ``past_limits``: the last turn, or the rest of a cut-off answer, which a used-up token or cost limit
        allows (the turn's limits were checked before its first call)."""
        self.turns += 1
        if self.context:
            messages = [*messages, runner_context(self.context)]
        call = ModelCall(self.turns, journal=(self.frame.key, self.turns), check_limits=not past_limits)
        output = self.answering.output
        try:
            reply = await call_model(
                self.ctx,
                self.frame,
                messages,
                call,
                settings=settings or self.settings,
                tools=tools,
                response_format=output.response_format if output else None,
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


async def _working(ctx: RunContext, action: Coroutine[Any, Any, T], *, key: str) -> T:
    """``action`` (the call at ``key`` in the run) counted as work of the run
    (:class:`~teamrun.engine.durability.pending.RunActivity`)."""
    async with ctx.activity.working(key):
        return await action


async def run_agent(ctx: RunContext, frame: AgentFrame, task: str, reached: Reach = "delegation") -> WorkerOutcome:
    """Run ``frame``'s agent on ``task`` by its kind (:mod:`teamrun.engine.kinds`): the one place every way of
    reaching an agent (the entry, a delegation, a peer, a workflow step; a handoff in :func:`_run_local`) runs it.

    A local agent's loop follows handoffs; the outcome's usage and cost are read from the ledgers of every agent
    that held the conversation. A remote agent's loop runs elsewhere.
    """
    kind = admit(ctx.config, frame.name, reached)
    async with ctx.activity.working(frame.key):
        if kind == "remote":
            from teamrun.engine.remote.worker import run_remote

            return await run_remote(ctx, frame, task)
        return await _run_local(ctx, frame, task)


async def _run_local(ctx: RunContext, frame: AgentFrame, task: str) -> WorkerOutcome:
    frames = [frame]
    loop = AgentLoop(ctx, frame)
    history = ctx.thread.history_for(frame.name, frame.depth, task) if ctx.thread is not None else ()
    outcome = await loop.run(task, history)
    while isinstance(outcome, HandOff):
        admit(ctx.config, outcome.target, "handoff")  # the conversation goes on here: a local agent only
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
