"""Moved to :mod:`teamrun.secrets` (the bottom layer, so ``llm`` and ``logs`` need not import ``observe``)."""

from __future__ import annotations

from teamrun.secrets import MASK, SECRET_NAME, Redactor, secret_env_values

__all__ = ["MASK", "SECRET_NAME", "Redactor", "secret_env_values"]
