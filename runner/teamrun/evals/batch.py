"""One run of a team per input row, resumable, with shared rate limits and budgets.

Rows come from a JSON-lines file (``{"input": ..., "vars": {...}, "id": ...}``);
each finished row is appended to the output at once (so a killed batch loses
only the rows in flight), and a rerun skips the rows the output already has.
When the batch ends the output is rewritten in input order, so the same inputs
give the same file whatever order the rows finished in, and on either engine
(:mod:`teamrun.evals.engines`: this process, or Ray workers): the engine runs
each row with :func:`run_row`, and this module keeps the rest.
"""

from __future__ import annotations

import asyncio
import json
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from teamrun.config.diagnostics import Diagnostic
from teamrun.config.loader import LoadedConfig
from teamrun.engine.team import Team
from teamrun.errors import ConfigError, UsageError
from teamrun.evals.engines.base import Engine
from teamrun.evals.evaluate import Progress
from teamrun.evals.guarded import Ceiling, run_guarded
from teamrun.evals.records import InputRow
from teamrun.llm.types import ChatModel
from teamrun.logs import get_logger
from teamrun.money import format_usd

__all__ = ["BatchOutcome", "InputRow", "failed_record", "read_inputs", "read_output", "run_batch", "run_row"]

log = get_logger(__name__)


def read_inputs(path: str | Path) -> list[InputRow]:
    """The rows of an inputs file; raises :class:`ConfigError` naming ``file:line`` of every bad row."""
    shown = str(path)
    try:
        lines = Path(path).read_text(encoding="utf-8-sig").splitlines()
    except FileNotFoundError:
        raise UsageError(f"inputs file {shown} does not exist") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"cannot read the inputs file {shown}: {exc}") from None
    rows: list[InputRow] = []
    problems: list[Diagnostic] = []
    seen: dict[str, int] = {}
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue

        def bad(message: str, column: int = 1, number: int = number) -> None:
            problems.append(Diagnostic(shown, number, column, message, rule="inputs"))

        try:
            data = json.loads(line)
        except json.JSONDecodeError as exc:
            bad(f"not a JSON object: {exc.msg}", exc.colno)
            continue
        if isinstance(data, str):
            data = {"input": data}
        if not isinstance(data, dict):
            bad('a row must be a JSON object such as {"input": "...", "vars": {...}} (or a JSON string)')
            continue
        unknown = sorted(set(data) - {"input", "vars", "id"})
        if unknown:
            bad(f"unknown key {', '.join(repr(k) for k in unknown)}; a row has 'input', 'vars' and 'id'")
        task, variables, ident = data.get("input"), data.get("vars") or {}, data.get("id")
        if not isinstance(task, str) or not task.strip():
            bad("the row needs 'input': the task for the supervisor (non-empty text)")
            continue
        if not isinstance(variables, dict):
            bad("'vars' must be an object of template variables")
            continue
        if ident is not None and (isinstance(ident, bool) or not isinstance(ident, str | int)):
            bad("'id' must be text or an integer")
            continue
        key = str(ident) if ident is not None else str(len(rows) + 1)
        if key in seen:
            bad(f"id {key!r} is used twice (first on line {seen[key]}); ids must be unique")
            continue
        seen[key] = number
        rows.append(InputRow(key, task, variables, len(rows)))
    if problems:
        raise ConfigError(problems)
    return rows


def read_output(path: Path) -> list[dict[str, Any]]:
    """The result rows an earlier (maybe killed) batch wrote; a cut last line is dropped."""
    if not path.exists():
        return []
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise UsageError(f"cannot read the output {path}: {exc.strerror}") from None
    rows: list[dict[str, Any]] = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            data = json.loads(line)
        except json.JSONDecodeError:
            if number == len(lines):
                break  # the batch was killed while writing this line
            raise UsageError(f"{path}:{number}: not a result row (broken JSON); is this a batch output?") from None
        if not isinstance(data, dict) or "id" not in data or "status" not in data:
            raise UsageError(f"{path}:{number}: not a result row of `teamrun batch` (no 'id' and 'status')")
        rows.append(data)
    return rows


@dataclass
class BatchOutcome:
    total: int
    skipped: int = 0
    ran: int = 0
    failed: int = 0
    left: int = 0
    """Rows not started because the total budget ran out."""
    cost: float = 0.0
    """The cost of the rows run whose usage is known (:attr:`usage_known`: else at least this)."""
    usage_known: bool = True
    """False when a row run reported no usage (``usage_known: false``): :attr:`cost` is then a lower bound, and
    ``--max-cost`` cannot act on that row's spending."""
    stopped_by: str | None = None
    rows: list[dict[str, Any]] = field(default_factory=list)

    def cost_text(self) -> str:
        """The cost for people: ``$0.0123``, ``at least $0.0123`` or ``unknown``."""
        if self.usage_known:
            return format_usd(self.cost)
        return f"at least {format_usd(self.cost)}" if self.cost else "unknown"


