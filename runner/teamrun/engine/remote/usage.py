"""The tokens and cost a remote agent reports in ``metadata.usage``, believed only when they can be counted.

``prompt_tokens``/``input_tokens``, ``completion_tokens``/``output_tokens``, ``requests`` and ``cost_usd``/``cost``
are read. An agent that reports none, or a figure that is negative, not a number, not finite or absurdly large,
spends *unknown* tokens and cost — never a pretended 0.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from teamrun.llm.types import Usage

__all__ = ["MAX_REPORTED_COST_USD", "MAX_REPORTED_TOKENS", "reported_usage"]

MAX_REPORTED_TOKENS = 10**12
MAX_REPORTED_COST_USD = 10.0**9
"""Reported figures above these are not believed (unknown usage, a run warning)."""


class _Unusable(ValueError):
    pass


def reported_usage(reported: Mapping[str, Any] | None) -> tuple[Usage, float, bool]:
    """Tokens, cost and whether they are known, from what the agent reported (``None``: nothing)."""
    if not reported:
        return Usage(), 0.0, False
    try:
        usage = Usage(
            int(_number(reported, MAX_REPORTED_TOKENS, "prompt_tokens", "input_tokens")),
            int(_number(reported, MAX_REPORTED_TOKENS, "completion_tokens", "output_tokens")),
            int(_number(reported, MAX_REPORTED_TOKENS, "requests")) or 1,
        )
        return usage, _number(reported, MAX_REPORTED_COST_USD, "cost_usd", "cost"), True
    except _Unusable:
        return Usage(), 0.0, False


def _number(reported: Mapping[str, Any], most: float, *names: str) -> float:
    """The first of ``names`` reported (0 when none is); :class:`_Unusable` when it cannot be counted."""
    for name in names:
        value = reported.get(name)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise _Unusable(name)
        if not math.isfinite(value) or value < 0 or value > most:
            raise _Unusable(name)
        return float(value)
    return 0.0
