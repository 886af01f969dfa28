"""The workspaces of the runs in progress in this process, by run id (read by ``teamrun serve``).

:meth:`~teamrun.engine.team.Team.run` registers its run's workspace here as it starts; the entry goes
away with the run (a weak reference). Only :func:`~teamrun.engine.workspace.changes.apply_change` changes a
workspace: readers take a :meth:`~teamrun.engine.workspace.state.WorkspaceState.snapshot`.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass

from teamrun.engine.workspace.state import WorkspaceState

__all__ = ["LiveWorkspace", "live_workspace", "watch"]


@dataclass(frozen=True)
class LiveWorkspace:
    """A run's workspace in progress, and the version it started at (a thread's kept one, else 0)."""

    state: WorkspaceState
    started_at: int


_LIVE: weakref.WeakValueDictionary[str, WorkspaceState] = weakref.WeakValueDictionary()
_STARTS: dict[str, int] = {}


def watch(run_id: str, state: WorkspaceState, *, started_at: int = 0) -> None:
    """Make ``state`` the workspace of run ``run_id`` while the run lasts."""
    _LIVE[run_id] = state
    _STARTS[run_id] = started_at
    weakref.finalize(state, _STARTS.pop, run_id, None)


def live_workspace(run_id: str) -> LiveWorkspace | None:
    """The workspace of run ``run_id`` in progress in this process, if there is one."""
    state = _LIVE.get(run_id)
    return None if state is None else LiveWorkspace(state, _STARTS.get(run_id, 0))
