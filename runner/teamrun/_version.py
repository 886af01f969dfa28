"""The package's version: the one place it is written (``pyproject.toml`` reads it for the build).

Kept in a module of its own, with no imports, so that ``teamrun --version`` costs nothing beyond
the interpreter and click: :mod:`importlib.metadata` alone took about a third of that command.
"""

__version__ = "0.1.0"
