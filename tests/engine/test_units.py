"""The engine's rules, one function at a time: plan_turn, next_step, BudgetLedger, the tool table.

In-process and fast: no model, no HTTP, no subprocess.
"""

from __future__ import annotations

import asyncio
import json
import textwrap
from pathlib import Path

import pytest

from teamrun.config.loader import LoadedConfig, load_config
from teamrun.config.models import Limits
from teamrun.engine.limits.ledger import BudgetLedger, LimitReached, RunCeiling
from teamrun.engine.result import DelegationResult
from teamrun.engine.tool_sources import StartedSources
from teamrun.engine.turn.tool_table import ToolTable, build_tool_table
from teamrun.engine.turn.turn_plan import (
    Bail,
    CallResult,
    Control,
    Delegate,
    ExtraTransfer,
    FinalOutput,
    HandedOff,
    HandOff,
    Refused,
    RunAgain,
    RunTool,
    Stop,
    Transfer,
    Unknown,
    next_step,
    plan_turn,
)
from teamrun.errors import UserError
from teamrun.llm.types import ModelReply, ToolCall, Usage
from teamrun.tools.registry import build_tools

TEAM = """\
    version: 1
    name: units
    supervisor: lead
    agents:
      lead:
        delegates_to: [writer]
        handoffs: [helpdesk, billing]
        tools: [lookup]
        delegation: {background: true}
      writer: {description: Writes.}
      helpdesk: {description: Answers questions.}
      billing: {description: Answers billing questions.}
    tools:
      lookup:
        python: unittools:lookup
    """

TOOLS = '''\
def lookup(query: str) -> str:
    """Look something up.

    Args:
        query: What to look up.
    """
    return query
'''


@pytest.fixture
def loaded(tmp_path: Path) -> LoadedConfig:
    (tmp_path / "unittools.py").write_text(TOOLS, encoding="utf-8")
    path = tmp_path / "team.yaml"
    path.write_text(textwrap.dedent(TEAM), encoding="utf-8")
    return load_config(path)


def _table(loaded: LoadedConfig, agent: str = "lead", allowed: frozenset[str] | None = None) -> ToolTable:
    tools = build_tools(loaded.config.tools or {}, base_dir=loaded.base_dir)
    return asyncio.run(build_tool_table(loaded.config, tools, StartedSources(), agent, allowed=allowed))


def _call(name: str, **arguments: object) -> ToolCall:
    return ToolCall(f"id_{name}", name, json.dumps(arguments))


# -- the tool table -------------------------------------------------------------------------------------


def test_the_tool_table_offers_delegation_background_handoff_and_team_tools_in_order(loaded: LoadedConfig) -> None:
    table = _table(loaded)

    assert table.names == [
        "ask_writer",
        "wait_for",
        "check_tasks",
        "cancel_task",
        "transfer_to_helpdesk",
        "transfer_to_billing",
        "lookup",
    ]
    kinds = {e.name: e.kind for e in table.entries}
    assert kinds["ask_writer"] == "delegation" and kinds["transfer_to_billing"] == "handoff"
    assert kinds["lookup"] == "tool" and kinds["cancel_task"] == "background"
    handoff = table.get("transfer_to_helpdesk")
    assert handoff is not None and handoff.target == "helpdesk"
    assert [s["function"]["name"] for s in table.schemas] == table.names


def test_a_narrowed_task_withholds_tools_but_keeps_delegation(loaded: LoadedConfig) -> None:
    table = _table(loaded, allowed=frozenset())

    assert "lookup" not in table.names and "ask_writer" in table.names
    assert table.withheld == frozenset({"lookup"})


def test_two_functions_of_one_name_are_refused() -> None:
    from teamrun.config.tool_names import OfferedName
    from teamrun.engine.turn.tool_table import TableEntry

    schema = {"type": "function", "function": {"name": "x", "parameters": {}}}
    entries = [
        TableEntry(OfferedName("x", "tool", "a"), "tool", schema),
        TableEntry(OfferedName("x", "tool", "b"), "tool", schema),
    ]
    with pytest.raises(UserError, match="x"):
        ToolTable("lead", entries)


# -- plan_turn ----------------------------------------------------------------------------------------------


def test_plan_turn_sorts_calls_into_actions_and_only_the_first_transfer_counts(loaded: LoadedConfig) -> None:
    table = _table(loaded)
    reply = ModelReply(
        None,
        tool_calls=(
            _call("ask_writer", task="t"),
            _call("lookup", query="q"),
            _call("transfer_to_helpdesk"),
            _call("transfer_to_billing"),
            _call("wait_for", handles=["bg-1"]),
            _call("nope"),
        ),
    )

    plan = plan_turn(reply, table)

    kinds = [type(a) for a in plan.actions]
    assert kinds == [Delegate, RunTool, Transfer, ExtraTransfer, Control, Unknown]
    delegate, _, transfer, extra, _, unknown = plan.actions
    assert isinstance(delegate, Delegate) and delegate.worker == "writer"
    assert isinstance(transfer, Transfer) and transfer.target == "helpdesk"
    assert isinstance(extra, ExtraTransfer) and extra.first == "helpdesk"
    assert isinstance(unknown, Unknown) and "there is no tool named 'nope'" in unknown.message()
    assert not plan.is_answer


