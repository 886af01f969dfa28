"""Run every case of a cases file against a team, concurrently, and check the answers."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from teamrun.checks import CheckOutcome, run_check
from teamrun.config.loader import LoadedConfig
from teamrun.engine.team import Team
from teamrun.evals.cases import LoadedCases
from teamrun.evals.engines.base import Engine
from teamrun.evals.guarded import Ceiling, run_guarded
from teamrun.evals.models import Case
from teamrun.evals.records import CaseResult, Change
from teamrun.events import Subscriber
from teamrun.llm.types import ChatModel
from teamrun.money import format_usd, format_usd_limit

__all__ = ["CaseResult", "EvalReport", "Progress", "evaluate", "run_case"]


@dataclass
class EvalReport:
    """Every case's result, in the cases file's order."""

    team: str
    cases_file: str
    results: list[CaseResult]
    duration_s: float = 0.0
    baseline: str | None = None
    removed: list[str] = field(default_factory=list)
    """Cases of the baseline that this eval no longer has."""

    @property
    def passed(self) -> int:
        return sum(r.passed for r in self.results)

    @property
    def pass_rate(self) -> float:
        return self.passed / len(self.results) if self.results else 0.0

    @property
    def cost(self) -> float:
        return sum(r.cost for r in self.results)

    def count(self, change: Change) -> int:
        return sum(r.change == change for r in self.results)

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "team": self.team,
            "cases_file": self.cases_file,
            "total": len(self.results),
            "passed": self.passed,
            "failed": len(self.results) - self.passed,
            "pass_rate": round(self.pass_rate, 4),
            "cost": self.cost,
            "duration_s": round(self.duration_s, 3),
            "cases": [r.as_dict() for r in self.results],
        }
        if self.baseline is not None:
            out["baseline"] = {
                "file": self.baseline,
                "regressions": self.count("regression"),
                "improvements": self.count("improvement"),
                "removed": self.removed,
            }
        return out


@dataclass
class Progress:
    """Where an eval or batch stands, for the progress line."""

    total: int
    done: int = 0
    failed: int = 0
    cost: float = 0.0
    usage_known: bool = True
    """False once a run's usage was not reported: :attr:`cost` is then a lower bound."""
    started: float = field(default_factory=time.monotonic)

    def eta_s(self) -> float | None:
        if not self.done:
            return None
        elapsed = time.monotonic() - self.started
        return elapsed / self.done * (self.total - self.done)

    def line(self, noun: str = "cases") -> str:
        eta = self.eta_s()
        shown = "?" if eta is None else f"{eta:.0f}s"
        cost = format_usd(self.cost)
        if not self.usage_known:
            cost = f"at least {cost}" if self.cost else "cost unknown"
        return f"{self.done}/{self.total} {noun} done, {self.failed} failed, {cost}, ETA {shown}"


def _ceiling(case: Case, defaults: Any, index: int) -> Ceiling:
    def pick(name: str) -> Any:
        own = getattr(case, name)
        return own if own is not None else (getattr(defaults, name) if defaults is not None else None)

    return Ceiling(pick("max_cost_usd"), pick("max_tokens"), pick("max_latency_s"), label=f"cases[{index}]")


def _ceiling_outcomes(
    ceiling: Ceiling, cost: float, tokens: int, latency: float, tripped: str | None
) -> list[CheckOutcome]:
    out = []
    if ceiling.max_cost_usd is not None:
        ok = cost <= ceiling.max_cost_usd
        out.append(
            CheckOutcome(
                f"cost <= {format_usd_limit(ceiling.max_cost_usd)}", ok, "" if ok else f"{format_usd(cost)} spent"
            )
        )
    if ceiling.max_tokens is not None:
        ok = tokens <= ceiling.max_tokens
        out.append(CheckOutcome(f"tokens <= {ceiling.max_tokens}", ok, "" if ok else f"{tokens} used"))
    if ceiling.max_latency_s is not None:
        ok = latency <= ceiling.max_latency_s and "max_latency_s" not in (tripped or "")
        out.append(CheckOutcome(f"latency <= {ceiling.max_latency_s:g}s", ok, "" if ok else f"{latency:.1f}s"))
    return out


