"""Keeping secrets out of everything teamrun writes down (traces, cassettes, logs, spans).

A :class:`Redactor` knows a set of secret values — the values of environment
variables whose names look secret (``*KEY*``, ``*TOKEN*``, ``*SECRET*``,
``*PASSWORD*``...) plus any the team file interpolated from such variables —
and replaces each occurrence with ``***`` in any string, list or mapping.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping
from typing import Any

__all__ = ["MASK", "Redactor", "secret_env_values"]

MASK = "***"

SECRET_NAME = re.compile(r"KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL", re.IGNORECASE)
"""Environment variable names whose values are treated as secrets."""

_MIN_SECRET_CHARS = 6
"""Shorter values (``1``, ``true``, ``yes``) are settings, not secrets; masking them would mangle text."""
_NOT_SECRETS = frozenset({"true", "false", "none", "null", "yes", "no", "on", "off"})
_KEYLIKE = re.compile(r"\b(?:sk|pk|rk)-[A-Za-z0-9_\-]{20,}|\bBearer\s+[A-Za-z0-9._~+/=\-]{12,}")
"""Provider-key shapes masked even when no variable holds them."""


def _is_secret_value(value: str) -> bool:
    return len(value) >= _MIN_SECRET_CHARS and value.strip().lower() not in _NOT_SECRETS


def secret_env_values(environ: Mapping[str, str] | None = None) -> set[str]:
    """Values of the environment variables whose names look secret."""
    env = os.environ if environ is None else environ
    return {value for name, value in env.items() if SECRET_NAME.search(name) and _is_secret_value(value)}


class Redactor:
    """Masks known secret values (longest first) and provider-key shapes."""

    def __init__(self, secrets: Iterable[str] = (), *, environ: Mapping[str, str] | None = None,
                 include_env: bool = True) -> None:
        found = set(secret_env_values(environ)) if include_env else set()
        found.update(s for s in secrets if s and _is_secret_value(s))
        self._secrets: list[str] = []
        self._pattern: re.Pattern[str] | None = None
        self.add(found)

    def add(self, secrets: Iterable[str]) -> None:
        """Also mask these values from now on."""
        merged = set(self._secrets) | {s for s in secrets if s and _is_secret_value(s)}
        self._secrets = sorted(merged, key=len, reverse=True)
        self._pattern = re.compile("|".join(map(re.escape, self._secrets))) if self._secrets else None

    @property
    def secrets(self) -> frozenset[str]:
        return frozenset(self._secrets)

    def text(self, value: str) -> str:
        """``value`` with every secret masked."""
        if self._pattern is not None:
            value = self._pattern.sub(MASK, value)
        return _KEYLIKE.sub(MASK, value)

    def value(self, value: Any) -> Any:
        """A copy of ``value`` (any JSON-like data) with every string masked; keys too."""
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, Mapping):
            return {self.text(str(k)): self.value(v) for k, v in value.items()}
        if isinstance(value, list | tuple | set | frozenset):
            return [self.value(v) for v in value]
        return value
