"""The checks of a case's answer: the shared implementation in :mod:`teamrun.checks`."""

from __future__ import annotations

from teamrun.checks import JUDGE_SYSTEM, CheckOutcome, describe_check, parse_score, run_check

__all__ = ["JUDGE_SYSTEM", "CheckOutcome", "describe_check", "parse_score", "run_check"]