def test_a_reply_without_tool_calls_is_an_answer_and_a_withheld_tool_says_so(loaded: LoadedConfig) -> None:
    assert plan_turn(ModelReply(text="done"), _table(loaded)).is_answer
    (unknown,) = plan_turn(ModelReply(None, tool_calls=(_call("lookup"),)), _table(loaded, allowed=frozenset())).actions
    assert isinstance(unknown, Unknown) and "is not allowed for this task" in unknown.message()


# -- next_step ------------------------------------------------------------------------------------------------


def _result(*signals: object) -> CallResult:
    return CallResult(_call("x"), "", tuple(signals))  # type: ignore[arg-type]


def test_next_step_a_bail_wins_then_a_handoff_then_a_limit_then_a_refusal_then_a_hook() -> None:
    done = DelegationResult("writer", "t", "ok", "FINAL")
    limit = LimitReached("limits.max_tool_calls", 3)
    depth = LimitReached("limits.max_depth", 1)

    assert next_step([_result(limit), _result(HandedOff("b")), _result(Bail(done))]) == FinalOutput("FINAL")
    assert next_step([_result(limit), _result(HandedOff("b"))]) == HandOff("b")
    assert next_step([_result(Refused(depth)), _result(limit)], hook_stop="stop") == Stop(limit)
    assert next_step([_result(Refused(depth))], hook_stop="stop") == Stop(depth, budget=False)
    assert next_step([_result()], hook_stop="wrap up") == Stop("wrap up", budget=False)
    assert next_step([_result()]) == RunAgain()


def test_a_stop_names_its_reason_for_the_last_turn() -> None:
    stop = Stop(LimitReached("agents.x.budget.max_steps", 4, default=True))
    assert stop.reason.startswith("agents.x.budget.max_steps (4, teamrun's default")
    assert stop.note.endswith("has been reached")
    assert Stop("a hook asked", budget=False).note == "a hook asked"


# -- BudgetLedger ---------------------------------------------------------------------------------------------


def test_a_child_spends_from_its_parents_budget_and_tokens_stop_the_next_model_call() -> None:
    root = BudgetLedger(Limits(max_total_tokens=100), label="limits")
    lead = root.child(None, label="agents.lead.budget", depth=0, agent="lead")
    worker = lead.child(Limits(max_steps=5), label="agents.w.budget", depth=1, agent="w")

    worker.charge_model(Usage(60, 30, 1), 0.01)
    assert lead.check_before_model_call() is None
    worker.charge_model(Usage(5, 5, 1), 0.0)

    assert str(lead.check_before_model_call()) == "limits.max_total_tokens (100)"
    assert root.spend.total_tokens == 100 and lead.own.usage.total_tokens == 0 and worker.spend.steps == 2
    assert root.per_agent()["w"].invocations == 1


def test_steps_use_teamrun_s_default_and_say_so() -> None:
    ledger = BudgetLedger(None, label="agents.lead.budget", max_steps=None)
    for _ in range(ledger.max_steps):
        assert ledger.check_before_model_call() is None
        ledger.charge_model(Usage(), 0.0)
    reached = ledger.check_before_model_call()
    assert reached is not None and reached.default and "teamrun's default" in str(reached)


def test_a_counted_limit_that_refused_stays_reached_for_agents_that_spend_on_it() -> None:
    root = BudgetLedger(Limits(max_tool_calls=1), label="limits")
    lead = root.child(None, label="agents.lead.budget", depth=0)
    assert lead.check_before_tool_call() is None
    lead.charge("tool_calls")

    assert str(lead.check_before_tool_call()) == "limits.max_tool_calls (1)"
    assert lead.check_before_model_call(frozenset({"tool_calls"})) is not None
    assert lead.check_before_model_call(frozenset()) is None  # an agent without tools goes on


def test_depth_counts_levels_below_the_ledger_that_sets_it() -> None:
    root = BudgetLedger(Limits(max_depth=1), label="limits")
    assert root.check_depth(1) is None
    assert str(root.check_depth(2)) == "limits.max_depth (1)"


def test_a_run_ceiling_sits_above_the_run_and_is_named_by_its_label() -> None:
    top = RunCeiling(max_tokens=50, label="row").ledger()
    lead = top.child(None, label="limits", depth=0).child(None, label="agents.lead.budget", depth=0)
    lead.charge_model(Usage(40, 20, 1), 0.0)

    assert str(lead.check_spent()) == "row.max_tokens (50)"
    assert lead.root.overshoot() == {"row.max_tokens": {"limit": 50, "used": 60, "over": 10}}
    assert lead.tokens_left(5) == -15
