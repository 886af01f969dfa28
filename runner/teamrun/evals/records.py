"""What a batch and an eval hand their engines and get back: an input row, a case's result.

The engines (:mod:`teamrun.evals.engines`) are called by :mod:`teamrun.evals.batch` and
:mod:`teamrun.evals.evaluate` and return these, so the types live below all three (no import circle).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from teamrun.checks import CheckOutcome

__all__ = ["CaseResult", "Change", "InputRow"]


@dataclass(frozen=True)
class InputRow:
    key: str
    """The row's ``id``, or its number among the input rows (1-based) when it has none."""
    input: str
    vars: dict[str, Any]
    position: int


Change = Literal["regression", "improvement", "same", "new"]


@dataclass
class CaseResult:
    """One case: the run's answer, each check's verdict, and what it cost."""

    name: str
    input: str
    passed: bool
    status: str
    """The run's status: ``done``, ``failed``, ``budget_exhausted``, ``cancelled``."""
    answer: str
    checks: list[CheckOutcome]
    cost: float
    tokens: int
    latency_s: float
    stopped_by: str | None = None
    error: str | None = None
    change: Change | None = None
    """Against ``--baseline``: what changed for this case."""

    @property
    def first_failure(self) -> str:
        failed = next((c for c in self.checks if not c.passed), None)
        if failed is None:
            return ""
        return f"{failed.name}: {failed.detail}" if failed.detail else failed.name

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "name": self.name,
            "input": self.input,
            "passed": self.passed,
            "status": self.status,
            "answer": self.answer,
            "checks": [c.as_dict() for c in self.checks],
            "cost": self.cost,
            "tokens": self.tokens,
            "latency_s": round(self.latency_s, 3),
            "stopped_by": self.stopped_by,
            "error": self.error,
        }
        if self.change is not None:
            out["change"] = self.change
        return out
