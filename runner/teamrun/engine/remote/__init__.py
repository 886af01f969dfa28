"""Remote workers: agents declared with ``a2a:`` run elsewhere and are spoken to over A2A (a2a-sdk).

:mod:`.cards` reads their cards when a run starts (their delegation tools' descriptions);
:mod:`.worker` runs one delegation to one of them, as the delegator's ``run_agent`` does a local
agent's loop (:func:`teamrun.engine.turn.agent_loop.run_agent` hands ``a2a:`` agents to it).
"""
