"""Where the store is: a file path or a SQLAlchemy URL, and the documented default (no SQLAlchemy here)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

STORE_ENV = "TEAMRUN_STORE"
"""Environment variable naming the store (a file path or a SQLAlchemy URL)."""


def default_store_location(environ: Mapping[str, str] | None = None) -> str:
    """``$TEAMRUN_STORE``, else ``$XDG_DATA_HOME/teamrun/teamrun.db`` (``~/.local/share/teamrun/teamrun.db``)."""
    env = os.environ if environ is None else environ
    if env.get(STORE_ENV):
        return env[STORE_ENV]
    data_home = env.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return str(Path(data_home) / "teamrun" / "teamrun.db")


def is_url(location: str) -> bool:
    """A SQLAlchemy URL (``dialect[+driver]://...``) rather than a file path."""
    head, sep, _ = location.partition("://")
    return bool(sep) and head.replace("+", "").replace("_", "").isalnum()


def resolve_store_url(location: str | os.PathLike[str] | None, environ: Mapping[str, str] | None = None) -> str:
    """The SQLAlchemy URL for ``location`` (a URL, a file path, or ``None`` for the default)."""
    chosen = default_store_location(environ) if location is None else os.fspath(location)
    if is_url(chosen):
        return chosen
    return f"sqlite:///{Path(chosen).expanduser().resolve()}"


def missing_store_file(
    location: str | os.PathLike[str] | None, environ: Mapping[str, str] | None = None
) -> Path | None:
    """The store's file when ``location`` names a SQLite file that does not exist (a command that only reads
    says so instead of creating it, and its folders, at a mistyped path); ``None`` otherwise."""
    chosen = default_store_location(environ) if location is None else os.fspath(location)
    if is_url(chosen):
        return None
    path = Path(chosen).expanduser().resolve()
    return None if path.exists() else path


__all__ = ["STORE_ENV", "default_store_location", "is_url", "missing_store_file", "resolve_store_url"]
