"""The store: one database for threads, run records and run journals.

    from teamrun.store import open_store
    store = open_store()                    # the default SQLite file
    store = open_store("runs.db")           # a file path
    store = open_store("postgresql+psycopg://user@host/teamrun")   # any SQLAlchemy URL

Where the default file lives: ``$TEAMRUN_STORE`` if set (a path or a URL), else
``$XDG_DATA_HOME/teamrun/teamrun.db`` (``~/.local/share/teamrun/teamrun.db``).
Nothing is created until a store is opened, and only features that need one
(threads, journaling) open it. Importing this package is cheap: SQLAlchemy
loads when :func:`open_store` is called.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from teamrun.errors import StoreError
from teamrun.store.location import default_store_location, resolve_store_url

if TYPE_CHECKING:
    from teamrun.store.db import Store, open_store

__all__ = ["Store", "StoreError", "default_store_location", "open_store", "resolve_store_url"]


def __getattr__(name: str) -> Any:
    if name in ("Store", "open_store"):
        from teamrun.store import db

        return getattr(db, name)
    raise AttributeError(f"module 'teamrun.store' has no attribute {name!r}")
