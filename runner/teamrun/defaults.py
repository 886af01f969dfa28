"""The safe defaults that apply when a team file sets nothing: every one can be raised in the file.

They keep a looping model or a hanging provider from running forever (and from
spending without bound); ``--json`` shows the values in force for a run.
"""

from __future__ import annotations

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


class _HasModel(Protocol):
    @property
    def model(self) -> str | None: ...


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
