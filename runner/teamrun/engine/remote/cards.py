"""When a run starts: each remote worker's card, read once, becomes what its delegation tool says of it."""

from __future__ import annotations

import asyncio

from teamrun.config.models import TeamConfig
from teamrun.config.remote_card import CardProblem, bearer_token, card_cuts, card_description, fetch_card
from teamrun.errors import RemoteAgentError

__all__ = ["describe_remote_agents", "remote_tokens"]


async def describe_remote_agents(config: TeamConfig) -> tuple[TeamConfig, list[str]]:
    """``config`` with each ``a2a:`` agent's description taken from its card (name, description, skills),
    and a warning for each card that could not be read (that agent keeps the file's description, or
    ``Remote A2A agent at <url>.``; delegating to it then fails with the reason)."""
    remote = {name: agent for name, agent in config.agents.items() if agent.a2a is not None}
    if not remote:
        return config, []

    async def one(name: str) -> tuple[str, str | None] | RemoteAgentError:
        spec = remote[name].a2a
        assert spec is not None
        try:
            token = bearer_token(name, spec.auth.bearer_env if spec.auth else None)
            card = await fetch_card(spec.url, token=token, timeout_s=spec.timeout_s)
        except (CardProblem, RemoteAgentError) as exc:
            return exc
        return card_description(card, remote[name].description), card_cuts(card)

    found = await asyncio.gather(*(one(name) for name in remote))
    agents = dict(config.agents)
    warnings: list[str] = []
    for name, got in zip(remote, found, strict=True):
        spec = remote[name].a2a
        assert spec is not None
        described = got if isinstance(got, RemoteAgentError) else got[0]
        if not isinstance(got, RemoteAgentError) and got[1]:
            warnings.append(f"remote agent '{name}' ({spec.url}): {got[1]}")
        if isinstance(described, RemoteAgentError):
            warnings.append(f"remote agent '{name}' ({spec.url}): {described}; its delegations will fail")
            if not remote[name].description:
                agents[name] = remote[name].model_copy(update={"description": f"Remote A2A agent at {spec.url}."})
        else:
            agents[name] = remote[name].model_copy(update={"description": described})
    return config.model_copy(update={"agents": agents}), warnings


def remote_tokens(config: TeamConfig) -> set[str]:
    """The bearer tokens of the run's remote agents that are set (masked in everything the run writes)."""
    import os

    return {
        token
        for agent in config.agents.values()
        if agent.a2a is not None and agent.a2a.auth is not None
        if (token := os.environ.get(agent.a2a.auth.bearer_env, "").strip())
    }
