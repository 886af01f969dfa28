"""One boundary for what a model sends: a tool call whose arguments break a rule of :mod:`teamrun.bounds` (a lone
surrogate, NaN or infinity, a huge integer, deep nesting, too many bytes, not JSON) is refused before any tool,
workspace, board or delegation sees it: a JSON refusal the model reads, a ``tool_end`` error event, and the run
goes on (these were tracebacks: an ``OverflowError``, a ``UnicodeEncodeError``, a ``RecursionError``)."""

from __future__ import annotations

import asyncio
import json
import textwrap
from pathlib import Path
from typing import Any

import pytest

from teamrun.bounds import MAX_ARGUMENT_BYTES, MAX_DEPTH
from teamrun.engine.durability.journal import MemoryJournal, RunJournal
from teamrun.engine.team import load_team
from teamrun.events import Event
from teamrun.llm.types import ModelReply, ToolCall
from teamrun.store.records import JournaledRun
from teamrun.testing.scripted import ScriptedCall, ScriptedModel, tool_call

HUGE = "9" * 400
"""A 400-digit integer literal."""

DEEP = "[" * 900 + "]" * 900
"""A list 900 levels deep (``json.loads`` itself can give up on such nesting with a ``RecursionError``)."""

BAD_VALUES = {
    "integer": (HUGE, "integer"),
    "surrogate": ('"a\\ud800b"', "text"),
    "deep": (DEEP, "depth"),
    "nan": ("NaN", "number"),
    "infinity": ("-Infinity", "number"),
    "past a double": ("1e999", "number"),
}
"""Name → (a JSON-ish value text that breaks a rule, the rule it breaks)."""


def _reply(*calls: tuple[str, str]) -> ModelReply:
    """A reply calling tools with raw argument strings (what a provider hands back, unparsed)."""
    return ModelReply(
        None, tuple(ToolCall(f"c{i}", name, raw) for i, (name, raw) in enumerate(calls)), finish_reason="tool_calls"
    )


def _run(path: Path, model: ScriptedModel) -> tuple[Any, list[Event]]:
    events: list[Event] = []
    result = asyncio.run(load_team(path, chat_model=model).run("go", subscribers=[events.append]))
    return result, events


def _refusals(results: list[str]) -> list[dict[str, Any]]:
    refusals = [json.loads(r) for r in results]
    assert all(r["status"] == "refused" and r["reason"] == "arguments" for r in refusals), refusals
    return refusals


def _refused_ends(events: list[Event], tool: str) -> list[Event]:
    return [e for e in events if e.kind == "tool_end" and e.data["tool"] == tool and e.data["status"] == "error"]


WORKSPACE_TEAM = textwrap.dedent("""\
    version: 1
    name: bounds
    supervisor: lead
    workspace:
      entries:
        total: {schema: {type: number}, merge: sum, write: [lead]}
        note: {write: [lead]}
    agents:
      lead: {model: openai/lead}
    """)


