"""The shared workspace of a run (``workspace:`` in the team file).

:mod:`~teamrun.engine.workspace.state` holds the entries (value, version, writers) and the merge rules,
with no I/O; :mod:`~teamrun.engine.workspace.tools` builds each agent's workspace tools from its
permissions; :mod:`~teamrun.engine.workspace.writes` is the one path a tool call takes: replayed from the
journal or applied, journaled and emitted as a ``workspace_write`` event; :mod:`~teamrun.engine.workspace.carry`
keeps it across the turns of a thread (``persist: thread``); :mod:`~teamrun.engine.workspace.live` finds a run's
workspace while the run lasts.
"""
