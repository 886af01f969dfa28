"""The end of an agent's turns: its answer, and the last turn of an agent that was stopped.

A reply without tool calls is the agent's answer (:meth:`Answering.answer`):
continued once if the model cut it off, asked for once more if it is empty,
then checked against the agent's ``output_schema`` and ``accept:`` — each
failure is one more turn, its feedback the turn's last message; a limit that
refuses an ``accept:`` judge ends the checking (the answer is final, unchecked,
and carries the stop). An agent
stopped by a limit, a refusal or an ``on_iteration`` hook gets one last call
without tools (:meth:`Answering.last_turn`), its output capped to what the
limits leave. Both return the :class:`~teamrun.engine.turn.turn_plan.Turn`
they make; the agent loop (:mod:`teamrun.engine.turn.agent_loop`) appends its
messages and makes the model calls (given here as :class:`AgentCall`).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import replace
from typing import Protocol

from teamrun.defaults import DEFAULT_MAX_TOKENS
from teamrun.engine.limits.ledger import LimitReached
from teamrun.engine.runtime import AgentFrame, RunContext
from teamrun.engine.turn.acceptance import Acceptance
from teamrun.engine.turn.structured import OutputChecker
from teamrun.engine.turn.turn_plan import FinalOutput, RunAgain, Stop, Turn
from teamrun.errors import ModelError
from teamrun.llm.types import Message, ModelReply, ModelSettings, ToolSchema

__all__ = [
    "CONTINUE_NOTE",
    "EMPTY_NOTE",
    "LAST_TURN_MIN_TOKENS",
    "LAST_TURN_NOTE",
    "AgentCall",
    "Answering",
    "EmptyAnswer",
]

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


class AgentCall(Protocol):
    """One model call of the agent (:meth:`~teamrun.engine.turn.agent_loop.AgentLoop._call`)."""

    async def __call__(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolSchema],
        settings: ModelSettings | None = None,
        *,
        past_limits: bool = False,
    ) -> ModelReply: ...


class Answering:
    """How one agent invocation's answers are completed and checked, and its last turn made."""

    def __init__(self, ctx: RunContext, frame: AgentFrame, settings: ModelSettings, call: AgentCall) -> None:
        self.ctx = ctx
        self.frame = frame
        self.settings = settings
        self.call = call
        self.output = OutputChecker.for_agent(frame.name, ctx.agent(frame.name))
        """The agent's ``output_schema`` check (``None``: it has none)."""
        self.acceptance = Acceptance.for_frame(ctx, frame)
        """The ``accept:`` checks of this agent's answers (``None``: it has none)."""
        self.asked_again = False
        """Whether an empty answer was already met with one more request."""

    async def answer(self, reply: ModelReply, sent: Sequence[Message], new: Sequence[Message]) -> Turn:
        """A reply without tool calls: continued once if cut off, asked again once if empty, checked.

        ``sent``: the conversation before this turn; ``new``: this turn's messages so far (``reply`` last).
        """
        new = list(new)
        text = reply.text or ""
        if reply.finish_reason == "length":
            new.append({"role": "user", "content": CONTINUE_NOTE})
            rest = await self.call([*sent, *new], (), past_limits=True)  # the rest of this answer
            new.append(rest.as_message())
            if rest.finish_reason == "length":
                self.warn_truncated("answer")
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
            stopped = self.acceptance.stopped
            if stopped is not None:  # a limit refused the judge: the attempts end here, the answer unchecked
                self.budget_event(stopped)
                return Turn(new, FinalOutput(text, stopped))
            if feedback is not None:
                return Turn([*new, {"role": "user", "content": feedback}], RunAgain())
        return Turn(new, FinalOutput(text))

    async def last_turn(self, stop: Stop, sent: Sequence[Message], notes: Sequence[Message]) -> Turn:
        """One model call without tools; its output is capped to what the limits leave.

        ``sent``: the conversation so far; ``notes``: what the agent is told before the call.
        """
        new = [*notes, {"role": "user", "content": LAST_TURN_NOTE.format(reason=stop.note)}]
        self.budget_event(stop)
        messages = [*sent, *new]
        reply = await self.call(messages, (), settings=self.last_turn_settings(messages), past_limits=True)
        if reply.finish_reason == "length":
            self.warn_truncated("last answer")
        return Turn([*new, reply.as_message()], FinalOutput(reply.text or ""))

    def budget_event(self, stop: Stop) -> None:
        """The ``budget`` event of an agent stopped (by a limit, a refusal or a hook)."""
        limit = stop.why if isinstance(stop.why, LimitReached) else None
        self.frame.emit(
            self.ctx,
            "budget",
            reason=stop.reason,
            limit=limit.limit if limit else None,
            value=limit.value if limit else None,
        )

    def last_turn_settings(self, messages: Sequence[Message]) -> ModelSettings:
        """The agent's settings with ``max_tokens`` cut to what the token and cost limits leave (at least
        :data:`LAST_TURN_MIN_TOKENS`)."""
        sent = sum(len(json.dumps(m, default=str)) for m in messages) // 4  # a rough token count
        left = self.frame.ledger.tokens_left(sent)
        if left is None:
            return self.settings
        configured = self.settings.max_tokens or DEFAULT_MAX_TOKENS
        return replace(self.settings, max_tokens=min(configured, max(LAST_TURN_MIN_TOKENS, left)))

    def warn_truncated(self, what: str) -> None:
        self.ctx.warn(
            self.frame,
            f"truncated: {self.frame.name}'s {what} was cut off at the model's output limit "
            f"(finish_reason: length); raise max_tokens for {self.frame.name}",
        )
