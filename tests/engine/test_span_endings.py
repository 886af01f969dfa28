"""Every span a run opens ends exactly once, however the run goes (issue 23).

Each test drives a run through the public API (``load_team(...).run``) on the scripted
in-process model and checks the events: each ``agent_start`` / ``delegation_start`` /
``llm_start`` / ``tool_start`` has exactly one matching ``*_end`` with the same span id.
Workers that must still be running when something happens wait on a :class:`Gate`.
"""

from __future__ import annotations

import asyncio
import sys
import textwrap
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import teamrun
from teamrun.events import Event
from teamrun.llm.types import Message, ModelReply, ModelSettings, ToolSchema, current_scope
from teamrun.testing.scripted import ScriptedModel, delegate, tool_call
from tests.waiting import wait_until_async

GUARD_S = 60.0
"""Only keeps a broken test from hanging; no test waits anywhere near it."""

SPANS = ("agent", "delegation", "llm", "tool")


def _write(tmp_path: Path, body: str, **modules: str) -> Path:
    for name, source in modules.items():
        (tmp_path / f"{name}.py").write_text(textwrap.dedent(source), encoding="utf-8")
    path = tmp_path / "team.yaml"
    path.write_text(textwrap.dedent(body), encoding="utf-8")
    return path


class Gate:
    """The scripted model, except that a call of one of ``held`` agents waits until the run is cancelled.

    ``follower``: an agent whose calls after its first wait until a held agent is waiting.
    """

    def __init__(self, scripted: ScriptedModel, *held: str, follower: str | None = None) -> None:
        self.scripted = scripted
        self.held = set(held)
        self.follower = follower
        self.reached = asyncio.Event()
        """Set once a held agent is waiting on its model."""

    async def complete(
        self,
        messages: Sequence[Message],
        *,
        settings: ModelSettings,
        tools: Sequence[ToolSchema] = (),
        response_format: Mapping[str, Any] | None = None,
    ) -> ModelReply:
        scope = current_scope.get()
        if scope is not None and scope.agent_path and scope.agent_path[-1] in self.held:
            self.reached.set()
            await asyncio.Event().wait()  # until cancelled
        if scope is not None and scope.agent_path[-1:] == (self.follower,) and scope.turn > 1:
            await self.reached.wait()
        return await self.scripted.complete(messages, settings=settings, tools=tools, response_format=response_format)


async def _run(team: Path, model: Any, events: list[Event], **kwargs: Any) -> teamrun.RunResult:
    return await asyncio.wait_for(
        teamrun.load_team(team, chat_model=model).run("go", subscribers=[events.append], **kwargs), GUARD_S
    )


def _run_sync(team: Path, model: Any) -> tuple[teamrun.RunResult, list[Event]]:
    events: list[Event] = []
    return asyncio.run(_run(team, model, events)), events


async def _cancelled_when(reached: asyncio.Event, team: Path, model: Any, events: list[Event]) -> teamrun.RunResult:
    """Run ``team``; set its ``cancel`` event once ``reached`` is set."""
    cancel = asyncio.Event()
    run = asyncio.create_task(_run(team, model, events, cancel=cancel))
    await asyncio.wait_for(reached.wait(), GUARD_S)
    cancel.set()
    return await asyncio.wait_for(run, GUARD_S)


def assert_spans_end_once(events: Sequence[Event]) -> dict[str, Event]:
    """Each ``*_start`` of :data:`SPANS` has exactly one ``*_end`` of the same span id, after it; returns the
    ends by span id."""
    ends: dict[str, Event] = {}
    for kind in SPANS:
        starts = Counter(e.span_id for e in events if e.kind == f"{kind}_start")
        stops = Counter(e.span_id for e in events if e.kind == f"{kind}_end")
        assert all(n == 1 for n in starts.values()), f"{kind} spans started twice: {starts}"
        assert stops == starts, f"{kind}: started {dict(starts)}, ended {dict(stops)}"
        for event in events:
            if event.kind == f"{kind}_end":
                ends[event.span_id] = event
    kinds = [(e.kind, e.span_id) for e in events]
    for kind, span in kinds:
        if kind.endswith("_end"):
            assert kinds.index((kind.replace("_end", "_start"), span)) < kinds.index((kind, span))
    return ends


def _ended(events: Sequence[Event], kind: str) -> list[tuple[str, str]]:
    """``(agent or worker, status)`` of each ``<kind>_end``, in order."""
    return [
        (getattr(e, "worker", None) or e.agent, getattr(e, "status", "")) for e in events if e.kind == f"{kind}_end"
    ]


FAN_OUT = """\
    version: 1
    name: fan-out
    supervisor: lead
    agents:
      lead:
        delegates_to: [alpha, beta]
      alpha:
        description: First.
      beta:
        description: Second.
    """


