"""The team file: read, checked and typed, without running anything (``teamrun validate`` imports nothing else).

- Loading and models, the public front: :mod:`.loader` (``check_file``, ``load_config``), :mod:`.yamlsrc`,
  :mod:`.interpolate`, :mod:`.schema`, :mod:`.models`, :mod:`.diagnostics`, :mod:`.templates`; and the rules the
  engine shares with the checks (:mod:`.tool_names`, :mod:`.imports`, :mod:`.programs`, :mod:`.workflow_workspace`).
- :mod:`.checks`: the semantic checks, one module per concern over one ``CheckContext``.
- :mod:`.graph`: the team drawn as Mermaid.

Nothing here contacts the network (an ``a2a:`` agent's card is the engine's: ``engine/remote/cards.py``).
"""
