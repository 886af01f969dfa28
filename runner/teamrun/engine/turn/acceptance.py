"""Acceptance checks inside a run: an agent's ``accept:`` (and the team's, on the final answer).

Each answer an agent gives is checked (same check kinds as ``teamrun eval``,
:mod:`teamrun.checks`). A failed check goes back to the agent as a user
message naming the check and why it failed, and the agent answers again — up
to ``max_attempts`` answers in all (the first included; default
:data:`~teamrun.config.models.DEFAULT_MAX_ATTEMPTS`). Every attempt is an
ordinary turn of the agent's loop, so its model calls count against the
budgets, and a limit reached stops the attempts (the agent's last turn is
delivered unchecked); a limit that refuses a judge's call stops them too (the
answer is delivered unchecked, and the agent ends ``budget_exhausted`` as a limit
reached anywhere else ends it). An answer that never passes is still delivered, with a
warning, and the attempts are recorded (:class:`AcceptanceRecord`).

Judge checks call their model through the run's chat model, in a scope of
their own (agent path ``<agent path>/accept:judge``, turn = the attempt), so
recording, replay and the scripted test model see them; their tokens and cost
are charged to the agent's ledger (no step).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from teamrun.checks import CheckOutcome, run_check
from teamrun.config.models import DEFAULT_MAX_ATTEMPTS, Check
from teamrun.defaults import model_for
from teamrun.engine.limits.ledger import LimitReached
from teamrun.engine.result import AcceptanceRecord
from teamrun.engine.runtime import AgentFrame, RunContext
from teamrun.engine.turn.model_call import CallRefused, ModelCall, call_model
from teamrun.engine.turn.turn_plan import Stop
from teamrun.llm.types import Message, ModelReply, ModelSettings, ToolSchema

__all__ = ["JUDGE_AGENT", "Acceptance", "feedback_message"]

JUDGE_AGENT = "accept:judge"
"""The last part of the agent path a judge's model call is made under (no agent can have this name)."""

FEEDBACK = (
    "Your answer did not pass the acceptance check {check} (attempt {attempt} of {max_attempts}): {detail}\n"
    "Answer again with your complete final answer, corrected so that it passes."
)


def feedback_message(outcome: CheckOutcome, attempt: int, max_attempts: int) -> str:
    """The user message that sends a failed check back to the agent."""
    return FEEDBACK.format(
        check=f"'{outcome.name}'", attempt=attempt, max_attempts=max_attempts, detail=outcome.detail or "it failed"
    )


@dataclass(frozen=True)
class _Gate:
    """The checks from one place (an agent's ``accept:`` or the team's) and the answers they allow."""

    source: str
    checks: tuple[Check, ...]
    max_attempts: int


