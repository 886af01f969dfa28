"""How a cost in US dollars is written, everywhere teamrun shows one (CLI tables, eval reports, the run view).

One rule, so the same run reads the same in a terminal, a report and a browser: ``$`` and at least 4 decimals,
and at least 2 significant digits for a cost below $0.01 (up to 10 decimals): ``$0.0200``, ``$1.2345``,
``$0.0012``, ``$0.00012``, ``$0.0000031``; nothing spent is ``$0.0000``. Halves round up (away from zero), as
JavaScript's ``toFixed`` does: the run view's ``usd`` (``observe/view/view.js``) writes the same text.
A bottom-layer module: it imports nothing from teamrun.
"""

from __future__ import annotations

import math
from decimal import ROUND_HALF_UP, Decimal

__all__ = ["format_usd", "format_usd_limit", "usd_decimals"]

_MIN_DECIMALS = 4
_MAX_DECIMALS = 10


def usd_decimals(cost: float) -> int:
    """How many decimals :func:`format_usd` writes for ``cost``."""
    size = abs(cost)
    if not math.isfinite(size) or size == 0 or size >= 10**-_MIN_DECIMALS * 100:
        return _MIN_DECIMALS
    return min(_MAX_DECIMALS, max(_MIN_DECIMALS, 1 - math.floor(math.log10(size))))


def format_usd(cost: float | None) -> str:
    """``cost`` as ``$`` and at least 4 decimals (2 significant digits below $0.01): ``$0.0200``, ``$0.00012``."""
    value = float(cost or 0)
    if not math.isfinite(value):
        return "$-"
    places = usd_decimals(value)
    rounded = Decimal(value).quantize(Decimal(1).scaleb(-places), rounding=ROUND_HALF_UP)
    return ("-$" if rounded < 0 else "$") + f"{abs(rounded):.{places}f}"


def format_usd_limit(limit: float) -> str:
    """A ceiling (``max_cost_usd``) by the same rule, with more decimals (up to 10) where the rule would round it.

    ``$0.00000010`` for ``1e-07`` (never ``$1e-07``), ``$0.5000``, ``$0.012345`` for ``0.012345``: a check line
    ``cost <= $X`` states the limit it applies, not a rounded one.
    """
    value = float(limit)
    places = usd_decimals(value)
    while places < _MAX_DECIMALS and math.isfinite(value) and float(f"{value:.{places}f}") != value:
        places += 1
    if not math.isfinite(value):
        return "$-"
    rounded = Decimal(value).quantize(Decimal(1).scaleb(-places), rounding=ROUND_HALF_UP)
    return ("-$" if rounded < 0 else "$") + f"{abs(rounded):.{places}f}"
