"""Trace files written by hand: the exact lines a test needs (odd names, odd values, several runs, cuts).

Each record is a trace line as :class:`teamrun.observe.trace_file.TraceWriter` writes it (``time``:
monotonic seconds, ``ts``: wall clock); :func:`write_trace` puts a header line first.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

__all__ = ["HEADER", "line", "solo_run", "write_trace"]

HEADER: dict[str, Any] = {"kind": "trace", "format": "teamrun-trace", "v": 1, "content": False, "ts": 1000.0}


def line(
    kind: str,
    at: float,
    *,
    run: str = "r1",
    span: str,
    parent: str | None = None,
    path: Iterable[str] = (),
    **data: Any,
) -> dict[str, Any]:
    """One trace line of ``kind`` at ``at`` seconds (both clocks), in run ``run``."""
    agent_path = list(path)
    return {
        "kind": kind,
        "run_id": run,
        "span_id": span,
        "parent_span_id": parent,
        "agent_path": agent_path,
        "depth": len(agent_path) - 1,
        "time": at,
        "ts": at,
        "data": data,
    }


def solo_run(
    run: str = "r1",
    *,
    start: float = 1000.0,
    agent: str = "lead",
    team: str = "solo",
    calls: int = 1,
    tokens: int = 100,
    cost: float = 0.01,
    ended: bool = True,
) -> list[dict[str, Any]]:
    """A run of one agent making ``calls`` model calls of 1 s, each using ``tokens`` tokens and ``cost``.

    ``ended=False``: the file stops after the last call's start (a kill), with no ends after it.
    """
    usage = {"input_tokens": tokens // 2, "output_tokens": tokens - tokens // 2, "total_tokens": tokens}
    out = [
        line("run_start", start, run=run, span="s1", team=team),
        line("agent_start", start, run=run, span="s2", parent="s1", path=[agent], model="m"),
    ]
    at = start
    for i in range(calls):
        span = f"c{i}"
        out.append(line("llm_start", at, run=run, span=span, parent="s2", path=[agent], model="m"))
        if not ended and i == calls - 1:
            return out
        at += 1.0
        out.append(
            line("llm_end", at, run=run, span=span, parent="s2", path=[agent], status="ok", usage=usage, cost=cost)
        )
    total = {k: v * calls for k, v in usage.items()}
    out.append(
        line(
            "agent_end", at, run=run, span="s2", parent="s1", path=[agent], status="ok", usage=total, cost=cost * calls
        )
    )
    out.append(line("run_end", at, run=run, span="s1", status="done", usage=total, cost=cost * calls))
    return out


def write_trace(path: Path, records: Iterable[dict[str, Any] | str]) -> Path:
    """``path`` with the header and ``records`` (a string is written as it is: a broken line)."""
    lines = [json.dumps(HEADER)] + [r if isinstance(r, str) else json.dumps(r, ensure_ascii=False) for r in records]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path
