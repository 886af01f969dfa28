"""A requests-per-minute limit spreads its requests over the minute (attack a45): one every ``60 / rpm``
seconds after a small burst, not the whole minute's worth at once and the next batch the instant the window
frees — which a provider that stamps requests on arrival answers 429. Virtual time: no sleeps, no wall clock."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from teamrun.llm.ratelimit import RPM_BURST, WINDOW_MARGIN_S, RateLimiter
from tests.llm.test_rate_limits import VirtualTime


def _starts(rpm: int, requests: int, *, latency: Callable[[int], float] = lambda _: 0.0) -> list[float]:
    """When each of ``requests`` concurrent requests starts under ``rpm``; ``latency``: added to the ``i``-th
    stamp, as the provider sees it arrive."""
    time = VirtualTime()
    limiter = RateLimiter(rpm=rpm, clock=time, sleep=time.sleep)
    starts: list[float] = []

    async def one() -> None:
        await limiter.acquire()
        starts.append(time.now + latency(len(starts)))

    async def all_of_them() -> None:
        await asyncio.gather(*(one() for _ in range(requests)))

    asyncio.run(time.drive(all_of_them()))
    return starts


def test_at_60_a_minute_requests_come_one_a_second_beyond_the_burst() -> None:
    """Any span of the starts holds at most the burst and one request a second of its length."""
    starts = _starts(60, 150)

    assert starts == sorted(starts)
    assert starts[: RPM_BURST + 1] == [0.0] * RPM_BURST + [1.0]
    for i, first in enumerate(starts):
        for j in range(i, len(starts)):
            assert j - i + 1 <= RPM_BURST + (starts[j] - first) / 1.0 + 1e-9, (i, j, starts[i : j + 1])
    assert sum(1 for t in starts if t < 30.0) <= RPM_BURST + 30  # not the minute's 60 at once


def test_a_provider_counting_a_sliding_minute_on_arrival_answers_no_429() -> None:
    """50 a minute, the first minute's requests reaching the provider 30 ms after their slot, the next ones at
    once: no 60 s window of the provider's holds more than 50 (the first 50 used to go at once and the next 50
    the instant our window freed them, 30 ms before the provider's did)."""
    arrivals = _starts(50, 200, latency=lambda i: 0.03 if i < 50 else 0.0)

    busiest = max(sum(1 for t in arrivals if s - 60.0 < t <= s) for s in arrivals)
    assert busiest <= 50
    assert WINDOW_MARGIN_S > 0.03
    assert arrivals[-1] < 4 * 65.0 + 10  # spread, not starved: 200 requests at 50 a minute (and 5 s of margin)