def test_a_fan_out_ends_every_span_once(tmp_path: Path) -> None:
    model = ScriptedModel(
        {"lead": [delegate("alpha", "beta", task="look"), "both done"], "alpha": ["a"], "beta": ["b"]}
    )

    result, events = _run_sync(_write(tmp_path, FAN_OUT), model)

    model.assert_complete()
    assert (result.status, result.final_text) == ("done", "both done")
    assert_spans_end_once(events)
    assert sorted(_ended(events, "delegation")) == [("alpha", "ok"), ("beta", "ok")]
    assert sorted(_ended(events, "agent")) == [("alpha", "ok"), ("beta", "ok"), ("lead", "ok")]
    starts = {e.span_id: e for e in events if e.kind == "delegation_start"}
    for event in events:  # a worker's agent span hangs under its delegation span
        if event.kind == "agent_start" and event.agent != "lead":
            assert starts[event.parent_span_id or ""].worker == event.agent  # type: ignore[attr-defined]


def _raises(call: Any) -> ModelReply:
    raise RuntimeError("the worker broke")


def test_a_worker_that_raises_ends_its_spans_and_the_run_goes_on(tmp_path: Path) -> None:
    model = ScriptedModel(
        {"lead": [delegate("alpha", "beta", task="look"), "one failed"], "alpha": [_raises], "beta": ["b"]}
    )

    result, events = _run_sync(_write(tmp_path, FAN_OUT), model)

    assert (result.status, result.final_text) == ("done", "one failed")
    ends = assert_spans_end_once(events)
    assert sorted(_ended(events, "delegation")) == [("alpha", "error"), ("beta", "ok")]
    assert ("alpha", "error") in _ended(events, "agent")
    (failed,) = [e for e in ends.values() if e.kind == "delegation_end" and e.worker == "alpha"]  # type: ignore[attr-defined]
    assert failed.error == "RuntimeError: the worker broke"  # type: ignore[attr-defined]


CHAIN = """\
    version: 1
    name: chain
    supervisor: lead
    agents:
      lead:
        delegates_to: [middle]
      middle:
        description: Passes work on.
        delegates_to: [leaf]
      leaf:
        description: Fails the run when it fails.
        on_error: fail_run
    """


def test_a_fatal_worker_two_levels_down_ends_every_span_on_its_way_up(tmp_path: Path) -> None:
    model = ScriptedModel(
        {"lead": [delegate("middle", task="pass it on")], "middle": [delegate("leaf", task="do it")], "leaf": [_raises]}
    )

    result, events = _run_sync(_write(tmp_path, CHAIN), model)

    assert result.status == "failed"
    assert "worker leaf failed and has on_error: fail_run" in (result.error or "")
    assert_spans_end_once(events)
    assert _ended(events, "delegation") == [("leaf", "error"), ("middle", "error")]
    assert _ended(events, "agent") == [("leaf", "error"), ("middle", "error"), ("lead", "error")]
    assert [(d.agent, d.status) for d in result.delegations] == [("leaf", "error"), ("middle", "error")]


def test_a_run_cancelled_mid_delegation_ends_every_span_once(tmp_path: Path) -> None:
    model = Gate(ScriptedModel({"lead": [delegate("alpha", "beta", task="look")], "beta": ["b"]}), "alpha")
    events: list[Event] = []

    result = asyncio.run(_cancelled_when(model.reached, _write(tmp_path, FAN_OUT), model, events))

    assert (result.status, result.stopped_by) == ("cancelled", "cancelled")
    assert_spans_end_once(events)
    assert ("alpha", "cancelled") in _ended(events, "delegation")
    assert ("alpha", "cancelled") in _ended(events, "agent") and ("lead", "cancelled") in _ended(events, "agent")
    assert ("alpha", "cancelled") in [(d.agent, d.status) for d in result.delegations]


SLOW_SETTLING = """\
    version: 1
    name: slow-settling
    supervisor: lead
    agents:
      lead:
        delegates_to: [alpha]
        delegation:
          hooks:
            on_complete:
              - call: settling_hooks:on_complete
      alpha:
        description: Works.
    """

SETTLING_HOOKS = """\
    import asyncio

    REACHED = asyncio.Event()

    async def on_complete(context):
        REACHED.set()
        await asyncio.Event().wait()  # until the run is cancelled
    """


def _settling_hook_awaits() -> bool:
    """The ``on_complete`` hook has run (after alpha's agent_end): it set REACHED, then awaits in the same step."""
    reached = getattr(sys.modules.get("settling_hooks"), "REACHED", None)
    return reached is not None and reached.is_set()


