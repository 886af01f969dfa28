"""Run a team file's ``workflow:``: fixed steps, each an agent run the way a delegation runs one.

The workflow is the run's top frame (``workflow``, depth 0). Every agent a
step runs is a delegation of that frame through the
:class:`~teamrun.engine.delegation.delegator.Delegator`: the same refusal
checks and limits (a step counts as a delegation), ``on_start`` /
``on_complete`` hooks (the workflow's ``hooks:``), the agent's own budget,
``output_schema`` and ``accept:``, the same events (``delegation_start`` says
which step) and a stable journal key per step, so ``teamrun resume`` answers
the calls an earlier attempt finished. A ``team`` step is such a run of a
supervisor agent: its workers are its own delegations, one level down.

Steps:

- a chain (``steps:``) runs in order; each step's ``input`` is a template over
  ``input``, ``vars``, ``today`` and the earlier steps' outputs, passed verbatim;
- ``map:`` runs the step once per item of a list, concurrently (``max_concurrency``),
  results in order, a failed item recorded without losing the others;
- ``route:`` runs the branch its structured output names (else ``default``);
- ``loop:`` repeats its steps until the last output passes ``until:`` (the
  ``accept:`` check kinds) or ``max_iterations``; ``feedback`` is the failed check.

A limit reached between steps, or one that refuses a step, stops the workflow:
the run ends ``budget_exhausted`` with the results finished so far (in a map,
after the items the limit allowed have ended). A ``bail`` of an ``on_complete``
hook ends it too, with that step's result as the answer.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from teamrun.checks import CheckOutcome, run_check
from teamrun.config.models import Delegation, Workflow, WorkflowLoop, WorkflowStep
from teamrun.config.workflow_workspace import WORKSPACE_NAME, reads_workspace
from teamrun.engine.delegation.delegator import Delegator
from teamrun.engine.delegation.records import RunAgent, WorkerOutcome
from teamrun.engine.delegation.tools import DelegationRequest
from teamrun.engine.limits.ledger import LimitReached
from teamrun.engine.runtime import AgentFrame, RunContext, run_all
from teamrun.engine.signals import Bail, Refused, Signal
from teamrun.engine.turn.acceptance import feedback_message
from teamrun.engine.turn.model_call import CallRefused, ModelCall, call_model
from teamrun.engine.workflow.outputs import StepOutput, evaluate, render, template_names
from teamrun.engine.workflow.workspace import step_value, step_view, write_step_output
from teamrun.errors import RunError
from teamrun.llm.types import Message, ModelReply, ModelSettings, ToolSchema

__all__ = ["WORKFLOW_FRAME", "StepFailed", "run_workflow"]

WORKFLOW_FRAME = "workflow"
"""The name of a workflow's top frame (the place a supervisor has in a team)."""
_JUDGE = "until:judge"


class StepFailed(RunError):
    """A step could not give later steps an output (its agent failed, its template did not render)."""


class _Stopped(Exception):
    """A limit stopped the workflow between steps (caught in :func:`run_workflow`)."""

    def __init__(self, reached: LimitReached) -> None:
        self.reached = reached
        super().__init__(str(reached))


class _Bailed(Exception):
    """An ``on_complete`` hook of ``workflow.hooks`` bailed on a step's result: it is the workflow's answer,
    and no later step runs (caught in :func:`run_workflow`)."""

    def __init__(self, text: str) -> None:
        self.text = text
        super().__init__("a workflow hook bailed")


def _raise_for(signal: Signal | None) -> None:
    """What a settled step's signal does to the workflow: a bail ends it with that result, a limit or a
    depth refusal stops it."""
    if isinstance(signal, Bail):
        raise _Bailed(signal.result.response)
    if isinstance(signal, LimitReached):
        raise _Stopped(signal)
    if isinstance(signal, Refused):
        raise _Stopped(signal.limit)


@dataclass(frozen=True)
class _Scope:
    """Where a step sits: its key prefix and the extra names its templates read (``item``, ``iteration``...)."""

    prefix: str
    names: Mapping[str, Any]

    def key(self, label: str) -> str:
        return f"{self.prefix}{label}"

    def inside(self, prefix: str, **names: Any) -> _Scope:
        return _Scope(f"{self.prefix}{prefix}", {**self.names, **names})


