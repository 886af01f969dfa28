#!/usr/bin/env python
"""Fan-out at scale: one supervisor handing N items to N workers, at several N.

    python benchmarks/bench_scale.py                          # 250 and 1,000 workers (a few minutes)
    python benchmarks/bench_scale.py --sizes 250,1000,2000,5000
    python benchmarks/bench_scale.py --ops-only               # only the operation counts (no LiteLLM)

Two parts, both printed as tables; nothing here asserts a timing.

**Whole processes against the fake provider.** ``teamrun execute`` (the team of
``bench_cli.py``: ``max_concurrency`` 256, each worker calls one Python tool
and answers, 2N + 2 model calls) next to the bare loop (``litellm.acompletion``
+ ``asyncio.gather`` with a semaphore of 256) making the same calls, each as a
fresh process against one fake provider answering at once. Per size: wall
time, CPU (user + system of the child, from ``wait4``: stable under load, unlike
wall time), CPU per model call and peak resident memory (``ru_maxrss``). Between
sizes: peak memory per extra worker and the CPU per call at the larger size over
the smaller one (1.0 = linear; a quadratic term shows as a ratio that grows with N).
``--observers`` runs teamrun a second time with the plain progress lines and a
``--trace`` file, so the consumers of every event are in the curve too.

**Operations per worker, in-process.** The same fan-out driven through
``teamrun.load_team(...).run(...)`` with a small deterministic chat model (no
LiteLLM, no network) and every observer attached (live tree, plain progress,
event log, trace writer): the number of Python function calls (``cProfile``)
and the peak of traced memory (``tracemalloc``), divided by the number of
workers. Counting calls instead of timing them is exact and independent of the
machine's load: if anything grows with the square of the workers, its calls per
worker grow with N, and the functions responsible are listed.

Child processes get a bytecode cache (``PYTHONPYCACHEPREFIX`` in a temporary
folder, written by a warm-up run) even where ``PYTHONDONTWRITEBYTECODE`` is
set, as an installed package has: compiling teamrun's modules on every start
is not what a user pays.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import gc
import itertools
import json
import os
import pstats
import sys
import tempfile
import tracemalloc
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_cli  # benchmarks/ is not a package: found through sys.path
from bench_cli import SIZES, Bench, Provider, Sample, calls, run_measured

REPO = Path(__file__).resolve().parents[1]


# -- whole processes ---------------------------------------------------------------------------
def process_rows(bench: Bench, sizes: list[int], observers: bool) -> dict[str, list[tuple[int, Sample]]]:
    variants = ["bare", "teamrun"] + (["teamrun+obs"] if observers else [])
    rows: dict[str, list[tuple[int, Sample]]] = {v: [] for v in variants}
    print(f"\nwhole processes, max_concurrency 256, {SIZES['small']}-character tool output, one run per point")
    print(f"  {'workers':>8s} {'program':12s} {'wall s':>8s} {'CPU s':>8s} {'ms/call':>8s} {'peak MB':>8s}")
    for count in sizes:
        for variant in variants:
            if variant == "bare":
                sample = bench.bare_run(count, SIZES["small"], 256)
            elif variant == "teamrun":
                sample = bench.teamrun_run(count, SIZES["small"], 256)
            else:
                sample = observed_run(bench, count)
            rows[variant].append((count, sample))
            print(
                f"  {count:8d} {variant:12s} {sample.wall_s:8.2f} {sample.cpu_s:8.2f} "
                f"{sample.cpu_s / calls(count) * 1000:8.2f} {sample.max_rss_mb:8.1f}",
                flush=True,
            )
    return rows


def observed_run(bench: Bench, count: int) -> Sample:
    trace = bench.directory / "trace.jsonl"
    argv = [
        *bench.teamrun,
        "execute",
        str(bench.team(256)),
        "--input",
        f"items {count}",
        "--progress",
        "plain",
        "--trace",
        str(trace),
    ]
    return run_measured(argv, bench.env(SIZES["small"]), bench.directory)


def print_growth(rows: Mapping[str, list[tuple[int, Sample]]]) -> None:
    print(
        "\n  between sizes: peak memory per extra worker (KB), CPU per call at the larger size / the smaller "
        "(1.0 = linear)"
    )
    for variant, points in rows.items():
        steps = []
        for (n0, s0), (n1, s1) in itertools.pairwise(points):
            per_worker = (s1.max_rss_mb - s0.max_rss_mb) * 1024 / (n1 - n0)
            growth = (s1.cpu_s / calls(n1)) / (s0.cpu_s / calls(n0))
            steps.append(f"{n0}->{n1}: {per_worker:6.1f} KB, {growth:4.2f}")
        print(f"  {variant:12s} " + "; ".join(steps))
    if "bare" in rows and "teamrun" in rows:
        pairs = zip(rows["bare"], rows["teamrun"], strict=True)
        ratios = [f"{n}: {t.cpu_s / b.cpu_s:4.2f}x" for (n, b), (_, t) in pairs]
        print("  CPU teamrun / bare: " + ", ".join(ratios))


# -- operations per worker, in-process -------------------------------------------------------
TEAM = """\
version: 1
name: bench-scale
supervisor: lead
agents:
  lead:
    model: lead
    instructions: Hand every item to the worker, then summarise.
    delegates_to: [worker]
    delegation: {parallel: true, max_concurrency: 256}
    budget: {max_steps: 5, max_delegations: 1000000}
  worker:
    model: worker
    description: Reads one item and condenses it.
    tools: [fetch]
    budget: {max_steps: 5, max_tool_calls: 5}