def test_the_four_workspace_writes_that_were_tracebacks_are_refusals_and_the_run_goes_on(tmp_path: Path) -> None:
    path = tmp_path / "team.yaml"
    path.write_text(WORKSPACE_TEAM, encoding="utf-8")
    seen: list[ScriptedCall] = []

    def finish(call: ScriptedCall) -> str:
        seen.append(call)
        return "done"

    model = ScriptedModel(
        {
            "lead": [
                _reply(("workspace_write_total", f'{{"value": {HUGE}}}')),  # was applied to the sum
                _reply(("workspace_write_total", '{"value": 1.5}')),
                _reply(("workspace_write_total", f'{{"value": {HUGE}}}')),  # 1.5 + it: was an OverflowError
                _reply(("workspace_write_note", '{"value": "a\\ud800b", "version": 0}')),  # was a UnicodeEncodeError
                _reply(("workspace_write_note", f'{{"value": {DEEP}, "version": 0}}')),  # was a RecursionError
                tool_call("workspace_write_note", value="fine", version=0),
                finish,
            ]
        }
    )

    result, events = _run(path, model)

    model.assert_complete()
    assert result.status == "done" and result.final_text == "done", result.error
    results = [call.tool_results[0] for call in model.calls[1:6]]
    first, applied, second, surrogate, deep = (json.loads(r) for r in results)
    refusals = _refusals([results[0], results[2], results[3], results[4]])
    assert [r["rule"] for r in refusals] == ["integer", "integer", "text", "depth"]
    assert applied["status"] == "applied" and second == first
    assert (
        first["where"] == "value" and "400 digits" in first["message"] and "workspace_write_total" in first["message"]
    )
    assert "lone UTF-16 surrogate" in surrogate["message"] and f"{MAX_DEPTH}" in deep["message"]
    assert json.loads(seen[0].tool_results[0])["status"] == "applied"  # the model wrote again and went on
    assert result.workspace["entries"]["total"]["value"] == 1.5
    assert result.workspace["entries"]["note"]["value"] == "fine"
    writes = [(e.data["entry"], e.data["status"], e.data.get("reason")) for e in events if e.kind == "workspace_write"]
    refused = ("refused", "arguments")
    assert writes == [  # a refused call never reached the workspace; it is an event, as every refused write is
        ("total", *refused),
        ("total", "applied", None),
        ("total", *refused),
        ("note", *refused),
        ("note", *refused),
        ("note", "applied", None),
    ]
    ends = _refused_ends(events, "workspace_write_total") + _refused_ends(events, "workspace_write_note")
    assert len(ends) == 4 and all(e.data["error"].startswith("arguments refused (") for e in ends)


PYTHON_TEAM = textwrap.dedent("""\
    version: 1
    name: bounds
    supervisor: lead
    tools:
      record: {python: "probe_tools:record"}
    agents:
      lead: {model: openai/lead, tools: [record]}
    """)

PROBE_TOOLS = textwrap.dedent('''\
    from pathlib import Path
    from typing import Any


    def record(value: Any = None, text: str = "") -> str:
        """Record a value.

        Args:
            value: Anything.
            text: Some text.
        """
        with Path(__file__).with_name("calls.txt").open("a", encoding="utf-8") as out:
            out.write("called\\n")
        return "recorded"
    ''')


def test_the_same_inputs_to_a_python_tool_are_refused_before_it_runs(tmp_path: Path) -> None:
    path = tmp_path / "team.yaml"
    path.write_text(PYTHON_TEAM, encoding="utf-8")
    (tmp_path / "probe_tools.py").write_text(PROBE_TOOLS, encoding="utf-8")
    seen: list[ScriptedCall] = []
    calls = [("record", f'{{"value": {value}}}') for value, _ in BAD_VALUES.values()]
    calls += [("record", '{"text": "' + "x" * MAX_ARGUMENT_BYTES + '"}'), ("record", '{"value": [1, 2')]

    def finish(call: ScriptedCall) -> str:
        seen.append(call)
        return "done"

    model = ScriptedModel({"lead": [_reply(*calls), tool_call("record", value=[1, 2]), finish]})

    result, events = _run(path, model)

    model.assert_complete()
    assert result.status == "done", result.error
    refusals = _refusals(model.calls[1].tool_results)
    assert [r["rule"] for r in refusals] == [rule for _, rule in BAD_VALUES.values()] + ["size", "json"]
    assert "not valid JSON" in refusals[-1]["message"]
    assert seen[0].tool_results == ["recorded"]  # the good call ran
    assert (tmp_path / "calls.txt").read_text() == "called\n"  # and only it
    assert len(_refused_ends(events, "record")) == len(calls)
    assert result.agents["lead"].tool_calls == 1  # a refused call is not a tool call


DELEGATION_TEAM = textwrap.dedent("""\
    version: 1
    name: bounds
    supervisor: lead
    agents:
      lead: {model: openai/lead, delegates_to: [worker]}
      worker: {model: openai/worker, description: Does things.}
    """)


