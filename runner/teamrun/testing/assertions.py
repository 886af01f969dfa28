"""Assertions on a :class:`~teamrun.engine.result.RunResult`, with messages that show what happened.

Tool calls are not part of the result; they come from the run's events, which
:class:`EventRecorder` keeps (the ``run_team`` fixture subscribes one for you).
"""

from __future__ import annotations

import re
from collections import Counter, OrderedDict
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from teamrun.events import Event, ToolStart

if TYPE_CHECKING:
    from teamrun.engine.result import RunResult

__all__ = [
    "EventRecorder",
    "assert_delegated_to",
    "assert_final_text_matches",
    "assert_tools_called",
    "assert_within_budget",
    "events_of",
]

_KEEP_RUNS = 256
_recent: OrderedDict[str, list[Event]] = OrderedDict()
"""Events of the latest recorded runs, by run id (what :func:`events_of` looks up)."""


class EventRecorder:
    """An event-bus subscriber keeping every event, by run: ``subscribers=[EventRecorder()]``."""

    def __init__(self) -> None:
        self.events: list[Event] = []

    def __call__(self, event: Event) -> None:
        self.events.append(event)
        if event.run_id not in _recent:
            _recent[event.run_id] = []
            while len(_recent) > _KEEP_RUNS:
                _recent.popitem(last=False)
        _recent[event.run_id].append(event)

    def of_kind(self, kind: str) -> list[Event]:
        return [e for e in self.events if e.kind == kind]


def events_of(result: RunResult) -> list[Event]:
    """The events of a run an :class:`EventRecorder` watched; fails if none did."""
    events = _recent.get(result.run_id)
    if events is None:
        raise AssertionError(
            f"no events were recorded for run {result.run_id}: run the team with the run_team fixture, "
            "or pass subscribers=[teamrun.testing.EventRecorder()] to team.run()"
        )
    return events


def _describe(result: RunResult) -> str:
    lines = [f"run status: {result.status}" + (f" ({result.stopped_by})" if result.stopped_by else "")]
    if result.error:
        lines.append(f"error: {result.error}")
    if result.delegations:
        lines.append(
            "delegations: " + ", ".join(f"{'/'.join(d.agent_path) or d.agent} [{d.status}]" for d in result.delegations)
        )
    else:
        lines.append("delegations: none")
    return "\n  ".join(lines)


def assert_delegated_to(
    result: RunResult, agents: Sequence[str], *, ordered: bool = False, status: str | None = None
) -> None:
    """The run delegated to exactly ``agents`` (each name once per delegation).

    Order does not matter unless ``ordered`` (parallel workers finish in any
    order); ``status="ok"`` also requires every delegation to have succeeded.
    """
    actual = result.delegated_to
    same = actual == list(agents) if ordered else Counter(actual) == Counter(agents)
    if not same:
        raise AssertionError(
            f"expected delegations to {list(agents)}{' in this order' if ordered else ''}, "
            f"got {actual}\n  {_describe(result)}"
        )
    if status is not None:
        wrong = [f"{d.agent} [{d.status}: {d.error}]" for d in result.delegations if d.status != status]
        if wrong:
            raise AssertionError(
                f"expected every delegation to be {status!r}; not: {', '.join(wrong)}\n  {_describe(result)}"
            )


def _tool_calls(events: Iterable[Event]) -> dict[str, list[str]]:
    calls: dict[str, list[str]] = {}
    for event in events:
        if isinstance(event, ToolStart):
            calls.setdefault("/".join(event.agent_path), []).append(event.tool)
    return calls


def assert_tools_called(
    result: RunResult,
    tools: Sequence[str] | Mapping[str, Sequence[str]],
    *,
    exactly: bool = False,
    events: Iterable[Event] | None = None,
) -> None:
    """Each tool in ``tools`` was called at least once (``exactly``: and no other tool was).

    ``tools`` may map an agent (name or ``/``-joined path) to the tools it must
    have called. ``events`` default to what an :class:`EventRecorder` saw.
    """
    calls = _tool_calls(events if events is not None else events_of(result))
    wanted: Mapping[str, Sequence[str]] = tools if isinstance(tools, Mapping) else {"": list(tools)}
    seen_all = sorted({t for names in calls.values() for t in names})
    for agent, names in wanted.items():
        if agent:
            seen = sorted(
                {t for path, ts in calls.items() if path == agent or path.split("/")[-1] == agent for t in ts}
            )
        else:
            seen = seen_all
        missing = [t for t in names if t not in seen]
        extra = [t for t in seen if t not in names] if exactly else []
        if missing or extra:
            who = f"agent {agent}" if agent else "the run"
            parts = [f"not called: {missing}"] if missing else []
            parts += [f"called but not expected: {extra}"] if extra else []
            shown = ", ".join(f"{path}: {ts}" for path, ts in calls.items()) or "no tool calls at all"
            raise AssertionError(f"{who}: {'; '.join(parts)}\n  tool calls by agent: {shown}")


def assert_within_budget(
    result: RunResult,
    *,
    max_tokens: int | None = None,
    max_cost_usd: float | None = None,
    max_requests: int | None = None,
    max_delegations: int | None = None,
    max_duration_s: float | None = None,
) -> None:
    """The run was not stopped by a limit, and stayed within each bound given here."""
    problems: list[str] = []
    if result.status == "budget_exhausted":
        problems.append(f"the run was stopped by {result.stopped_by}")
    checks: list[tuple[str, Any, Any]] = [
        ("tokens", result.usage.total_tokens, max_tokens),
        ("cost (USD)", round(result.cost, 6), max_cost_usd),
        ("model requests", result.usage.requests, max_requests),
        ("delegations", len(result.delegations), max_delegations),
        ("duration (s)", round(result.duration_s, 3), max_duration_s),
    ]
    problems += [f"{what}: {used} > {limit}" for what, used, limit in checks if limit is not None and used > limit]
    if problems:
        raise AssertionError("over budget: " + "; ".join(problems) + f"\n  {_describe(result)}")


def assert_final_text_matches(result: RunResult, pattern: str | re.Pattern[str], *, flags: int = 0) -> None:
    """``re.search(pattern, result.final_text)`` finds a match."""
    regex = pattern if isinstance(pattern, re.Pattern) else re.compile(pattern, flags)
    if regex.search(result.final_text) is None:
        shown = result.final_text if len(result.final_text) <= 600 else result.final_text[:600] + "…"
        raise AssertionError(f"final text does not match {regex.pattern!r}:\n  {shown!r}\n  {_describe(result)}")
