"""`teamrun serve --mcp`: each team is one MCP tool, called with the official `mcp` client SDK."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path
from typing import Any

from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client

import teamrun
from tests.cli_processes import child_env, serving
from tests.serve.conftest import REPO

RESEARCH = REPO / "teams" / "research-report.yaml"
TASK = "Compare Rust and Go for command-line tools"
ENV = {**os.environ, "PYTHONPATH": str(REPO / "runner"), "LITELLM_LOCAL_MODEL_COST_MAP": "True"}


async def list_and_call(client: Any) -> tuple[list[str], Any]:
    listing = await client.list_tools()
    called = await client.call_tool("research-report", {"input": TASK})
    return [tool.name for tool in listing.tools], called


def test_stdio_mcp_server_runs_the_team_as_a_tool(tmp_path: Path) -> None:
    expected = teamrun.load_team(RESEARCH, model="offline").run_sync(TASK).final_text
    params = StdioServerParameters(
        command=sys.executable,
        env=ENV,
        args=["-m", "teamrun.cli", "serve", str(RESEARCH), "--model", "offline", "--mcp", "stdio"],
    )

    async def main() -> tuple[list[str], Any]:
        with (tmp_path / "stderr.txt").open("w") as errlog:
            async with Client(stdio_client(params, errlog=errlog)) as client:  # type: ignore[arg-type]
                return await list_and_call(client)

    names, called = asyncio.run(asyncio.wait_for(main(), timeout=120))

    assert names == ["research-report"]
    assert called.is_error is False
    assert called.content[0].text == expected


def test_streamable_http_mcp_server_runs_the_team_as_a_tool(monkeypatch: Any) -> None:
    for name in ("NO_PROXY", "no_proxy"):
        monkeypatch.setenv(name, "127.0.0.1,localhost")
    expected = teamrun.load_team(RESEARCH, model="offline").run_sync(TASK).final_text
    args = [str(RESEARCH), "--model", "offline", "--mcp", "http"]
    with serving(*args, env=child_env(), ready="/mcp", ready_status=None) as server:

        async def main() -> tuple[list[str], Any]:
            async with Client(streamable_http_client(server.url + "/mcp")) as client:  # type: ignore[arg-type]
                return await list_and_call(client)

        names, called = asyncio.run(asyncio.wait_for(main(), timeout=120))
        server.stop()

    assert names == ["research-report"]
    assert called.content[0].text == expected


def test_another_team_calls_a_served_team_through_its_mcp_tool_entry(tmp_path: Path) -> None:
    from teamrun.testing.scripted import ScriptedCall, ScriptedModel, tool_call

    expected = teamrun.load_team(RESEARCH, model="offline").run_sync(TASK).final_text
    outer = tmp_path / "outer.yaml"
    outer.write_text(
        f"""\
version: 1
name: outer
supervisor: lead
agents:
  lead:
    description: Asks the research team.
    tools: [research]
tools:
  research:
    mcp:
      command: [{sys.executable}, -m, teamrun.cli, serve, {RESEARCH}, --model, offline, --mcp, stdio]
      env: {{PYTHONPATH: {REPO / "runner"}, LITELLM_LOCAL_MODEL_COST_MAP: "True"}}
""",
        encoding="utf-8",
    )
    offered: list[list[str]] = []

    def ask(call: ScriptedCall) -> Any:
        offered.append(call.tool_names)
        return tool_call(call.tool_names[0], input=TASK)

    model = ScriptedModel({"lead": [ask, lambda call: f"research said: {call.messages[-1].get('content')}"]})

    result = teamrun.load_team(outer, chat_model=model).run_sync("Ask the research team")

    assert offered == [["research_research-report"]]
    assert result.status == "done" and result.final_text == f"research said: {expected}"
    model.assert_complete()
