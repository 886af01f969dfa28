"""The semantic checks of a team file (``teamrun validate``), one module per concern.

Every check receives a :class:`~teamrun.config.checks.context.CheckContext` (the file, its data, where each
value is, ``error``/``warning``) and yields located diagnostics; :mod:`~teamrun.config.checks.semantic` runs
them all in one order (:func:`~teamrun.config.checks.semantic.check_semantics`). No check module imports the
runner, and nothing here contacts the network or reads a secret.
"""