class WorkflowRun:
    """One run of a workflow: its steps' outputs so far, and the delegator its agents are run through."""

    def __init__(self, ctx: RunContext, frame: AgentFrame, input: str, run_agent: RunAgent) -> None:
        assert ctx.config.workflow is not None
        self.ctx = ctx
        self.frame = frame
        self.input = input
        self.workflow: Workflow = ctx.config.workflow
        self.run_agent = run_agent
        self.hooks = self.workflow.hooks
        self.delegator = self._delegator(1)
        self.outputs: dict[str, StepOutput] = {}
        thread = ctx.thread
        self.history = [
            {"role": m.get("role"), "content": m.get("content") or ""}
            for m in (thread.conversation if thread is not None else ())
        ]
        """In a thread: its earlier turns (``role``, ``content``), as the thread's ``history:`` keeps them."""
        self.finished: list[tuple[str, StepOutput]] = []
        """Each step that ended, in the order they ended (the partial result when the workflow stops)."""

    def _delegator(self, concurrency: int) -> Delegator:
        settings = Delegation(max_concurrency=concurrency, hooks=self.hooks)
        return Delegator(self.ctx, self.frame, self.run_agent, settings)

    # -- the chain -------------------------------------------------------------------------------

    async def run(self) -> str:
        last = await self.chain(self.workflow.steps, _Scope(f"{self.frame.key}/", {}), None)
        if self.workflow.output is not None:
            scope = _Scope("", {})
            if self.ctx.workspace is not None and reads_workspace(self.workflow.output):
                scope = scope.inside("", **{WORKSPACE_NAME: step_view(self.ctx, f"{self.frame.key}!output")})
            return self._render("workflow.output", self.workflow.output, scope)
        return last.text if last is not None else ""

    async def chain(
        self, steps: Sequence[WorkflowStep], scope: _Scope, previous: StepOutput | None
    ) -> StepOutput | None:
        """Run ``steps`` in order; the last one's output (``previous`` when there are none)."""
        for step in steps:
            reached = self.frame.ledger.check_spent()
            if reached is not None:
                raise _Stopped(reached)
            previous = await self.step(step, scope, previous)
        return previous

    async def step(self, step: WorkflowStep, scope: _Scope, previous: StepOutput | None) -> StepOutput:
        name = step.name
        if self.ctx.workspace is not None and (
            reads_workspace(step.input) or reads_workspace(step.map, expression=True)
        ):  # the entries as the step starts (a resumed run: as the earlier attempt read them)
            scope = scope.inside("", **{WORKSPACE_NAME: step_view(self.ctx, scope.key(name))})
        if step.loop is not None:
            out = await self.loop(name, step.loop, scope, previous)
        elif step.map is not None:
            out = await self.map(step, scope)
        else:
            task = self._task(step, scope, previous)
            out = await self.call(step, task, scope.key(name))
            if not out.ok:
                self._record(name, out)
                raise StepFailed(f"workflow step '{name}' failed: {out.error or out.status}")
            if step.route is not None:
                out = await self.route(step, out, scope)
        if step.write is not None:
            await self._write(step, out, scope.key(name))
        self._record(name, out)
        return out

    async def _write(self, step: WorkflowStep, out: StepOutput, key: str) -> None:
        """The step's ``write:``: its output into the entry, by the workflow; a refused write fails the step."""
        assert step.write is not None
        value = step_value(out, mapped=step.map is not None)
        done = await write_step_output(
            self.ctx, self.frame, step=step.name, step_key=key, entry=step.write, value=value
        )
        if not done.applied:
            self._record(step.name, out)
            raise StepFailed(
                f"workflow step '{step.name}': writing its output to workspace entry '{step.write}' was refused "
                f"({done.reason}): {done.message}"
            )

    def _record(self, name: str, out: StepOutput) -> None:
        self.outputs[name] = out
        self.finished.append((name, out))

    def _task(self, step: WorkflowStep, scope: _Scope, previous: StepOutput | None, **names: Any) -> str:
        if step.input is not None:
            return self._render(f"step '{step.name}' input", step.input, scope, **names)
        if "item" in names:
            item = names["item"]
            return item if isinstance(item, str) else _json(item)
        return previous.text if previous is not None else self.input

    def _render(self, what: str, source: str, scope: _Scope, **names: Any) -> str:
        context = template_names(
            self.input, self.ctx.vars, self.ctx.today, self.outputs, history=self.history, **scope.names, **names
        )
        try:
            return render(source, context)
        except Exception as exc:  # jinja2's errors: an undefined name, a failed filter, a bound passed
            raise StepFailed(f"workflow {what} could not be rendered: {type(exc).__name__}: {exc}") from exc

    # -- one agent ---------------------------------------------------------------------------------

    async def call(self, step: WorkflowStep, task: str, key: str) -> StepOutput:
        """Run the step's agent on ``task``; a bail or a limit that refused it ends the workflow."""
        out, signal = await self.attempt(step, task, key, self.delegator)
        if signal is not None:
            self._record(step.name, out)
        _raise_for(signal)
        return out

    async def attempt(
        self, step: WorkflowStep, task: str, key: str, delegator: Delegator
    ) -> tuple[StepOutput, Signal | None]:
        """Run the step's agent on ``task`` as a delegation of the workflow frame: its output, and the
        signal it raised (a bail, a limit or depth refusal), for the caller to act on."""
        agent = step.runs
        assert agent is not None
        label = key.removeprefix(f"{self.frame.key}/")
        request = DelegationRequest([agent], task, step=label)
        settled = await delegator.run_worker(agent, request, key)
        out = StepOutput.of(settled.result, structured=self.ctx.agent(agent).output_schema is not None)
        return out, settled.signal

    # -- map, route, loop ----------------------------------------------------------------------------

    async def map(self, step: WorkflowStep, scope: _Scope) -> StepOutput:
        name = step.name
        assert step.map is not None
        tasks = [self._task(step, scope, None, item=item, index=i) for i, item in enumerate(self._items(step, scope))]
        delegator = self._delegator(step.max_concurrency or self.workflow.max_concurrency)

        async def one(index: int, task: str) -> tuple[StepOutput, Signal | None]:
            out, signal = await self.attempt(step, task, scope.key(f"{name}[{index}]"), delegator)
            if not out.ok and signal is None:  # an item a limit refused is said by the workflow's stop
                self.ctx.warn(self.frame, f"workflow step '{name}' item {index} failed: {out.error or out.status}")
            return out, signal

        # Items are admitted in the list's order (each is counted when it starts, before it waits for a
        # slot), so a limit allows the same first items whatever the timing; every item it allowed runs to
        # its end, then a bail or a refusal among them acts (the first in the list's order).
        settled = await run_all(one(i, task) for i, task in enumerate(tasks))
        out = StepOutput.of_map([item for item, _ in settled])
        signals = [signal for _, signal in settled if signal is not None]
        if signals:
            self._record(name, out)
            _raise_for(next((s for s in signals if isinstance(s, Bail)), signals[0]))
        if not out.ok:
            self._record(name, out)
            raise StepFailed(f"workflow step '{name}' failed: {out.error}")
        return out

    def _items(self, step: WorkflowStep, scope: _Scope) -> list[Any]:
        assert step.map is not None
        context = template_names(
            self.input, self.ctx.vars, self.ctx.today, self.outputs, history=self.history, **scope.names
        )
        try:
            value = evaluate(step.map, context)
        except Exception as exc:
            raise StepFailed(
                f"workflow step '{step.name}': map: {step.map} could not be read: {type(exc).__name__}: {exc}"
            ) from exc
        if isinstance(value, str) or not isinstance(value, Sequence):
            raise StepFailed(f"workflow step '{step.name}': map: {step.map} is a {type(value).__name__}, not a list")
        return list(value)

    async def route(self, step: WorkflowStep, out: StepOutput, scope: _Scope) -> StepOutput:
        route = step.route
        assert route is not None
        name = step.name
        branch = route.branch_for(out.output)
        steps = route.branches[branch] if branch != "default" else route.default
        self.outputs[name] = StepOutput(out.text, out.output, branch=branch, choice=out.output)
        last = await self.chain(steps, scope.inside(f"{name}>{branch}/"), out)
        final = last if last is not None else out
        return StepOutput(final.text, final.output, final.status, final.error, branch=branch, choice=out.output)

    async def loop(self, name: str, loop: WorkflowLoop, scope: _Scope, previous: StepOutput | None) -> StepOutput:
        feedback = ""
        last: StepOutput | None = previous
        outcome: CheckOutcome | None = None
        iteration = 0
        for iteration in range(1, loop.max_iterations + 1):
            inner = scope.inside(f"{name}#{iteration}/", iteration=iteration, feedback=feedback)
            last = await self.chain(loop.steps, inner, last)
            assert last is not None
            outcome = await self._checks(loop, last.text, scope.key(f"{name}#{iteration}"), iteration)
            if outcome is None or outcome.unjudged:  # a judge that cannot judge: another iteration cannot fix it
                break
            feedback = feedback_message(outcome, iteration, loop.max_iterations)
        assert last is not None
        passed = outcome is None
        if not passed:
            assert outcome is not None
            self.ctx.warn(
                self.frame,
                f"workflow step '{name}': the loop ended after {iteration} iterations "
                f"without passing '{outcome.name}': {outcome.detail or 'it failed'}",
            )
        return StepOutput(last.text, last.output, last.status, last.error, iterations=iteration, passed=passed)

    async def _checks(self, loop: WorkflowLoop, answer: str, key: str, iteration: int) -> CheckOutcome | None:
        """The first of ``until:`` the answer fails (``None``: all pass)."""
        judge = _JudgeModel(self, key)
        case = {"agent": WORKFLOW_FRAME, "input": self.input, "vars": dict(self.ctx.vars), "attempt": iteration}
        defaults = self.ctx.config.defaults
        default_judge = (defaults.model if defaults is not None else None) or "offline"
        results = []
        for check in loop.until:
            result = await run_check(
                check, answer, case=case, model=judge, base_dir=self.ctx.base_dir, judge_model=default_judge
            )
            results.append(result)
            if judge.refused is not None:
                raise _Stopped(judge.refused)
        self.frame.emit(
            self.ctx,
            "accept",
            status=_accept_status(results, iteration, loop.max_iterations),
            attempt=iteration,
            max_attempts=loop.max_iterations,
            check=next((r.name for r in results if not r.passed), None),
            detail=next((r.detail or None for r in results if not r.passed), None),
            source=f"workflow:{key}",
        )
        return next((r for r in results if not r.passed), None)


