"""The sales team's own code: a typed tool (``sales.tools``) and hooks (``sales.hooks``).

A package with a distinctive name, not loose ``tools.py`` / ``hooks.py`` next to
the team file: Python has one module namespace per process, and a ``tools``
module imported earlier from anywhere else would shadow a bare ``tools.py``.
"""