def test_a_run_cancelled_while_a_delegation_settles_ends_its_span_once(tmp_path: Path) -> None:
    team = _write(tmp_path, SLOW_SETTLING, settling_hooks=SETTLING_HOOKS)
    model = ScriptedModel({"lead": [delegate("alpha", task="look")], "alpha": ["a"]})

    async def scenario() -> tuple[teamrun.RunResult, list[Event]]:
        events: list[Event] = []
        cancel = asyncio.Event()
        run = asyncio.create_task(_run(team, model, events, cancel=cancel))
        await wait_until_async(_settling_hook_awaits, "the on_complete hook awaiting", alive=run)
        cancel.set()
        return await asyncio.wait_for(run, GUARD_S), events

    result, events = asyncio.run(scenario())

    assert result.status == "cancelled"
    assert_spans_end_once(events)
    assert _ended(events, "delegation") == [("alpha", "ok")]  # what the worker came to, recorded once
    assert [(d.agent, d.status) for d in result.delegations] == [("alpha", "ok")]


LIMITED = """\
    version: 1
    name: limited
    supervisor: lead
    agents:
      lead:
        delegates_to: [alpha, beta]
      alpha:
        description: Has one step.
        tools: [note]
        budget: {max_steps: 1}
      beta:
        description: Second.
    tools:
      note:
        python: span_tools:note
    """

SPAN_TOOLS = """\
    def note(text: str) -> str:
        \"\"\"Note something.\"\"\"
        return "noted"
    """


def test_a_limit_reached_mid_worker_ends_its_spans_once(tmp_path: Path) -> None:
    model = ScriptedModel(
        {
            "lead": [delegate("alpha", "beta", task="look"), "partly done"],
            "alpha": [tool_call("note", text="x"), "what I have"],  # the second call is its last turn
            "beta": ["b"],
        }
    )

    result, events = _run_sync(_write(tmp_path, LIMITED, span_tools=SPAN_TOOLS), model)

    model.assert_complete()
    assert result.status == "done"
    assert_spans_end_once(events)
    assert sorted(_ended(events, "delegation")) == [("alpha", "budget_exhausted"), ("beta", "ok")]
    assert ("alpha", "budget_exhausted") in _ended(events, "agent")
    (noted,) = [e for e in events if e.kind == "tool_end"]
    assert noted.data == {"tool": "note", "status": "ok", "chars": 5}


TIMED = """\
    version: 1
    name: timed
    supervisor: lead
    limits: {timeout_s: 0.3}
    agents:
      lead:
        delegates_to: [alpha, beta]
      alpha:
        description: Never answers.
      beta:
        description: Second.
    """


def test_the_run_timeout_reached_mid_worker_ends_every_span_once(tmp_path: Path) -> None:
    model = Gate(ScriptedModel({"lead": [delegate("alpha", "beta", task="look")], "beta": ["b"]}), "alpha")
    events: list[Event] = []

    result = asyncio.run(_run(_write(tmp_path, TIMED), model, events))

    assert (result.status, result.stopped_by) == ("budget_exhausted", "limits.timeout_s (0.3)")
    assert_spans_end_once(events)
    assert sorted(_ended(events, "delegation")) == [("alpha", "cancelled"), ("beta", "ok")]


BACKGROUND = """\
    version: 1
    name: background
    supervisor: lead
    agents:
      lead:
        delegates_to: [slow]
        delegation:
          background: [slow]
      slow:
        description: Takes long.
    """


def test_a_background_task_cancelled_with_cancel_task_ends_its_span_once(tmp_path: Path) -> None:
    scripted = ScriptedModel(
        {"lead": [delegate("slow", task="take long"), tool_call("cancel_task", handle="bg-1"), "done without it"]}
    )
    model = Gate(scripted, "slow", follower="lead")  # the lead cancels once the worker is on its model

    result, events = _run_sync(_write(tmp_path, BACKGROUND), model)

    scripted.assert_complete()
    assert result.status == "done" and result.final_text == "done without it"
    assert_spans_end_once(events)
    assert _ended(events, "delegation") == [("slow", "cancelled")]
    assert [(d.agent, d.status) for d in result.delegations] == [("slow", "cancelled")]


def test_a_background_task_still_running_when_the_run_is_cancelled_ends_its_span_once(tmp_path: Path) -> None:
    model = Gate(ScriptedModel({"lead": [delegate("slow", task="take long"), "done"]}), "slow")
    events: list[Event] = []

    result = asyncio.run(_cancelled_when(model.reached, _write(tmp_path, BACKGROUND), model, events))

    assert result.status == "cancelled"
    assert_spans_end_once(events)
    assert _ended(events, "delegation") == [("slow", "cancelled")]
    assert ("lead", "cancelled") in _ended(events, "agent")