@dataclass
class Acceptance:
    """The ``accept:`` checks of one agent invocation, and how its answers fared so far."""

    ctx: RunContext
    frame: AgentFrame
    gates: tuple[_Gate, ...]
    task: str = ""
    attempts: int = 0
    history: list[tuple[dict[str, Any], ...]] = field(default_factory=list)
    failed: tuple[_Gate, CheckOutcome] | None = None
    """The latest answer's first failed check (``None`` once an answer passes)."""
    passed: bool = False
    judge_calls: int = 0
    """Judge calls made so far (they are journaled by this number)."""
    refused_by: LimitReached | None = None
    """A limit that refused a judge call: the attempts stop there (:attr:`stopped`)."""

    @classmethod
    def for_frame(cls, ctx: RunContext, frame: AgentFrame) -> Acceptance | None:
        """The agent's own checks, and the team's when this agent gives the run's final answer."""
        agent = ctx.agent(frame.name)
        gates = []
        if agent.accept:
            gates.append(
                _Gate(f"agents.{frame.name}.accept", tuple(agent.accept), agent.max_attempts or DEFAULT_MAX_ATTEMPTS)
            )
        if frame.depth == 0 and ctx.config.accept:
            gates.append(_Gate("accept", tuple(ctx.config.accept), ctx.config.max_attempts or DEFAULT_MAX_ATTEMPTS))
        return cls(ctx, frame, tuple(gates)) if gates else None

    @property
    def stopped(self) -> Stop | None:
        """The stop a limit that refused a judge call makes: no more attempts, the answer goes unchecked."""
        return Stop(self.refused_by) if self.refused_by is not None else None

    @property
    def max_attempts(self) -> int:
        return min(gate.max_attempts for gate in self.gates)

    async def review(self, answer: str) -> str | None:
        """Check an answer: the feedback to send back when the agent should answer again, else ``None``
        (it passed, or no attempt is left: it is delivered as it is)."""
        self.attempts += 1
        outcomes: list[CheckOutcome] = []
        first: tuple[_Gate, CheckOutcome] | None = None
        for gate in self.gates:
            for check in gate.checks:
                outcome = await run_check(
                    check,
                    answer,
                    case=self._case(),
                    model=self._judge_model(),
                    base_dir=self.ctx.base_dir,
                    judge_model=self._default_judge_model(),
                )
                outcomes.append(outcome)
                if first is None and not outcome.passed:
                    first = (gate, outcome)
        self.history.append(tuple(o.as_dict() for o in outcomes))
        self.failed, self.passed = first, first is None
        if first is None:
            self._emit("passed")
            return None
        gate, outcome = first
        if self.attempts >= gate.max_attempts or outcome.unjudged:  # answering again cannot fix a failed judge
            self._emit("failed")
            return None
        self._emit("retry")
        return feedback_message(outcome, self.attempts, gate.max_attempts)

    def finish(self, stopped_by: str | None) -> AcceptanceRecord:
        """The record of this invocation's attempts; a warning when its answer never passed."""
        gate, outcome = self.failed if self.failed is not None else (None, None)
        stopped_by = stopped_by or (str(self.refused_by) if self.refused_by is not None else None)
        record = AcceptanceRecord(
            agent=self.frame.name,
            agent_path=self.frame.path,
            attempts=self.attempts,
            max_attempts=gate.max_attempts if gate is not None else self.max_attempts,
            passed=self.passed,
            failed_check=outcome.name if outcome is not None else None,
            detail=outcome.detail if outcome is not None else "",
            stopped_by=stopped_by if not self.passed else None,
            history=tuple(self.history),
        )
        self.ctx.record_acceptance(record)
        if not self.passed and self.attempts:
            why = f" (stopped by {stopped_by})" if stopped_by else ""
            self.ctx.warn(
                self.frame,
                f"accept: {self.frame.name} failed {record.failure} after "
                f"{self.attempts} attempt{'s' if self.attempts != 1 else ''}{why}",
            )
        return record

    def _case(self) -> dict[str, Any]:
        return {"agent": self.frame.name, "input": self.task, "vars": dict(self.ctx.vars), "attempt": self.attempts}

    def _default_judge_model(self) -> str:
        """The model of a judge that names none: the team's ``defaults.model``, else ``offline``."""
        return model_for(None, self.ctx.config.defaults)

    def _judge_model(self) -> _JudgeModel:
        return _JudgeModel(self)

    def _emit(self, status: str) -> None:
        gate, outcome = self.failed if self.failed is not None else (None, None)
        self.frame.emit(
            self.ctx,
            "accept",
            status=status,
            attempt=self.attempts,
            max_attempts=gate.max_attempts if gate is not None else self.max_attempts,
            check=outcome.name if outcome is not None else None,
            detail=(outcome.detail or None) if outcome is not None else None,
            source=gate.source if gate is not None else None,
        )


class _JudgeModel:
    """The run's chat model as a judge sees it: the engine's model-call path, in the judge's own scope
    (turn = the attempt), journaled, charged to the agent's ledger (no step), refused once a token or cost
    limit is used up (the check is then unjudged, and the limit recorded)."""

    def __init__(self, acceptance: Acceptance) -> None:
        self.acceptance = acceptance

    async def complete(
        self,
        messages: Sequence[Message],
        *,
        settings: ModelSettings,
        tools: Sequence[ToolSchema] = (),
        response_format: Mapping[str, Any] | None = None,
    ) -> ModelReply:
        acceptance = self.acceptance
        frame = acceptance.frame
        acceptance.judge_calls += 1
        call = ModelCall(
            acceptance.attempts,
            agent_path=(*frame.path, JUDGE_AGENT),
            step=False,
            journal=(f"{frame.key}/{JUDGE_AGENT}", acceptance.judge_calls),
        )
        try:
            return await call_model(
                acceptance.ctx,
                frame,
                messages,
                call,
                settings=acceptance.ctx.judge_settings(settings),
                tools=tools,
                response_format=response_format,
            )
        except CallRefused as exc:
            acceptance.refused_by = exc.reached
            raise
