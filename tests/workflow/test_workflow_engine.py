"""Workflow rules in process, on the scripted model through ``Team.run`` and ``teamrun execute``:
routes on a boolean field, hooks that bail, limits that refuse map items, judges' usage, step names on events.

Order and overlap are read from what the model saw and the events recorded, never from the wall clock.
"""

from __future__ import annotations

import asyncio
import json
import textwrap
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

import teamrun
from teamrun.events import Event
from teamrun.llm.types import Message, ModelReply, ModelSettings, ToolSchema, current_scope
from teamrun.testing.scripted import ScriptedCall, ScriptedModel
from tests.cli_run import run_cli
from tests.waiting import wait_until_async

GUARD_S = 120.0
"""Only a guard against a hang: no assertion depends on it."""


def _write(tmp_path: Path, body: str, **modules: str) -> Path:
    for name, source in modules.items():
        (tmp_path / f"{name}.py").write_text(textwrap.dedent(source), encoding="utf-8")
    path = tmp_path / "team.yaml"
    path.write_text(textwrap.dedent(body), encoding="utf-8")
    return path


def _run(
    team: Path, model: Any, input: str = "go", events: list[Event] | None = None
) -> tuple[teamrun.RunResult, list[Event]]:
    events = [] if events is None else events

    async def run() -> teamrun.RunResult:
        loaded = teamrun.load_team(team, chat_model=model)
        return await asyncio.wait_for(loaded.run(input, subscribers=[events.append]), GUARD_S)

    return asyncio.run(run()), events


def _echo(call: ScriptedCall) -> str:
    return f"did {call.task}"


# -- route ---------------------------------------------------------------------------------------

ROUTE_ON_A_BOOLEAN = """\
    version: 1
    name: gate
    workflow:
      steps:
        - id: check
          agent: checker
          route:
            on: ok
            branches:
              true:
                - agent: publisher
              "false":
                - agent: fixer
            default:
              - agent: fallback
    agents:
      checker:
        output_schema: {type: object, properties: {ok: {type: boolean}}, required: [ok]}
      publisher: {description: Publishes.}
      fixer: {description: Fixes.}
      fallback: {description: Never meant to run here.}
    """


@pytest.mark.parametrize(("ok", "branch", "agent"), [(True, "true", "publisher"), (False, "false", "fixer")])
def test_a_route_on_a_boolean_field_takes_its_true_or_false_branch(
    tmp_path: Path, ok: bool, branch: str, agent: str
) -> None:
    model = ScriptedModel({"checker": [json.dumps({"ok": ok})], agent: [_echo]})
    result, events = _run(_write(tmp_path, ROUTE_ON_A_BOOLEAN), model)
    assert result.status == "done", result.error
    assert [d.agent for d in result.delegations] == ["checker", agent]
    steps = [e.data.get("step") for e in events if e.kind == "delegation_start"]
    assert steps == ["check", f"check>{branch}/{agent}"]
    model.assert_complete()


# -- limits and events ---------------------------------------------------------------------------

CHAIN = """\
    version: 1
    name: chain
    limits: {max_delegations: 2}
    workflow:
      steps:
        - agent: a
        - agent: b
        - id: last
          agent: c
    agents:
      a: {description: A.}
      b: {description: B.}
      c: {description: C.}
    """


def test_a_step_refused_by_a_limit_names_its_step_on_its_delegation_events(tmp_path: Path) -> None:
    model = ScriptedModel({"a": [_echo], "b": [_echo]})
    result, events = _run(_write(tmp_path, CHAIN), model)
    assert (result.status, result.stopped_by) == ("budget_exhausted", "limits.max_delegations (2)")
    starts = [(e.data["worker"], e.data.get("step")) for e in events if e.kind == "delegation_start"]
    assert starts == [("a", "a"), ("b", "b"), ("c", "last")]
    assert [(d.agent, d.status) for d in result.delegations] == [("a", "ok"), ("b", "ok"), ("c", "rejected")]
    # the limit is a `budget` event, as when it stops an agent
    (budget,) = [e for e in events if e.kind == "budget"]
    assert (budget.data["limit"], budget.data["value"]) == ("limits.max_delegations", 2)
    model.assert_complete()


# -- hooks ---------------------------------------------------------------------------------------

