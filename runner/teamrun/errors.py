"""teamrun's exception types.

Two families, kept apart on purpose:

* :class:`UserError` — the team file, the command line or user code is wrong.
  The message says how to fix it; the CLI prints it without a traceback and
  exits 2.
* :class:`RunError` — something went wrong while a team ran (a provider kept
  failing, a tool misbehaved). It carries whatever partial state exists so a
  caller never loses finished work.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from teamrun.config.diagnostics import Diagnostic

__all__ = [
    "ApprovalDenied",
    "ConfigError",
    "ModelError",
    "RemoteAgentError",
    "RunError",
    "StoreError",
    "TeamrunError",
    "ToolError",
    "UsageError",
    "UserError",
]


class TeamrunError(Exception):
    """Base of every error teamrun raises on purpose."""


class UserError(TeamrunError):
    """The user's configuration, command line or code is wrong (exit code 2)."""


class UsageError(UserError):
    """A command-line or API argument is wrong."""


class StoreError(UserError):
    """The store cannot be opened or used: a bad URL, an unreachable server, a database from a newer teamrun."""


class ConfigError(UserError):
    """A team file is invalid. ``diagnostics`` holds every problem found."""

    def __init__(self, diagnostics: list[Diagnostic]) -> None:
        self.diagnostics = diagnostics
        lines = [d.render() for d in diagnostics]
        super().__init__("\n".join(lines) if lines else "invalid team file")


class RunError(TeamrunError):
    """A run failed. ``partial`` is whatever result existed when it failed."""

    def __init__(self, message: str, *, partial: Any = None) -> None:
        super().__init__(message)
        self.partial = partial


class ModelError(RunError):
    """A model call failed for good (after retries), or answered nonsense."""


class RemoteAgentError(RunError):
    """A remote (``a2a:``) worker failed: down, an error reply, a task that failed or was rejected, a card or
    data that does not parse. The message names the agent and its URL; the delegating agent sees it as the
    worker's error result."""


class ToolError(RunError):
    """A tool failed. The message is what the model sees as the tool result."""


class ApprovalDenied(ToolError):
    """A tool call needing approval was denied."""
