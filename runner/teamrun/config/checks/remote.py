"""Semantic checks of remote agents (``a2a:``): what runs remotely has no model, tools or workers here.

An ``a2a:`` agent is a worker whose loop runs in another process (another
framework, another machine): the fields that configure a local model loop
(``model``, ``tools``, ``delegates_to``, ``handoffs``, ``instructions``,
``output_schema``...) would be silently ignored, so they are errors; so is a
remote supervisor (the supervisor's loop runs here), a handoff to a remote agent (a handoff hands over the
conversation; a remote agent takes a task) and a remote peer (it can never touch the board). (``--import-check``
reads each remote agent's card from the CLI: :func:`teamrun.engine.remote.cards.check_cards`; the config layer
contacts nothing.)
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import TYPE_CHECKING

from teamrun.config.checks.raw import mapping, names
from teamrun.config.diagnostics import Diagnostic, JsonPath, dotted

if TYPE_CHECKING:
    from teamrun.config.checks.context import CheckContext

__all__ = ["LOCAL_ONLY_FIELDS", "looks_like_token", "remote_checks"]

LOCAL_ONLY_FIELDS = (
    "model",
    "api_base",
    "api_key_env",
    "temperature",
    "max_tokens",
    "request_timeout_s",
    "num_retries",
    "stream",
    "model_params",
    "fallbacks",
    "fallback_on",
    "instructions",
    "tools",
    "delegates_to",
    "handoffs",
    "delegation",
    "output_schema",
    "max_repair_turns",
    "accept",
    "max_attempts",
    "memory",
)
"""Agent fields that configure a model loop in this process: meaningless on an ``a2a:`` agent."""


def remote_checks(c: CheckContext) -> Iterator[Diagnostic]:
    """Each ``a2a:`` agent: no local-loop fields, not the supervisor, not a handoff's target, not a peer."""
    remote = [agent for agent, spec in c.agents.items() if spec.get("a2a") is not None]
    yield from _remote_agents(c, remote)
    yield from _handoffs_to_remote(c, remote)
    yield from _remote_peers(c, remote)


def _handoffs_to_remote(c: CheckContext, remote: list[str]) -> Iterator[Diagnostic]:
    for agent, spec in c.agents.items():
        for index, target in names(spec.get("handoffs")):
            if target in remote and target != agent:
                path: JsonPath = ("agents", agent, "handoffs", index)
                yield c.error(
                    path,
                    f"{dotted(path)}: agent '{target}' is a remote A2A agent (a2a:): a handoff hands over the "
                    "conversation, and a remote agent takes a task; use delegates_to instead",
                    "remote",
                )


def _remote_peers(c: CheckContext, remote: list[str]) -> Iterator[Diagnostic]:
    for index, peer in names(c.data.get("peers")):
        if peer in remote:
            yield c.error(
                ("peers", index),
                f"peers[{index}]: agent '{peer}' is a remote A2A agent (a2a:): a peer works on the board, which a "
                "remote agent can never touch; make a local peer that delegates to it",
                "remote",
            )


def _remote_agents(c: CheckContext, remote: list[str]) -> Iterator[Diagnostic]:
    for agent in remote:
        spec = c.agents[agent]
        base: JsonPath = ("agents", agent)
        for field in LOCAL_ONLY_FIELDS:
            if field in spec:
                yield c.error(
                    (*base, field),
                    f"{dotted((*base, field))}: agent '{agent}' is a remote A2A agent (a2a:); it runs its own "
                    f"loop elsewhere, so '{field}' cannot apply: remove it",
                    "remote",
                    key=True,
                )
        if agent == c.supervisor:
            yield c.error(
                (*base, "a2a"),
                f"agents.{agent}.a2a: the supervisor '{agent}' cannot be a remote A2A agent (its loop runs in "
                "teamrun); make a local supervisor that delegates to it",
                "remote",
                key=True,
            )
        auth = mapping(mapping(spec.get("a2a")).get("auth"))
        env = auth.get("bearer_env")
        if not isinstance(env, str) or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", env):
            continue  # not a name at all: the schema's error says so
        if looks_like_token(env):  # the value is not repeated: it may be the token
            yield c.warning(
                (*base, "a2a", "auth", "bearer_env"),
                f"{dotted((*base, 'a2a', 'auth', 'bearer_env'))}: the value looks like a token, not the name of "
                "the environment variable holding it (write the variable's name, e.g. AGENT_TOKEN)",
                "remote",
            )
        elif env.upper() in _NOT_TOKENS:
            yield c.warning(
                (*base, "a2a", "auth", "bearer_env"),
                f"{dotted((*base, 'a2a', 'auth', 'bearer_env'))}: {env} is a system variable, not a token's: its "
                "value would be sent as the bearer token",
                "remote",
            )


_NOT_TOKENS = frozenset({"PATH", "HOME", "USER", "SHELL", "PWD", "LANG", "TERM", "TMPDIR", "HOSTNAME", "LOGNAME"})
_TOKEN_PREFIXES = ("bearer", "ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_", "glpat", "sk-", "sk_", "xox")


def looks_like_token(value: str) -> bool:
    """Whether a ``bearer_env`` value is a token rather than a variable's name: a known token prefix, or a long
    run of hex, or a long mix of upper and lower case letters and digits (variable names are words)."""
    if value.lower().startswith(_TOKEN_PREFIXES):
        return True
    if len(value) >= 32 and re.fullmatch(r"[0-9a-fA-F]+", value):
        return True
    mixed = any(c.islower() for c in value) and any(c.isupper() for c in value) and any(c.isdigit() for c in value)
    return len(value) >= 24 and mixed and "_" not in value
