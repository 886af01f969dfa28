"""The shared workspace of a run (``workspace:`` in the team file).

:mod:`~teamrun.engine.workspace.state` holds the entries (value, version, writers) and the merge rules,
with no I/O; :mod:`~teamrun.engine.workspace.changes` is the one path every change takes (an agent's workspace
or board call, a workflow step's write, the peer driver's): answered from the journal, or applied, journaled
and emitted; :mod:`~teamrun.engine.workspace.tools` builds each agent's workspace tools from its
permissions; :mod:`~teamrun.engine.workspace.writes` runs an agent's workspace call;
:mod:`~teamrun.engine.workspace.carry` keeps it across the turns of a thread (``persist: thread``);
:mod:`~teamrun.engine.workspace.live` finds a run's workspace while the run lasts.
"""
