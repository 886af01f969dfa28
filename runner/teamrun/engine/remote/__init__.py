"""Remote workers: agents declared with ``a2a:`` run elsewhere and are spoken to over A2A (a2a-sdk).

:mod:`.cards` reads their cards when a run starts (their delegation tools' descriptions);
:mod:`.worker` runs one delegation to one of them (:func:`teamrun.engine.turn.agent_loop.run_agent`, the one
dispatch by an agent's kind, hands ``a2a:`` agents to it), through :mod:`.client` (the A2A client),
:mod:`.exchange` (the conversation with the task), :mod:`.updates` (the task as its updates describe it) and
:mod:`.usage` (the tokens and cost it reports).
"""
