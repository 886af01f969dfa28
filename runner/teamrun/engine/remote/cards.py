"""When a run starts: each remote worker's card, read once, becomes what its delegation tool says of it."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from teamrun.config.models import RemoteAgent, TeamConfig
from teamrun.config.remote_card import CardProblem, bearer_token, card_cuts, card_description, fetch_card
from teamrun.errors import RemoteAgentError

if TYPE_CHECKING:
    from a2a.types.a2a_pb2 import AgentCard

__all__ = ["CardCache", "card_key", "describe_remote_agents", "remote_tokens"]

CardCache = dict[tuple[str, str | None], "AgentCard"]
"""The cards one run has read, by :func:`card_key`: each is fetched once per run (when the run starts, for the
delegation tools' descriptions) and the delegations use that copy; a card that changes while the run goes on is
not read again (the next run reads it). A card that could not be read is not kept: a delegation tries again."""


def card_key(spec: RemoteAgent) -> tuple[str, str | None]:
    """Where a card is cached: the agent's URL and the variable of its token (the same URL with other
    credentials may answer with another card)."""
    return spec.url, spec.auth.bearer_env if spec.auth else None


async def describe_remote_agents(config: TeamConfig, cards: CardCache | None = None) -> tuple[TeamConfig, list[str]]:
    """``config`` with each ``a2a:`` agent's description taken from its card (name, description, skills),
    and a warning for each card that could not be read (that agent keeps the file's description, or
    ``Remote A2A agent at <url>.``; delegating to it then tries to read the card again, and fails with the
    reason if it still cannot). Each card read is put in ``cards`` (the run's, used by its delegations);
    agents that share a URL (and token) read it once."""
    cards = {} if cards is None else cards
    remote = {name: agent for name, agent in config.agents.items() if agent.a2a is not None}
    if not remote:
        return config, []

    reads: dict[tuple[str, str | None], asyncio.Task[AgentCard]] = {}

    async def one(name: str) -> tuple[str, str | None] | RemoteAgentError:
        spec = remote[name].a2a
        assert spec is not None
        try:
            token = bearer_token(name, spec.auth.bearer_env if spec.auth else None)
            key = card_key(spec)
            if key not in reads:
                reads[key] = asyncio.ensure_future(fetch_card(spec.url, token=token, timeout_s=spec.timeout_s))
            card = await reads[key]
        except (CardProblem, RemoteAgentError) as exc:
            return exc
        cards[key] = card
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
