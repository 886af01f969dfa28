"""`teamrun serve --mcp http` takes the server's bearer tokens like every other route, and refuses text that is
not Unicode before any model call (issue 22, serve items 3 and 4). Driven with the official `mcp` client."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

import teamrun
from tests.cli_processes import child_env, serving
from tests.fakeserver import FakeOpenAI
from tests.serve.conftest import REPO, TOKEN, solo_team

RESEARCH = REPO / "teams" / "research-report.yaml"
TASK = "Compare Rust and Go for command-line tools"
INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "test", "version": "1"}},
}
MCP_HEADERS = {"content-type": "application/json", "accept": "application/json, text/event-stream"}


def serve_mcp_http(args: list[str], tokens: str | None) -> Iterator[str]:
    """``teamrun serve ... --mcp http`` in a process of its own; yields the endpoint's URL."""
    env = child_env()
    env.pop("TEAMRUN_API_TOKENS", None)
    if tokens is not None:
        env["TEAMRUN_API_TOKENS"] = tokens
    with serving(*args, "--mcp", "http", env=env, ready="/mcp", ready_status=None) as server:
        try:
            yield server.url + "/mcp"
        finally:
            server.stop()


@pytest.fixture
def research_mcp() -> Iterator[str]:
    yield from serve_mcp_http([str(RESEARCH), "--model", "offline"], TOKEN)


async def call_research(url: str, headers: dict[str, str] | None) -> tuple[list[str], Any]:
    async with (
        create_mcp_http_client(headers=headers) as http_client,
        Client(streamable_http_client(url, http_client=http_client)) as client,
    ):  # type: ignore[arg-type]
        listing = await client.list_tools()
        called = await client.call_tool("research-report", {"input": TASK})
    return [tool.name for tool in listing.tools], called


def test_the_mcp_endpoint_refuses_a_client_without_the_bearer_token(research_mcp: str) -> None:
    url = research_mcp

    without = httpx.post(url, json=INIT, headers=MCP_HEADERS, timeout=30)
    wrong = httpx.post(
        url, json=INIT, headers={**MCP_HEADERS, "Authorization": "Bearer not-the-token-0123456789"}, timeout=30
    )
    with pytest.raises(ExceptionGroup) as sdk_refused:
        asyncio.run(asyncio.wait_for(call_research(url, None), timeout=60))

    for response in (without, wrong):
        assert response.status_code == 401
        assert response.headers["www-authenticate"] == "Bearer"
        assert response.json()["error"]["code"] == "invalid_api_key"
    assert "Server returned an error response" in repr(sdk_refused.value)  # the SDK's word for the 401


def test_an_mcp_client_with_the_bearer_token_runs_the_team(research_mcp: str) -> None:
    expected = teamrun.load_team(RESEARCH, model="offline").run_sync(TASK).final_text

    names, called = asyncio.run(
        asyncio.wait_for(call_research(research_mcp, {"Authorization": f"Bearer {TOKEN}"}), timeout=120)
    )

    assert names == ["research-report"]
    assert called.is_error is False and called.content[0].text == expected


def test_a_lone_surrogate_in_the_mcp_input_is_400_before_any_provider_call(
    tmp_path: Path, fake_openai: FakeOpenAI
) -> None:
    team_file = solo_team(tmp_path, model="openai/gpt-4o-mini", api_base=fake_openai.url)
    auth = {"Authorization": f"Bearer {TOKEN}"}
    for url in serve_mcp_http([str(team_file)], TOKEN):
        with httpx.Client(headers={**MCP_HEADERS, **auth}, timeout=60) as client:
            started = client.post(url, json=INIT)
            session = {"mcp-session-id": started.headers["mcp-session-id"], "mcp-protocol-version": "2025-06-18"}
            client.post(url, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=session)
            call = {
                "jsonrpc": "2.0",
                "id": 2,
                "method": "tools/call",
                "params": {"name": "solo", "arguments": {"input": "\udfff A"}},
            }
            answer = client.post(url, content=json.dumps(call), headers=session)  # \udfff escaped, as JSON allows

    # The MCP endpoint's JSON-RPC parser refuses it with 400, the status the HTTP API answers (invalid_text).
    assert answer.status_code == 400
    assert answer.json()["error"]["code"] == -32700 and "surrogate" in answer.json()["error"]["message"]
    assert fake_openai.requests() == []


def test_another_team_calls_the_served_team_with_the_token_in_its_mcp_headers(
    research_mcp: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from teamrun.testing.scripted import ScriptedCall, ScriptedModel, tool_call

    expected = teamrun.load_team(RESEARCH, model="offline").run_sync(TASK).final_text
    monkeypatch.setenv("RESEARCH_TOKEN", TOKEN)
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
      url: {research_mcp}
      headers: {{Authorization: "Bearer ${{RESEARCH_TOKEN}}"}}
""",
        encoding="utf-8",
    )

    def ask(call: ScriptedCall) -> Any:
        return tool_call(call.tool_names[0], input=TASK)

    model = ScriptedModel({"lead": [ask, lambda call: f"research said: {call.messages[-1].get('content')}"]})

    result = teamrun.load_team(outer, chat_model=model).run_sync("Ask the research team")

    assert result.status == "done" and result.final_text == f"research said: {expected}"
    model.assert_complete()


def test_mcp_over_http_beyond_loopback_without_tokens_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from teamrun.cli import main

    monkeypatch.delenv("TEAMRUN_API_TOKENS", raising=False)

    code = main(["serve", str(solo_team(tmp_path)), "--mcp", "http", "--host", "0.0.0.0"])

    assert code == 2
    assert "refusing to serve on 0.0.0.0 without auth: set bearer tokens" in capsys.readouterr().err
