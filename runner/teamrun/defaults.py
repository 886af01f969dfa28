"""The safe defaults that apply when a team file sets nothing: every one can be raised in the file.

They keep a looping model or a hanging provider from running forever (and from
spending without bound); ``--json`` shows the values in force for a run.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from typing import Protocol

DEFAULT_MAX_STEPS = 25
"""Model calls one agent invocation may make when neither its ``budget.max_steps`` nor ``limits.max_steps`` is set."""

DEFAULT_MAX_TOKENS = 4096
"""``max_tokens`` sent with each model call when the agent and ``defaults`` set none."""

DEFAULT_REQUEST_TIMEOUT_S = 120.0
"""Seconds one model request may take before it is retried, when ``request_timeout_s`` is not set."""

DEFAULT_NUM_RETRIES = 3
"""Retries of a failed model request (429, 5xx, timeouts) when ``num_retries`` is not set."""

DEFAULT_MODEL = "offline"
"""The model of an agent when neither ``--model``, its own ``model:`` nor ``defaults.model`` names one:
the built-in simulator (no key, no network)."""

DEFAULT_ENTRY_BYTES = 64_000
"""A workspace entry's size cap (its value as compact JSON) when it sets no ``max_bytes``."""

DEFAULT_WORKSPACE_BYTES = 512_000
"""The cap on all workspace entries together when ``workspace.max_bytes`` is not set."""


API_BASE_ENV = "TEAMRUN_API_BASE"
"""The variable naming the endpoint of every agent that sets no ``api_base`` (when ``--api-base`` /
``api_base=`` is not given): ``TEAMRUN_MODEL=openai/my-model TEAMRUN_API_BASE=http://localhost:8000/v1``."""


class _HasModel(Protocol):
    @property
    def model(self) -> str | None: ...


class _HasApiBase(Protocol):
    @property
    def api_base(self) -> str | None: ...


def model_for(agent: _HasModel | None, defaults: _HasModel | None = None, *, override: str | None = None) -> str:
    """The model an agent uses: ``override`` (``--model``, ``model=``), else its own ``model:``, else
    ``defaults.model``, else :data:`DEFAULT_MODEL`. An empty value (``${VAR:-}``) counts as unset.
    ``agent=None``: a judge that names no model (``accept:``)."""
    return (
        override
        or (agent.model if agent is not None else None)
        or (defaults.model if defaults is not None else None)
        or DEFAULT_MODEL
    )


def team_models(
    agents: Iterable[_HasModel], defaults: _HasModel | None = None, *, override: str | None = None
) -> list[str]:
    """The models a team's agents call (:func:`model_for` of each), without repeats, in agent order. A remote
    (``a2a:``) agent calls no model of ours: it is left out (a team of remote agents only has none)."""
    chosen = [model_for(a, defaults, override=override) for a in agents if getattr(a, "a2a", None) is None]
    return list(dict.fromkeys(chosen))


def api_base_problem(url: str) -> str | None:
    """Why ``url`` cannot be a model endpoint (no ``http(s)://``, no host, a port out of range, user info),
    or ``None``: said before any call, rather than as a provider error after retries."""
    from urllib.parse import urlsplit

    shown = repr(_USER_INFO.sub("//***@", url))  # the URL said without the key it may carry
    try:
        parts = urlsplit(url.strip())
        port = parts.port
    except ValueError as exc:
        return f"{shown} is not a URL ({_USER_INFO.sub('//***@', str(exc))})"
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return f"{shown} is not an http(s) URL with a host, e.g. http://localhost:8000/v1"
    if parts.username is not None or parts.password is not None:
        return f"{shown} carries user info; give the key with api_key_env instead"
    del port
    return None


_USER_INFO = re.compile(r"//[^/?#@]*@")
"""The user info of a URL (``//user:key@``): never repeated in a message."""


def run_api_base(given: str | None = None) -> str | None:
    """The endpoint a run gives the agents that set none: ``given`` (``--api-base``, ``api_base=``), else
    ``$TEAMRUN_API_BASE``; ``None`` when neither is set. An empty ``given`` turns the variable off."""
    chosen = given if given is not None else os.environ.get(API_BASE_ENV)
    return (chosen.strip() or None) if chosen is not None else None


def api_base_for(
    agent: _HasApiBase | None, defaults: _HasApiBase | None = None, *, fallback: str | None = None
) -> str | None:
    """The endpoint an agent's model is called at: its own ``api_base:``, else ``defaults.api_base``, else
    ``fallback`` (the run's :func:`run_api_base`), else ``None`` (the provider's own). An empty value
    (``${VAR:-}``) counts as unset. The caller gives no ``fallback`` for the ``offline`` model."""
    return (
        (agent.api_base if agent is not None else None)
        or (defaults.api_base if defaults is not None else None)
        or fallback
        or None
    )