def _row_record(row: InputRow, result: Any) -> dict[str, Any]:
    known = result.usage_known
    return {
        "id": row.key,
        "input": row.input,
        "status": result.status,
        "final_text": result.final_text,
        "stopped_by": result.stopped_by,
        "error": result.error,
        "usage": result.usage.as_dict() if known else None,  # not known: never a pretended 0
        "cost": result.cost if known else None,
        **({} if known else {"usage_known": False}),
    }


def failed_record(row: InputRow, exc: BaseException) -> dict[str, Any]:
    """The result row of a row whose run raised (or whose worker was lost)."""
    return {
        "id": row.key,
        "input": row.input,
        "status": "failed",
        "final_text": "",
        "stopped_by": None,
        "error": f"{type(exc).__name__}: {exc}",
        "usage": {"input_tokens": 0, "output_tokens": 0, "total_tokens": 0, "requests": 0},
        "cost": 0.0,
    }


async def run_row(
    loaded: LoadedConfig,
    row: InputRow,
    ceiling: Ceiling,
    *,
    chat_model: ChatModel,
    model: str | None = None,
    api_base: str | None = None,
) -> dict[str, Any]:
    """One row's run, as the result row written to the output (every engine runs rows with this); ``api_base``:
    ``--api-base``, the endpoint of every agent that sets none."""
    team = Team(loaded, vars=row.vars, model=model, api_base=api_base, chat_model=chat_model)
    try:
        run = await run_guarded(team, row.input, ceiling)
        return _row_record(row, run.result)
    except Exception as exc:  # one row's trouble is recorded; the batch goes on
        return failed_record(row, exc)


class _Appender:
    """Appends result rows to the output as they finish, one whole line at a time."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()

    def write(self, record: dict[str, Any]) -> None:
        line = json.dumps(record, ensure_ascii=False, sort_keys=True) + "\n"
        with self._lock, self.path.open("a", encoding="utf-8") as handle:
            handle.write(line)
            handle.flush()


def _rewrite(path: Path, rows: list[dict[str, Any]]) -> None:
    temporary = path.with_name(path.name + ".tmp")
    with temporary.open("w", encoding="utf-8") as handle:
        for record in rows:
            handle.write(json.dumps(record, ensure_ascii=False, sort_keys=True) + "\n")
    os.replace(temporary, path)


async def run_batch(
    loaded: LoadedConfig,
    rows: list[InputRow],
    output: Path,
    *,
    engine: Engine,
    workers: int = 4,
    row_ceiling: Ceiling | None = None,
    max_total_cost: float | None = None,
    retry_failed: bool = False,
    on_progress: Callable[[Progress], None] | None = None,
) -> BatchOutcome:
    """Run every row the output does not have yet; returns what happened.

    ``engine`` runs the rows (:class:`~teamrun.evals.engines.local.LocalEngine` in this
    process, or on Ray); progress, the total budget and the output are kept here, the
    same whatever the engine. (The engines import this module: it imports none of them.)
    """
    existing = read_output(output)
    if retry_failed:
        existing = [r for r in existing if r.get("status") == "done"]
    _rewrite(output, existing)  # drop a cut last line (or the failed rows) before appending
    done_keys = {str(r["id"]) for r in existing}
    todo = [row for row in rows if row.key not in done_keys]
    outcome = BatchOutcome(len(rows), skipped=len(rows) - len(todo))
    progress = Progress(len(todo))
    appender = _Appender(output)
    gate = asyncio.Semaphore(max(1, workers))
    stop = asyncio.Event()
    fresh: list[dict[str, Any]] = []

    async def one(row: InputRow) -> None:
        async with gate:
            if stop.is_set():
                outcome.left += 1
                return
            try:
                record = await engine.run_row(row, row_ceiling or Ceiling())
            except Exception as exc:  # the engine lost the row (a worker died): recorded, the batch goes on
                record = failed_record(row, exc)
        appender.write(record)
        fresh.append(record)
        outcome.ran += 1
        outcome.cost += float(record.get("cost") or 0.0)
        if record.get("usage_known") is False and outcome.usage_known:
            outcome.usage_known = progress.usage_known = False
            if max_total_cost is not None:
                log.warning(
                    "batch_usage_unknown",
                    row=row.key,
                    note=f"--max-cost ({max_total_cost}) cannot limit rows whose usage is unknown: "
                    "their cost is not counted",
                )
        failed = record["status"] != "done"
        outcome.failed += failed
        progress.done += 1
        progress.failed += failed
        progress.cost = outcome.cost
        if max_total_cost is not None and outcome.cost >= max_total_cost and not stop.is_set():
            stop.set()
            outcome.stopped_by = f"--max-cost ({max_total_cost})"
        if on_progress is not None:
            on_progress(progress)

    async with asyncio.TaskGroup() as group:
        for row in todo:
            group.create_task(one(row))
    order = {row.key: row.position for row in rows}
    everything = existing + fresh
    everything.sort(key=lambda r: order.get(str(r["id"]), len(order)))
    _rewrite(output, everything)
    outcome.rows = everything
    return outcome
