"""One run of a team with ceilings of its own (cost, tokens, wall time), stopped when it passes one.

The engine's limits come from the team file; a case or a batch row adds its own
ceilings on top. Tokens and cost are the engine's to enforce (``Team.run(ceiling=...)``:
checked before each model call, like every limit); wall time is enforced from
outside, a timer setting the run's ``cancel`` event.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from teamrun.engine.limits.ledger import RunCeiling
from teamrun.engine.result import RunResult
from teamrun.engine.team import Team
from teamrun.events import Event, LlmEnd

__all__ = ["Ceiling", "GuardedRun", "run_guarded"]


@dataclass(frozen=True)
class Ceiling:
    """Spending and time one run may not exceed (``None``: no ceiling)."""

    max_cost_usd: float | None = None
    max_tokens: int | None = None
    max_latency_s: float | None = None
    label: str = "ceiling"
    """Where the ceilings come from, for messages (``cases[2]``, ``--row-max-cost``)."""


@dataclass
class GuardedRun:
    """A finished run and the ceiling that stopped it, if one did."""

    result: RunResult
    latency_s: float
    stopped_by_ceiling: str | None = None
    spent: dict[str, float] = field(default_factory=dict)

    @property
    def tokens(self) -> int:
        return self.result.usage.total_tokens

    @property
    def cost(self) -> float:
        return self.result.cost


class _Meter:
    def __init__(self, ceiling: Ceiling, cancel: asyncio.Event, on_call: Callable[[Mapping[str, int]], None] | None):
        self.ceiling = ceiling
        self.cancel = cancel
        self.tokens = 0
        self.cost = 0.0
        self.tripped: str | None = None
        self.on_call = on_call

    def __call__(self, event: Event) -> None:
        if not isinstance(event, LlmEnd):
            return
        self.tokens += int(event.usage.get("total_tokens", 0))
        self.cost += event.cost
        if self.on_call is not None:
            self.on_call(event.usage)

    def trip(self, why: str) -> None:
        if self.tripped is None:
            self.tripped = why
            self.cancel.set()


async def run_guarded(
    team: Team,
    task: str,
    ceiling: Ceiling,
    *,
    subscribers: tuple[Any, ...] = (),
    on_call: Callable[[Mapping[str, int]], None] | None = None,
) -> GuardedRun:
    """Run ``team`` on ``task``; a ceiling passed stops the run (its result keeps what was done)."""
    cancel = asyncio.Event()
    meter = _Meter(ceiling, cancel, on_call)
    timer = None
    if ceiling.max_latency_s is not None:
        timer = asyncio.get_running_loop().call_later(
            ceiling.max_latency_s, meter.trip, f"{ceiling.label}.max_latency_s ({ceiling.max_latency_s})"
        )
    started = time.monotonic()
    try:
        limit = RunCeiling(ceiling.max_tokens, ceiling.max_cost_usd, ceiling.label)
        result = await team.run(task, subscribers=(meter, *subscribers), cancel=cancel, ceiling=limit)
    finally:
        if timer is not None:
            timer.cancel()
    latency = time.monotonic() - started
    if meter.tripped is not None and result.status == "cancelled":
        result.status, result.stopped_by = "budget_exhausted", meter.tripped
    return GuardedRun(result, latency, meter.tripped)