BAILING = """\
    version: 1
    name: bail
    workflow:
      hooks:
        on_complete:
          - when: "success and result.startswith('FINAL')"
            bail: true
      steps:
        - agent: a
        - id: fan
          map: steps.a.output.items
          agent: b
        - agent: c
      output: "never rendered: {{ steps.c.text }}"
    agents:
      a:
        output_schema: {type: object, properties: {items: {type: array, items: {type: string}}}, required: [items]}
      b: {description: B.}
      c: {description: C.}
    """


def _final_or_echo(call: ScriptedCall) -> str:
    return call.task if call.task.startswith("FINAL") else f"did {call.task}"


def test_a_workflow_hook_that_bails_in_a_map_ends_the_workflow_with_that_result(tmp_path: Path) -> None:
    model = ScriptedModel({"a": [json.dumps({"items": ["x", "FINAL y", "FINAL z", "w"]})], "b": [_final_or_echo] * 4})
    result, _ = _run(_write(tmp_path, BAILING), model)
    assert result.status == "done", result.error
    # every item of the map ran (none is cut off); the first one that bailed, in the list's order, is the answer
    assert sorted(d.task for d in result.delegations if d.agent == "b") == ["FINAL y", "FINAL z", "w", "x"]
    assert result.final_text == "FINAL y"
    assert "c" not in [d.agent for d in result.delegations]  # the next step did not run
    model.assert_complete()


def test_a_workflow_hook_that_bails_on_a_plain_step_skips_the_steps_after_it(tmp_path: Path) -> None:
    body = BAILING.replace("map: steps.a.output.items", "input: FINAL {{ steps.a.output.items | join(',') }}")
    model = ScriptedModel({"a": [json.dumps({"items": ["x", "y"]})], "b": [_final_or_echo]})
    result, _ = _run(_write(tmp_path, body), model)
    assert (result.status, result.final_text) == ("done", "FINAL x,y")
    assert [d.agent for d in result.delegations] == ["a", "b"]
    model.assert_complete()


# -- a map under a limit ----------------------------------------------------------------------------

LIMITED_MAP = """\
    version: 1
    name: limited-map
    limits: {max_delegations: 4}
    workflow:
      max_concurrency: 6
      steps:
        - id: plan
          agent: planner
        - id: research
          map: steps.plan.output.items
          agent: researcher
        - agent: writer
    agents:
      planner:
        output_schema: {type: object, properties: {items: {type: array, items: {type: string}}}, required: [items]}
      researcher: {description: R.}
      writer: {description: W.}
    """
ITEMS = ["a", "b", "c", "d", "e", "f"]


class _HeldUntilRefused:
    """The scripted model, except that each researcher's answer waits until the items past the limit have been
    refused: the items the limit allows are still at the provider when the later items are refused."""

    def __init__(self, scripted: ScriptedModel, events: list[Event]) -> None:
        self.scripted = scripted
        self.events = events

    def _refused(self) -> int:
        return sum(1 for e in self.events if e.kind == "delegation_end" and e.data.get("status") == "rejected")

    async def complete(
        self,
        messages: Sequence[Message],
        *,
        settings: ModelSettings,
        tools: Sequence[ToolSchema] = (),
        response_format: Mapping[str, Any] | None = None,
    ) -> ModelReply:
        scope = current_scope.get()
        if scope is not None and scope.agent_path[-1:] == ("researcher",):
            await wait_until_async(lambda: self._refused() == 3, "the three items past the limit refused")
        return await self.scripted.complete(messages, settings=settings, tools=tools, response_format=response_format)


def _limited_map_model() -> ScriptedModel:
    return ScriptedModel({"planner": [json.dumps({"items": ITEMS})], "researcher": [_echo] * 3})


def _assert_the_allowed_items_ran(result: teamrun.RunResult, events: list[Event], model: ScriptedModel) -> None:
    assert (result.status, result.stopped_by) == ("budget_exhausted", "limits.max_delegations (4)")
    assert sorted(c.task for c in model.calls_of("researcher")) == ["a", "b", "c"]
    ran = {d.task: d.status for d in result.delegations if d.agent == "researcher"}
    assert ran == {"a": "ok", "b": "ok", "c": "ok", "d": "rejected", "e": "rejected", "f": "rejected"}
    steps = sorted(e.data.get("step") or "" for e in events if e.kind == "delegation_start")
    assert steps == ["plan", *(f"research[{i}]" for i in range(6))]
    assert "writer" not in [d.agent for d in result.delegations]
    assert result.final_text.endswith("- research: did a\n\ndid b\n\ndid c")
    model.assert_complete()


