"""Python hooks for ``team.yaml`` (``call: sales.hooks:<function>`` under ``delegation.hooks``).

A hook gets one argument, a ``HookContext`` (``teamrun.engine.delegation.hooks``) with
``point``, ``agent`` (the worker), ``parent``, ``iteration``, ``depth``,
``vars``, ``prompt`` and, after a delegation, ``success``, ``error`` and
``result``. It returns ``None`` (change nothing) or a dict of actions:

* ``on_start``: ``reject``, ``prompt``, ``append_prompt``, ``max_steps``, ``context``
* ``on_complete``: ``result_text``, ``feedback``, ``bail``
* ``on_iteration``: ``feedback``, ``stop``

Hooks may be sync (run in a thread) or ``async``. One that raises is recorded
in ``result.hook_errors`` and ignored — unless the agent's hooks say
``on_error: fail``.
"""

from __future__ import annotations

import re
import time
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from teamrun.engine.delegation.hooks import HookContext

AUDIT: list[dict[str, Any]] = []
"""Every delegation this process saw (a real hook might write to a log or a database)."""

_FIGURE = re.compile(r"\d")


def audit(ctx: HookContext) -> None:
    """on_start and on_complete: remember who was asked what, and how it went."""
    AUDIT.append(
        {
            "point": ctx.point,
            "parent": ctx.parent,
            "agent": ctx.agent,
            "iteration": ctx.iteration,
            "success": ctx.success,
            "chars": len(ctx.result),
            "at": time.time(),
        }
    )


def require_figures(ctx: HookContext) -> dict[str, Any] | None:
    """on_complete acceptance check: an analyst's answer must quote figures from the tool.

    A failing answer is replaced, so the lead never passes on an unsupported claim.
    """
    if ctx.agent != "analyst" or not ctx.success:
        return None
    if _FIGURE.search(ctx.result):
        return None
    return {
        "result_text": "The analyst answered without any figures from sales_summary; treat it as unverified.",
        "feedback": "Ask the analyst again and require numbers taken from the sales_summary tool.",
    }


async def focus_on_region(ctx: HookContext) -> dict[str, Any] | None:
    """on_start (async): pass the team's region var on to the analyst as request context."""
    region = ctx.vars.get("region")
    if ctx.agent != "analyst" or not region:
        return None
    return {
        "append_prompt": f"Unless the task names another region, look at the {region} region.",
        "context": {"region": region},
    }
