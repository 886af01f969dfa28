"""Tool sources (entries that expand into several functions, like an MCP server) in a run's tool tables.

A source is started only when an agent that declares it builds its tool table,
once per run however many agents use it, and closed when the run ends — also
when it fails. Its functions share the agent's one namespace: a clash is a
UserError naming both sides.
"""

from __future__ import annotations

import asyncio
import textwrap
from pathlib import Path
from typing import Any

import pytest

import teamrun
from teamrun.errors import UserError
from teamrun.testing import ScriptedModel, delegate, tool_call
from teamrun.tools.base import Tool, ToolSource, ToolSpec, object_schema


class EchoFunction(Tool):
    def __init__(self, name: str) -> None:
        self.spec = ToolSpec(name, f"The {name} function.", object_schema({"q": {"type": "string"}}, []))

    async def run(self, arguments: dict[str, Any]) -> str:
        return f"{self.spec.name}: {arguments.get('q', '')}"


class FakeSource(ToolSource):
    def __init__(self, entry: str, functions: tuple[str, ...] = ("search", "fetch")) -> None:
        self.entry = entry
        self.functions = functions
        self.log: list[str] = []

    async def tools(self) -> list[Tool]:
        self.log.append("start")
        return [EchoFunction(name) for name in self.functions]

    async def aclose(self) -> None:
        self.log.append("close")


TEAM = """\
version: 1
name: sources
supervisor: lead
agents:
  lead: {delegates_to: [a, b]}
  a: {description: A., tools: [mcp]}
  b: {description: B., tools: [mcp]}
tools:
  mcp: {command: [echo, placeholder]}
"""


def _team(tmp_path: Path, model: ScriptedModel, source: FakeSource, body: str = TEAM) -> teamrun.Team:
    path = tmp_path / "team.yaml"
    path.write_text(textwrap.dedent(body), encoding="utf-8")
    team = teamrun.load_team(path, chat_model=model)
    team.tools["mcp"] = source  # what the MCP registry will put there
    return team


def test_a_source_no_running_agent_uses_is_never_started(tmp_path: Path) -> None:
    source = FakeSource("mcp")
    model = ScriptedModel({"lead": ["answered without help"]})

    result = _team(tmp_path, model, source).run_sync("hi")

    assert result.status == "done"
    assert source.log == []
    model.assert_complete()


def test_two_agents_share_one_started_source_closed_at_run_end(tmp_path: Path) -> None:
    source = FakeSource("mcp")
    model = ScriptedModel(
        {
            "lead": [delegate("a", "b", task="look"), "both answered"],
            "a": [tool_call("search", q="x"), "a found x"],
            "b": [tool_call("fetch", q="y"), "b fetched y"],
        }
    )

    result = _team(tmp_path, model, source).run_sync("go")

    assert result.status == "done", result.error
    assert source.log == ["start", "close"]
    offered = {call.agent: call.tool_names for call in model.calls if call.turn == 1}
    assert offered["a"] == ["search", "fetch"] and offered["b"] == ["search", "fetch"]
    assert model.calls_of("a")[1].tool_results == ["search: x"]
    model.assert_complete()


def test_a_started_source_is_closed_when_the_run_fails(tmp_path: Path) -> None:
    source = FakeSource("mcp")
    model = ScriptedModel({"lead": [delegate("a", task="look")], "a": ["a answered"]})  # lead's 2nd call: none

    result = _team(tmp_path, model, source).run_sync("go")

    assert result.status == "failed" and "has used up its script" in (result.error or "")
    assert source.log == ["start", "close"]


def test_a_source_function_that_clashes_with_a_delegation_tool_names_both(tmp_path: Path) -> None:
    source = FakeSource("mcp", functions=("ask_b", "search"))
    body = TEAM.replace("lead: {delegates_to: [a, b]}", "lead: {delegates_to: [a, b], tools: [mcp]}")
    model = ScriptedModel({})

    with pytest.raises(UserError) as raised:
        _team(tmp_path, model, source, body).run_sync("go")

    message = str(raised.value)
    assert "'ask_b'" in message
    assert "the delegation tool for 'b'" in message and "the function 'ask_b' of the tool entry 'mcp'" in message
    assert model.calls == []  # found before the first model call
    assert source.log == ["start", "close"]


class BrokenSource(FakeSource):
    async def tools(self) -> list[Tool]:
        self.log.append("start")
        raise OSError("no such server")


def test_a_source_that_cannot_start_fails_the_run_with_a_message(tmp_path: Path) -> None:
    source = BrokenSource("mcp")
    body = TEAM.replace("lead: {delegates_to: [a, b]}", "lead: {tools: [mcp]}")

    result = _team(tmp_path, ScriptedModel({}), source, body).run_sync("go")

    assert result.status == "failed"
    assert result.error == "tool entry 'mcp' could not be started: OSError: no such server"
    assert source.log == ["start", "close"]


class StallingFunction(EchoFunction):
    def __init__(self, name: str, started: asyncio.Event) -> None:
        super().__init__(name)
        self.started = started

    async def run(self, arguments: dict[str, Any]) -> str:
        self.started.set()
        await asyncio.sleep(60)
        return "never"


class StallingSource(FakeSource):
    def __init__(self, entry: str, started: asyncio.Event) -> None:
        super().__init__(entry)
        self.started = started

    async def tools(self) -> list[Tool]:
        self.log.append("start")
        return [StallingFunction("search", self.started)]


def test_a_started_source_is_closed_when_the_run_is_interrupted(tmp_path: Path) -> None:
    body = TEAM.replace("lead: {delegates_to: [a, b]}", "lead: {tools: [mcp]}")

    async def scenario() -> tuple[teamrun.RunResult, FakeSource]:
        cancel = asyncio.Event()
        source = StallingSource("mcp", cancel)  # the tool call in flight asks for the interrupt
        team = _team(tmp_path, ScriptedModel({"lead": [tool_call("search", q="x")]}), source, body)
        return await team.run("go", cancel=cancel), source

    result, source = asyncio.run(scenario())

    assert result.status == "cancelled"
    assert source.log == ["start", "close"]