WORKFLOW = """\
    version: 1
    name: flow
    workflow:
      steps:
        - agent: alpha
        - agent: beta
    agents:
      alpha:
        description: First.
      beta:
        description: Second.
    """


def test_a_workflow_ends_its_spans_once_when_it_finishes_and_when_it_is_cancelled(tmp_path: Path) -> None:
    team = _write(tmp_path, WORKFLOW)
    model = ScriptedModel({"alpha": ["a"], "beta": ["b"]})
    result, events = _run_sync(team, model)
    assert (result.status, result.final_text) == ("done", "b")
    assert_spans_end_once(events)
    assert _ended(events, "agent") == [("alpha", "ok"), ("beta", "ok"), ("workflow", "ok")]

    gated = Gate(ScriptedModel({"alpha": ["a"]}), "beta")
    events = []
    result = asyncio.run(_cancelled_when(gated.reached, team, gated, events))
    assert result.status == "cancelled"
    assert_spans_end_once(events)
    assert _ended(events, "delegation") == [("alpha", "ok"), ("beta", "cancelled")]


IN_A_TOOL = """\
    version: 1
    name: in-a-tool
    supervisor: lead
    agents:
      lead:
        delegates_to: [alpha]
      alpha:
        description: Waits in a tool.
        tools: [wait_long]
    tools:
      wait_long:
        python: span_wait_tools:wait_long
    """

WAIT_TOOLS = """\
    import asyncio

    async def wait_long() -> str:
        \"\"\"Wait until cancelled.\"\"\"
        await asyncio.Event().wait()
        return "never"
    """


def test_a_run_cancelled_while_a_worker_runs_a_tool_ends_the_tool_span_once(tmp_path: Path) -> None:
    team = _write(tmp_path, IN_A_TOOL, span_wait_tools=WAIT_TOOLS)
    model = ScriptedModel({"lead": [delegate("alpha", task="wait")], "alpha": [tool_call("wait_long")]})

    async def scenario() -> tuple[teamrun.RunResult, list[Event]]:
        events: list[Event] = []
        cancel = asyncio.Event()
        run = asyncio.create_task(_run(team, model, events, cancel=cancel))
        await wait_until_async(lambda: any(e.kind == "tool_start" for e in events), "alpha's tool_start", alive=run)
        cancel.set()
        return await asyncio.wait_for(run, GUARD_S), events

    result, events = asyncio.run(scenario())

    assert result.status == "cancelled"
    assert_spans_end_once(events)
    (tool_end,) = [e for e in events if e.kind == "tool_end"]
    assert tool_end.data == {"tool": "wait_long", "status": "error", "error": "cancelled", "chars": 0}
    assert _ended(events, "delegation") == [("alpha", "cancelled")]


BACKGROUND_SETTLING = """\
    version: 1
    name: background-settling
    supervisor: lead
    agents:
      lead:
        delegates_to: [slow]
        delegation:
          background: [slow]
          hooks:
            on_complete:
              - call: bg_settling_hooks:on_complete
      slow:
        description: Settles slowly.
    """

BG_SETTLING_HOOKS = """\
    import asyncio

    REACHED = []

    async def on_complete(context):
        REACHED.append(context.status)
        await asyncio.Event().wait()  # until cancelled
    """


class _HookReached:
    """Follower gate: the lead's second call waits until the ``on_complete`` hook is awaiting."""

    def __init__(self, scripted: ScriptedModel) -> None:
        self.scripted = scripted

    async def complete(self, messages: Sequence[Message], **kwargs: Any) -> ModelReply:
        scope = current_scope.get()
        if scope is not None and scope.agent_path == ("lead",) and scope.turn > 1:
            hook = "the on_complete hook awaiting"
            await wait_until_async(lambda: getattr(sys.modules.get("bg_settling_hooks"), "REACHED", None), hook)
        return await self.scripted.complete(messages, **kwargs)


def test_cancel_task_while_a_background_delegation_settles_keeps_one_record(tmp_path: Path) -> None:
    team = _write(tmp_path, BACKGROUND_SETTLING, bg_settling_hooks=BG_SETTLING_HOOKS)
    scripted = ScriptedModel(
        {"lead": [delegate("slow", task="go"), tool_call("cancel_task", handle="bg-1"), "done"], "slow": ["s"]}
    )

    result, events = _run_sync(team, _HookReached(scripted))

    scripted.assert_complete()
    assert result.status == "done"
    assert_spans_end_once(events)
    assert _ended(events, "delegation") == [("slow", "ok")]  # what it came to before its hook was cancelled
    assert [(d.agent, d.status) for d in result.delegations] == [("slow", "ok")]
