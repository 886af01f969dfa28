"""A clock the test steps by hand (``clock.now += 11``): for what takes ``clock=`` (leases, breakers, limiters)."""

from __future__ import annotations

__all__ = ["Clock"]


class Clock:
    """Epoch-like seconds that move only when the test moves them."""

    def __init__(self, now: float = 1000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now