tools:
  fetch: {python: "scale_tools:fetch"}
"""

TOOLS = '''\
def fetch(item: str) -> str:
    """Read one item.

    Args:
        item: Which item.
    """
    return f"{item}: a line of material that the worker reads and condenses."
'''


class FanOutModel:
    """A deterministic chat model: the lead asks the worker N times, each worker fetches once and answers."""

    def __init__(self, workers: int) -> None:
        self.workers = workers

    async def complete(
        self,
        messages: Sequence[dict[str, Any]],
        *,
        settings: Any,
        tools: Sequence[dict[str, Any]] = (),
        response_format: Any = None,
    ) -> Any:
        from teamrun.llm.types import ModelReply, ToolCall, Usage, current_scope

        scope = current_scope.get()
        lead = scope is not None and len(scope.agent_path) == 1
        answered = messages[-1].get("role") == "tool"
        if answered:
            reply = "Every item was read." if lead else "The item says what it should."
            return ModelReply(text=reply, usage=Usage(20, 8, 1), finish_reason="stop")
        if lead:
            calls_ = tuple(
                ToolCall(f"call_{i}", "ask_worker", json.dumps({"task": f"item-{i}"})) for i in range(self.workers)
            )
        else:
            item = str(messages[-1].get("content") or "").split()[0]
            calls_ = (ToolCall("call_fetch", "fetch", json.dumps({"item": item})),)
        return ModelReply(text=None, tool_calls=calls_, usage=Usage(20, 8, 1), finish_reason="tool_calls")


def observers(directory: Path) -> tuple[list[Any], list[Any]]:
    """Every event consumer a user can turn on, writing to memory or a file; and what to close after."""
    import io

    from teamrun.cli.progress import EventLog, LiveTree, PlainProgress
    from teamrun.observe.trace_file import TraceWriter

    writer = TraceWriter(directory / "trace.jsonl")
    return [LiveTree(io.StringIO(), interval=3600.0), PlainProgress(io.StringIO()), EventLog(io.StringIO()), writer], [
        writer
    ]


def one_run(directory: Path, workers: int, *, profile: cProfile.Profile | None) -> tuple[Any, int]:
    import teamrun

    team = teamrun.load_team(directory / "team.yaml", chat_model=FanOutModel(workers))
    subscribers, closing = observers(directory)
    gc.collect()
    tracemalloc.start()
    try:
        if profile is not None:
            profile.enable()
        result = asyncio.run(team.run("items", subscribers=subscribers))
        if profile is not None:
            profile.disable()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
        for item in closing:
            item.close()
    if result.status != "done" or len(result.delegations) != workers:
        raise RuntimeError(f"run {result.status} with {len(result.delegations)} delegations: {result.error}")
    return result, peak


def ops_table(sizes: list[int], top: int) -> dict[int, dict[str, float]]:
    """Function calls and traced peak memory per worker at each size; the functions whose calls grow."""
    per_size: dict[int, dict[str, int]] = {}
    figures: dict[int, dict[str, float]] = {}
    with tempfile.TemporaryDirectory(prefix="teamrun-bench-scale-") as tmp:
        directory = Path(tmp)
        (directory / "team.yaml").write_text(TEAM, encoding="utf-8")
        (directory / "scale_tools.py").write_text(TOOLS, encoding="utf-8")
        sys.path.insert(0, str(directory))
        one_run(directory, 4, profile=None)  # warm-up: lazy imports, first-use caches
        print("\noperations per worker, in-process (deterministic chat model, every observer attached)")
        print(f"  {'workers':>8s} {'calls/worker':>13s} {'traced peak KB/worker':>22s}")
        for workers in sizes:
            profile = cProfile.Profile()
            _, peak = one_run(directory, workers, profile=profile)
            stats = pstats.Stats(profile)
            counts = {
                f"{Path(f).name}:{line}({name})": int(nc)
                for (f, line, name), (_cc, nc, _tt, _ct, _callers) in stats.stats.items()
            }  # type: ignore[attr-defined]
            per_size[workers] = counts
            total = sum(counts.values())
            figures[workers] = {"calls_per_worker": total / workers, "peak_kb_per_worker": peak / 1024 / workers}
            print(f"  {workers:8d} {total / workers:13.1f} {peak / 1024 / workers:22.2f}", flush=True)
        sys.path.remove(str(directory))
    small, large = sizes[0], sizes[-1]
    growth = sorted(
        ((per_size[large].get(k, 0) / large) - (per_size[small].get(k, 0) / small), k) for k in per_size[large]
    )[::-1][:top]
    print(f"  functions whose calls per worker grew most from {small} to {large} workers:")
    for delta, key in growth:
        print(
            f"    {delta:+10.2f}  {key}  ({per_size[small].get(key, 0) / small:.2f} -> "
            f"{per_size[large][key] / large:.2f} per worker)"
        )
    return figures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="250,1000", help="worker counts of the whole-process runs")
    parser.add_argument("--ops-sizes", default="100,400,1600", help="worker counts of the operation counts")
    parser.add_argument(
        "--observers", action="store_true", help="also run teamrun with plain progress lines and a --trace file"
    )
    parser.add_argument("--ops-only", action="store_true", help="only the in-process operation counts")
    parser.add_argument("--processes-only", action="store_true", help="only the whole-process runs")
    parser.add_argument("--top", type=int, default=8, help="functions listed under the operation counts")
    args = parser.parse_args(argv)
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    if not args.processes_only:
        ops_table([int(n) for n in args.ops_sizes.split(",")], args.top)
    if not args.ops_only:
        provider = Provider()
        try:
            with tempfile.TemporaryDirectory(prefix="teamrun-bench-scale-") as tmp:
                bench = Bench(Path(tmp), provider.url, sys.executable, [sys.executable, "-m", "teamrun.cli"])
                bench.teamrun_run(2, 40, 256)  # warm the file caches and the bytecode cache of both programs
                bench.bare_run(2, 40, 256)
                rows = process_rows(bench, [int(n) for n in args.sizes.split(",")], args.observers)
                print_growth(rows)
        finally:
            provider.close()
    print(json.dumps({"note": "figures for people to read; nothing here asserts a timing"}))
    _ = bench_cli
    return 0


if __name__ == "__main__":
    sys.exit(main())
