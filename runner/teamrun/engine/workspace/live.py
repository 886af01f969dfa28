"""The workspaces of the runs in progress in this process, by run id (read by ``teamrun serve``).

:meth:`~teamrun.engine.team.Team.run` registers its run's workspace here as it starts; the entry goes
away with the run (a weak reference). Only :func:`~teamrun.engine.workspace.writes.run_workspace_call`
writes a workspace: readers take a :meth:`~teamrun.engine.workspace.state.WorkspaceState.snapshot`.
"""

from __future__ import annotations

import weakref

from teamrun.engine.workspace.state import WorkspaceState

__all__ = ["live_workspace", "watch"]

_LIVE: weakref.WeakValueDictionary[str, WorkspaceState] = weakref.WeakValueDictionary()


def watch(run_id: str, state: WorkspaceState) -> None:
    """Make ``state`` the workspace of run ``run_id`` while the run lasts."""
    _LIVE[run_id] = state


def live_workspace(run_id: str) -> WorkspaceState | None:
    """The workspace of run ``run_id`` in progress in this process, if there is one."""
    return _LIVE.get(run_id)