def _accept_status(results: Sequence[CheckOutcome], iteration: int, max_iterations: int) -> str:
    """``passed``; ``retry`` when the loop goes round again; ``failed`` on its last iteration or when a
    judge could not judge (another iteration cannot fix that)."""
    failed = next((r for r in results if not r.passed), None)
    if failed is None:
        return "passed"
    return "failed" if failed.unjudged or iteration >= max_iterations else "retry"


class _JudgeModel:
    """A loop's judge checks call the model through the engine's one path: journaled under the loop
    iteration's key, charged to the workflow's ledger (no step), refused once a token or cost limit is spent."""

    def __init__(self, run: WorkflowRun, key: str) -> None:
        self.run = run
        self.key = key
        self.calls = 0
        self.refused: LimitReached | None = None

    async def complete(
        self,
        messages: Sequence[Message],
        *,
        settings: ModelSettings,
        tools: Sequence[ToolSchema] = (),
        response_format: Mapping[str, Any] | None = None,
    ) -> ModelReply:
        self.calls += 1
        frame = self.run.frame
        call = ModelCall(
            self.calls, agent_path=(*frame.path, _JUDGE), step=False, journal=(f"{self.key}/{_JUDGE}", self.calls)
        )
        try:
            return await call_model(
                self.run.ctx,
                frame,
                messages,
                call,
                settings=self.run.ctx.judge_settings(settings),
                tools=tools,
                response_format=response_format,
            )
        except CallRefused as exc:
            self.refused = exc.reached
            raise


