#!/usr/bin/env python
"""The research report as a supervisor team and as its workflow twin, against the local fake provider.

    python benchmarks/bench_workflow.py                 # 3 subjects, 5 runs each, 50 ms per model call
    python benchmarks/bench_workflow.py --subjects 5 --runs 9 --latency 0.1

``teams/research-report.yaml`` (a lead model plans, delegates to one
researcher per subject, then to the writer with result references) and
``teams/research-report-workflow.yaml`` (a planner's structured output, a map
of researchers, the writer) run in this process through ``teamrun.load_team``
against :class:`tests.fakeserver.FakeOpenAI`. One handler plays every agent
from the request alone (no state), the same way in both: the researcher calls
its ``notes`` tool once then reports, the writer writes from what it is given,
the lead asks for every subject in one turn then for the report. The fake
provider counts tokens from the text it receives and sends (characters / 4),
so the token figures follow the prompts each design builds.

Printed: per design the median total tokens, model calls and wall time of the
runs (alternating team / workflow so load hits both alike), and each as a ratio
workflow / team. Nothing here asserts a timing.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "runner"))
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from tests.fakeserver import FakeOpenAI, Reply, text, tool_calls  # noqa: E402

DESIGNS = {
    "team": REPO / "teams" / "research-report.yaml",
    "workflow": REPO / "teams" / "research-report-workflow.yaml",
}
SUBJECTS = ["Rust", "Go", "Zig", "Nim", "Odin", "Crystal", "Elixir", "Kotlin"]


def _tools(request: dict[str, Any]) -> set[str]:
    return {t["function"]["name"] for t in request.get("tools") or []}


def _results(request: dict[str, Any]) -> list[str]:
    return [m["content"] for m in request["messages"] if m["role"] == "tool"]


def _task(request: dict[str, Any]) -> str:
    return next(m["content"] for m in request["messages"] if m["role"] == "user")


def handler(subjects: list[str]) -> Any:
    """Every agent of both designs, answered from the request alone."""

    def answer(request: dict[str, Any]) -> Reply:
        tools, results = _tools(request), _results(request)
        if request.get("response_format"):  # the workflow's planner
            return text(json.dumps({"subjects": subjects}))
        if "ask_researcher" in tools:  # the team's lead
            if not results:
                return tool_calls(
                    *(("ask_researcher", {"task": f"Research {s} for: {_task(request)}"}) for s in subjects)
                )
            found = [json.loads(r) for r in results]
            refs = [f["ref"] for f in found if isinstance(f, dict) and f.get("ref") and f.get("agent") == "researcher"]
            writer = [f for f in found if isinstance(f, dict) and f.get("agent") == "writer"]
            if writer:
                return text(writer[-1]["response"])
            return tool_calls(
                ("ask_writer", {"task": "Write the report from the findings.", "context_from_refs": refs})
            )
        if "notes" in tools:  # a researcher
            if not results:
                subject = _task(request).split()[1]
                return tool_calls(("notes", {"subject": subject}))
            return text(f"Findings on {_task(request)[:60]}: " + results[-1][:400])
        return text("Report: " + _task(request)[:300])  # the writer

    return answer


def run_once(design: str, server: FakeOpenAI, question: str) -> dict[str, float]:
    import teamrun

    team = teamrun.load_team(DESIGNS[design], model="openai/bench")
    before = len(server.requests())
    start = time.perf_counter()
    result = team.run_sync(question)
    wall = time.perf_counter() - start
    assert result.status == "done", (design, result.status, result.error, result.stopped_by)
    return {"tokens": result.usage.total_tokens, "calls": len(server.requests()) - before, "wall_s": wall}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--subjects", type=int, default=3)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--latency", type=float, default=0.05, help="seconds the fake takes per model call")
    args = parser.parse_args(argv)
    subjects = SUBJECTS[: args.subjects]
    question = f"Compare {', '.join(subjects)} for command-line tools"
    os.environ["OPENAI_API_KEY"] = "sk-bench-workflow"
    os.environ["NO_PROXY"] = os.environ["no_proxy"] = "127.0.0.1,localhost"
    samples: dict[str, list[dict[str, float]]] = {design: [] for design in DESIGNS}
    with FakeOpenAI(latency=args.latency) as server:
        os.environ["TEAMRUN_API_BASE"] = server.url
        server.handler("bench", handler(subjects))
        for design in DESIGNS:  # warm-up: imports, LiteLLM's first call
            run_once(design, server, question)
        for _ in range(args.runs):
            for design in DESIGNS:
                samples[design].append(run_once(design, server, question))
    medians = {
        design: {key: statistics.median(s[key] for s in runs) for key in ("tokens", "calls", "wall_s")}
        for design, runs in samples.items()
    }
    print(
        f"research report, {len(subjects)} subjects, {args.runs} runs each, fake provider latency "
        f"{args.latency * 1000:.0f} ms per call (medians)"
    )
    print(f"{'':<10}{'tokens':>10}{'calls':>8}{'wall s':>9}")
    for design, figures in medians.items():
        print(f"{design:<10}{figures['tokens']:>10.0f}{figures['calls']:>8.0f}{figures['wall_s']:>9.3f}")
    team, workflow = medians["team"], medians["workflow"]
    print(
        f"{'ratio':<10}{workflow['tokens'] / team['tokens']:>10.2f}{workflow['calls'] / team['calls']:>8.2f}"
        f"{workflow['wall_s'] / team['wall_s']:>9.2f}   (workflow / team)"
    )


if __name__ == "__main__":
    main()