async def _one(
    loaded: LoadedConfig,
    cases: LoadedCases,
    index: int,
    case: Case,
    *,
    model: str | None,
    chat_model: ChatModel,
    api_base: str | None = None,
    subscribers: Sequence[Subscriber] = (),
) -> CaseResult:
    defaults = cases.cases.defaults
    variables = {**((defaults.vars if defaults else None) or {}), **(case.vars or {})}
    team = Team(loaded, vars=variables, model=model, api_base=api_base, chat_model=chat_model)
    ceiling = _ceiling(case, defaults, index)
    run = await run_guarded(team, case.input, ceiling, subscribers=tuple(subscribers))
    result = run.result
    outcomes = _ceiling_outcomes(ceiling, run.cost, run.tokens, run.latency_s, run.stopped_by_ceiling)
    if result.status != "done":
        why = result.stopped_by or result.error or ""
        ended = f"the run ended {result.status}" + (f": {why}" if why else "")
        outcomes.insert(0, CheckOutcome("run done", False, ended))
    else:
        case_info = {"name": case.name, "input": case.input, "vars": variables}
        for check in [*(defaults.checks if defaults else []), *case.checks]:
            outcomes.append(
                await run_check(
                    check,
                    result.final_text,
                    case=case_info,
                    model=chat_model,
                    base_dir=cases.base_dir,
                    judge_api_base=team.api_base,
                )
            )
    return CaseResult(
        case.name,
        case.input,
        all(o.passed for o in outcomes),
        result.status,
        result.final_text,
        outcomes,
        run.cost,
        run.tokens,
        run.latency_s,
        result.stopped_by,
        result.error,
    )


async def run_case(
    loaded: LoadedConfig,
    cases: LoadedCases,
    index: int,
    *,
    chat_model: ChatModel,
    model: str | None = None,
    api_base: str | None = None,
    subscribers: Sequence[Subscriber] = (),
) -> CaseResult:
    """Case ``index`` of ``cases``: its run and its checks (every engine runs cases with this); ``api_base``:
    ``--api-base``, the endpoint of every agent and judge that sets none."""
    case = cases.cases.cases[index]
    return await _one(
        loaded, cases, index, case, model=model, chat_model=chat_model, api_base=api_base, subscribers=subscribers
    )


async def evaluate(
    loaded: LoadedConfig,
    cases: LoadedCases,
    *,
    engine: Engine,
    concurrency: int = 4,
    on_progress: Callable[[Progress], None] | None = None,
    subscribers_for: Callable[[str], Sequence[Subscriber]] | None = None,
) -> EvalReport:
    """Run every case (at most ``concurrency`` at once) and return the results in file order.

    ``engine`` runs the cases (:class:`~teamrun.evals.engines.local.LocalEngine` in this
    process, or on Ray; the engines import this module, it imports none of them).
    ``subscribers_for(case_name)``: event subscribers for that case's run (a trace file per case;
    engines whose runs happen in other processes refuse them).
    """
    progress = Progress(len(cases.cases.cases))
    gate = asyncio.Semaphore(max(1, concurrency))
    started = time.monotonic()

    async def guarded(index: int, case: Case) -> CaseResult:
        async with gate:
            outcome = await engine.run_case(
                cases, index, subscribers=subscribers_for(case.name) if subscribers_for else ()
            )
        progress.done += 1
        progress.failed += not outcome.passed
        progress.cost += outcome.cost
        if on_progress is not None:
            on_progress(progress)
        return outcome

    async with asyncio.TaskGroup() as group:
        tasks = [group.create_task(guarded(i, c)) for i, c in enumerate(cases.cases.cases)]
    report = EvalReport(loaded.config.name, str(cases.path), [t.result() for t in tasks])
    report.duration_s = time.monotonic() - started
    return report


def compare_with_baseline(report: EvalReport, baseline: dict[str, Any], shown: str) -> None:
    """Mark each case against a previous ``--format json`` report."""
    before = {c.get("name"): bool(c.get("passed")) for c in baseline.get("cases") or [] if isinstance(c, dict)}
    for result in report.results:
        if result.name not in before:
            result.change = "new"
        elif before[result.name] and not result.passed:
            result.change = "regression"
        elif not before[result.name] and result.passed:
            result.change = "improvement"
        else:
            result.change = "same"
    names = {r.name for r in report.results}
    report.removed = [str(n) for n in before if n not in names]
    report.baseline = shown
