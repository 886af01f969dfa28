"""``teamrun serve --mcp``: each team as one MCP tool (over stdio, or streamable HTTP).

The tool is named after the team, takes ``input`` (the supervisor's task) and
returns the team's answer; a run that fails or is cancelled is a tool error.
Runs go through :meth:`Team.run` like every other way in, with secrets masked.
Over HTTP the endpoint takes the server's bearer tokens like every other route
(:class:`~teamrun.serve.security.BearerAuth`): an MCP client sends
``Authorization: Bearer <token>`` with each request, as the MCP authorization
spec has it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Literal

from mcp.server.mcpserver import MCPServer

from teamrun import __version__
from teamrun.errors import RunError
from teamrun.secrets import Redactor
from teamrun.serve.security import BearerAuth

if TYPE_CHECKING:
    from teamrun.engine.team import Team

__all__ = ["McpTransport", "mcp_server", "serve_mcp"]

McpTransport = Literal["stdio", "http"]


def _team_tool(team: Team, redactor: Redactor) -> Callable[[str], Awaitable[str]]:
    async def run_team(input: str) -> str:
        result = await team.run(input)
        if result.status in ("failed", "cancelled"):
            raise RunError(redactor.text(f"the run {result.status}: {result.error or result.stopped_by or ''}"))
        text = result.final_text
        if result.status == "budget_exhausted":
            text += f"\n\n(stopped early: {result.stopped_by})"
        return redactor.text(text)

    return run_team


def mcp_server(teams: Sequence[Team]) -> MCPServer:
    """An MCP server offering one tool per team."""
    server: MCPServer = MCPServer(
        name="teamrun",
        version=__version__,
        log_level="WARNING",
        instructions="Each tool runs one team of agents on the task given as `input`.",
    )
    for team in teams:
        description = (team.config.description or f"Run the team '{team.name}'.") + (
            " Give the whole task as `input`; the answer is the team's final report."
        )
        server.add_tool(_team_tool(team, Redactor(team.loaded.secrets)), name=team.name, description=description)
    return server


def serve_mcp(
    teams: Sequence[Team], transport: McpTransport, *, host: str, port: int, tokens: frozenset[str] = frozenset()
) -> None:
    """Serve ``teams`` over MCP until stdin closes (stdio) or the process is stopped (HTTP).

    ``tokens``: over HTTP, the bearer tokens a request must carry (none: no auth, loopback only).
    """
    server = mcp_server(teams)
    if transport == "stdio":
        server.run("stdio")
        return
    import uvicorn

    app = server.streamable_http_app(host=host)
    config = uvicorn.Config(
        BearerAuth(app, tokens) if tokens else app,
        host=host,
        port=port,
        log_config=None,
        log_level="warning",
        server_header=False,
        proxy_headers=False,
    )
    uvicorn.Server(config).run()
