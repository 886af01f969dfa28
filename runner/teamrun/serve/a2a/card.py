"""A served team's A2A agent card: who it is (the team file's name and description), what it does (one skill:
the team, answered by its supervisor), where to call it, and the bearer token it needs."""

from __future__ import annotations

from typing import TYPE_CHECKING

from teamrun._version import __version__

if TYPE_CHECKING:
    from a2a.types import AgentCard

    from teamrun.engine.team import Team

__all__ = ["A2A_PREFIX", "CARD_PATH", "SECURITY_SCHEME", "agent_card", "endpoint_path"]

A2A_PREFIX = "/a2a/"
"""Every A2A path starts with this: ``/a2a/<team>`` (JSON-RPC) and its card below it."""
CARD_PATH = "/.well-known/agent-card.json"
"""The card's path under a team's endpoint (where a2a-sdk's card resolver looks)."""
SECURITY_SCHEME = "bearer"
"""The name of the card's security scheme (HTTP bearer: the server's API tokens)."""


def endpoint_path(team: str) -> str:
    """The path of ``team``'s JSON-RPC endpoint."""
    return A2A_PREFIX + team


def _description(team: Team) -> str:
    config = team.config
    if config.description:
        return config.description
    lead = config.agents.get(config.supervisor or "")
    if lead is not None and lead.description:
        return lead.description
    return f"The teamrun team {config.name}."


def agent_card(team: Team, base_url: str, *, auth: bool) -> AgentCard:
    """The card of ``team`` served at ``base_url`` (scheme, host and port the client reached)."""
    from a2a.types import (
        AgentCapabilities,
        AgentCard,
        AgentInterface,
        AgentSkill,
        HTTPAuthSecurityScheme,
        SecurityRequirement,
        SecurityScheme,
        StringList,
    )

    config = team.config
    url = base_url.rstrip("/") + endpoint_path(team.name)
    lead = config.agents.get(config.supervisor or "")
    tags = ["teamrun", *(lead.delegates_to or [] if lead is not None else [])]
    card = AgentCard(
        name=team.name,
        description=_description(team),
        version=__version__,
        supported_interfaces=[
            AgentInterface(url=url, protocol_binding="JSONRPC", protocol_version="1.0"),
            AgentInterface(url=url, protocol_binding="JSONRPC", protocol_version="0.3"),
        ],
        capabilities=AgentCapabilities(streaming=True, push_notifications=False, extended_agent_card=False),
        default_input_modes=["text/plain", "application/json"],
        default_output_modes=["text/plain"],
        skills=[
            AgentSkill(
                id=team.name,
                name=team.name,
                description=_description(team),
                tags=tags,
                input_modes=["text/plain", "application/json"],
                output_modes=["text/plain"],
            )
        ],
    )
    if auth:
        card.security_schemes[SECURITY_SCHEME].CopyFrom(
            SecurityScheme(
                http_auth_security_scheme=HTTPAuthSecurityScheme(
                    scheme="bearer",
                    description="One of the server's API tokens ($TEAMRUN_API_TOKENS or --token-file): "
                    "Authorization: Bearer <token>",
                )
            )
        )
        requirement = SecurityRequirement()
        requirement.schemes[SECURITY_SCHEME].CopyFrom(StringList())
        card.security_requirements.append(requirement)
    return card