def test_the_same_inputs_in_a_delegation_are_refused_before_a_worker_starts(tmp_path: Path) -> None:
    path = tmp_path / "team.yaml"
    path.write_text(DELEGATION_TEAM, encoding="utf-8")
    calls = [("ask_worker", f'{{"task": "t", "context": {value}}}') for value, _ in BAD_VALUES.values()]
    calls.append(("ask_worker", '{"task": "half of a pair \\udfff"}'))
    model = ScriptedModel({"lead": [_reply(*calls), "done"]})  # no script for the worker: it must not run

    result, events = _run(path, model)

    model.assert_complete()
    assert result.status == "done", result.error
    refusals = _refusals(model.calls[1].tool_results)
    assert [r["rule"] for r in refusals] == [rule for _, rule in BAD_VALUES.values()] + ["text"]
    assert refusals[-1]["where"] == "task"
    assert not result.delegations and not [e for e in events if e.kind == "delegation_start"]
    assert len(_refused_ends(events, "ask_worker")) == len(calls)


def test_an_unknown_tool_is_still_an_unknown_tool_whatever_its_arguments(tmp_path: Path) -> None:
    path = tmp_path / "team.yaml"
    path.write_text(WORKSPACE_TEAM, encoding="utf-8")
    model = ScriptedModel({"lead": [_reply(("no_such_tool", '{"value": NaN}')), "done"]})

    result, _ = _run(path, model)

    assert result.status == "done"
    assert model.calls[1].tool_results[0].startswith("Error: there is no tool named 'no_such_tool'")


def test_a_lone_surrogate_character_itself_is_refused_and_never_sent_back_or_journaled_raw(tmp_path: Path) -> None:
    path = tmp_path / "team.yaml"
    path.write_text(WORKSPACE_TEAM, encoding="utf-8")
    backend = MemoryJournal()
    record = JournaledRun(run_id="r1", team="bounds", team_file=str(path), input="go")
    raw = '{"value": "a\ud800b", "version": 0}'  # the character a provider's JSON decoding can hand back, not \\ud800
    model = ScriptedModel({"lead": [_reply(("workspace_write_note", raw)), "done \udfff"]})
    events: list[Event] = []

    result = asyncio.run(
        load_team(path, chat_model=model).run("go", subscribers=[events.append], journal=RunJournal(backend, record))
    )

    model.assert_complete()
    assert result.status == "done", result.error
    (refusal,) = _refusals(model.calls[1].tool_results)
    assert refusal["rule"] == "text" and refusal["where"] == "value"
    sent_back = model.calls[1].messages[-2]["tool_calls"][0]["function"]["arguments"]
    assert sent_back == "{}"  # refused arguments are not sent back at all (test_refused_arguments_history.py)
    assert result.final_text == "done \\udfff"
    json.dumps([e.data for e in events], ensure_ascii=False).encode("utf-8")  # every event can be written


STRUCTURED_TEAM = textwrap.dedent("""\
    version: 1
    name: bounds
    supervisor: lead
    agents:
      lead: {model: openai/lead, output_schema: {type: array}}
    """)


@pytest.mark.parametrize(
    ("answer", "said"),
    [
        ("[" * 100_000 + "]" * 100_000, f"more than {MAX_DEPTH} deep"),  # json.loads: a RecursionError
        ("[" + "9" * 5000 + "]", "5000 digits"),  # json.loads: a ValueError (past its 4300 digits)
        ("[NaN]", "not a finite number"),  # json.loads reads it, and the schema's array takes it
    ],
)
def test_a_structured_answer_out_of_bounds_is_sent_back_for_repair(tmp_path: Path, answer: str, said: str) -> None:
    path = tmp_path / "team.yaml"
    path.write_text(STRUCTURED_TEAM, encoding="utf-8")
    model = ScriptedModel({"lead": [answer, "[1, 2]"]})

    result, _ = _run(path, model)

    model.assert_complete()
    assert result.status == "done" and json.loads(result.final_text) == [1, 2], result.error
    repair = model.calls[1].messages[-1]["content"]
    assert repair.startswith("Your answer does not match the required JSON Schema") and said in repair
