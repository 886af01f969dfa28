"""teamrun: run teams of LLM agents declared in YAML.

    import teamrun
    team = teamrun.load_team("teams/research-report.yaml")
    result = team.run_sync("Compare Rust and Go")

Importing this package is cheap: the engine (and LiteLLM behind it) loads on
first use of :func:`load_team`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from teamrun._version import __version__

__all__ = [
    "ConfigError",
    "DelegationResult",
    "RunError",
    "RunResult",
    "Team",
    "UserError",
    "__version__",
    "load_team",
]

if TYPE_CHECKING:
    from teamrun.engine.result import DelegationResult, RunResult
    from teamrun.engine.team import Team, load_team
    from teamrun.errors import ConfigError, RunError, UserError

_LAZY = {
    "load_team": "teamrun.engine.team",
    "Team": "teamrun.engine.team",
    "RunResult": "teamrun.engine.result",
    "DelegationResult": "teamrun.engine.result",
    "ConfigError": "teamrun.errors",
    "RunError": "teamrun.errors",
    "UserError": "teamrun.errors",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'teamrun' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module), name)