def _json(value: Any) -> str:
    import json

    return json.dumps(value, ensure_ascii=False)


def _partial(run: WorkflowRun, headline: str) -> str:
    done = [(name, out) for name, out in run.finished if out.ok and out.text.strip()]
    if not done:
        return ""
    lines = [f"No final answer: {headline}. Steps finished so far:"]
    lines += [f"- {name}: {out.text}" for name, out in done]
    return "\n".join(lines)


async def run_workflow(ctx: RunContext, frame: AgentFrame, input: str, run_agent: RunAgent) -> WorkerOutcome:
    """Run the team's workflow on ``input`` from its top frame; a limit ends it with the steps finished so far."""
    run = WorkflowRun(ctx, frame, input, run_agent)
    with frame.agent_span(ctx, model=WORKFLOW_FRAME, task=input) as span:  # its end: the frame's own calls
        try:
            text = await run.run()
        except _Bailed as bailed:
            text = bailed.text
        except _Stopped as stop:
            reached = stop.reached
            frame.emit(ctx, "budget", reason=str(reached), limit=reached.limit, value=reached.value)  # as an agent's
            span.end.update(status="budget_exhausted", stopped_by=str(reached))
            text = _partial(run, f"the workflow was stopped ({reached})")
    own = frame.ledger.own  # its until: judges' calls; the steps spend in their own spans
    return WorkerOutcome(text, span.end["status"], own.usage, own.cost, (), span.end["stopped_by"])


RunWorkflow = Callable[[RunContext, AgentFrame, str, RunAgent], Awaitable[WorkerOutcome]]
