"""``teamrun tools``: every function each agent is offered, with its description and parameters."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import click

HELP = """List, per agent, every tool its model is offered: delegation and handoff
tools, python and command tools, the tools of MCP servers (which are
started to ask them, then stopped), and the workspace tools its permissions
give it. Nothing else runs and no model is called.

\b
Examples:
  teamrun tools teams/repo-explainer.yaml
  teamrun tools team.yaml --agent researcher --format json
"""


@click.command(help=HELP, short_help="List the tools each agent gets (starts MCP servers to ask them).")
@click.argument("team_file", type=click.Path(dir_okay=False))
@click.option("--agent", "agents", multiple=True, metavar="NAME", help="Only this agent (repeatable).")
@click.option(
    "--format",
    "output_format",
    type=click.Choice(["text", "json"]),
    default="text",
    show_default=True,
    help="For people, or for programs.",
)
def tools(team_file: str, agents: tuple[str, ...], output_format: str) -> int:
    from teamrun.config.loader import load_config
    from teamrun.errors import UsageError

    loaded = load_config(team_file)
    unknown = [a for a in agents if a not in loaded.config.agents]
    if unknown:
        raise UsageError(f"no agent named {', '.join(unknown)}; agents are: {', '.join(loaded.config.agents)}")
    listing = asyncio.run(offered_tools(loaded, list(agents) or list(loaded.config.agents)))
    if output_format == "json":
        click.echo(json.dumps(listing, indent=2, ensure_ascii=False))
    else:
        click.echo(render(listing), nl=False)
    return 0


async def offered_tools(loaded: Any, agents: list[str]) -> dict[str, list[dict[str, Any]]]:
    """``{agent: [{name, origin, description, parameters}, ...]}``, in offer order: each agent's
    tool table, built as a run builds it (MCP servers started to ask them, stopped after)."""
    from teamrun.engine.tool_sources import StartedSources, tools_for_run
    from teamrun.engine.turn.tool_table import build_tool_table
    from teamrun.tools.registry import build_tools

    config = loaded.config
    table = tools_for_run(build_tools(config.tools or {}, base_dir=loaded.base_dir, secrets=loaded.secrets))
    sources = StartedSources()
    listing: dict[str, list[dict[str, Any]]] = {}
    try:
        for agent in agents:
            items = listing.setdefault(agent, [])
            for entry in (await build_tool_table(config, table, sources, agent)).entries:
                origin = (
                    entry.kind
                    if entry.kind != "tool"
                    else (f"mcp:{entry.offered.source}" if entry.offered.origin == "source" else "tool")
                )
                item = _entry(entry.schema["function"], origin)
                if entry.tool is not None:
                    item["require_approval"] = entry.tool.require_approval
                items.append(item)
    finally:
        await sources.aclose()
    return listing


def _entry(function: Any, origin: str) -> dict[str, Any]:
    return {
        "name": function["name"],
        "origin": origin,
        "description": function.get("description") or "",
        "parameters": dict(function.get("parameters") or {}),
    }


def _parameter_lines(schema: dict[str, Any]) -> list[str]:
    required = set(schema.get("required") or [])
    lines = []
    for name, prop in dict(schema.get("properties") or {}).items():
        prop = prop if isinstance(prop, dict) else {}
        kind = prop.get("type") or "/".join(str(o.get("type")) for o in prop.get("anyOf") or [] if isinstance(o, dict))
        if "enum" in prop:
            kind = " | ".join(json.dumps(v) for v in prop["enum"])
        flag = (
            "required"
            if name in required
            else (f"default {json.dumps(prop['default'])}" if "default" in prop else "optional")
        )
        described = f" — {prop['description']}" if prop.get("description") else ""
        lines.append(f"      {name}: {kind or 'any'} ({flag}){described}")
    return lines


def render(listing: dict[str, list[dict[str, Any]]]) -> str:
    """The listing as text: one block per agent, one entry per function."""
    out: list[str] = []
    for agent, functions in listing.items():
        out.append(f"{agent}:")
        if not functions:
            out.append("  (no tools)")
        for item in functions:
            note = " [asks for approval]" if item.get("require_approval") else ""
            out.append(f"  {item['name']}  ({item['origin']}){note}")
            if item["description"]:
                out.append(f"    {' '.join(item['description'].split())}")
            params = _parameter_lines(item["parameters"])
            out.extend(["    parameters:", *params] if params else ["    parameters: none"])
        out.append("")
    return "\n".join(out)