@pytest.mark.parametrize("answers", ["instant", "held"])
def test_a_map_under_max_delegations_runs_the_items_it_allows_then_stops(tmp_path: Path, answers: str) -> None:
    """The first items of the list that the limit allows run to the end, whatever the timing; the rest are
    refused, and the workflow stops after the map with what those items gave."""
    scripted = _limited_map_model()
    events: list[Event] = []
    model = scripted if answers == "instant" else _HeldUntilRefused(scripted, events)
    result, events = _run(_write(tmp_path, LIMITED_MAP), model, events=events)
    _assert_the_allowed_items_ran(result, events, scripted)
    if answers == "held":  # the allowed items were in flight when the others were refused
        ends = [e.data["status"] for e in events if e.kind == "delegation_end" and e.agent == "workflow"]
        assert ends == ["ok", "rejected", "rejected", "rejected", "ok", "ok", "ok"]


HOOKS = """\
    import threading

    entered = {}

    def on_start(context):
        entered.setdefault(context.prompt, threading.Event()).set()
        if context.prompt == "a":  # the first item's hook finishes after the second item's has started
            entered.setdefault("b", threading.Event()).wait(120)
    """


def test_a_map_under_max_delegations_admits_its_first_items_when_on_start_hooks_take_time(tmp_path: Path) -> None:
    body = LIMITED_MAP.replace(
        "      max_concurrency: 6\n",
        "      max_concurrency: 6\n      hooks:\n        on_start:\n          - call: map_hooks:on_start\n",
    )
    scripted = _limited_map_model()
    result, events = _run(_write(tmp_path, body, map_hooks=HOOKS), scripted)
    _assert_the_allowed_items_ran(result, events, scripted)


# -- usage ---------------------------------------------------------------------------------------------

JUDGED_LOOP = """\
    version: 1
    name: judged
    workflow:
      steps:
        - id: polish
          loop:
            max_iterations: 2
            until:
              - judge: {rubric: Says it is good.}
            steps:
              - agent: writer
    agents:
      writer: {description: Writes.}
    """


def _served(events: Sequence[Event]) -> dict[str, int]:
    """Tokens of every model call the run made, from the ``llm_end`` events."""
    total = {"input_tokens": 0, "output_tokens": 0, "total_tokens": 0, "requests": 0}
    for event in events:
        if event.kind == "llm_end":
            for name in total:
                total[name] += event.data["usage"].get(name, 0)
    return total


def test_a_loops_judge_calls_are_in_the_usage_the_run_reports(tmp_path: Path) -> None:
    model = ScriptedModel(
        {
            "writer": ["draft one", "draft two"],
            "until:judge": ['{"score": 0.2, "reason": "not yet"}', '{"score": 0.9, "reason": "good"}'],
        }
    )
    result, events = _run(_write(tmp_path, JUDGED_LOOP), model)
    assert (result.status, result.final_text) == ("done", "draft two")
    served = _served(events)
    assert served["requests"] == 4
    assert result.as_dict()["usage"] == served
    judge = [e.data["usage"]["total_tokens"] for e in events if e.kind == "llm_end" and e.agent == "workflow"]
    assert len(judge) == 2
    assert result.agents["workflow"].usage.total_tokens == sum(judge)
    ended = [e.data["usage"]["total_tokens"] for e in events if e.kind == "agent_end" and e.agent == "workflow"]
    assert ended == [sum(judge)]  # the workflow's own span says what its own calls spent
    model.assert_complete()


def test_teamrun_execute_json_reports_the_usage_every_model_call_was_charged(tmp_path: Path) -> None:
    team = _write(tmp_path, JUDGED_LOOP)
    trace = tmp_path / "trace.jsonl"
    result = run_cli(
        ["execute", str(team), "-i", "go", "--json", "--progress", "none", "--model", "offline", "--trace", str(trace)]
    )
    assert result.code == 0, result.err
    usage = json.loads(result.out)["usage"]
    lines = [json.loads(line) for line in trace.read_text(encoding="utf-8").splitlines() if line.strip()]
    ends = [line["data"]["usage"] for line in lines if line.get("kind") == "llm_end"]
    assert len(ends) == 4  # two drafts, two judgements
    assert usage == {name: sum(u.get(name, 0) for u in ends) for name in usage}
