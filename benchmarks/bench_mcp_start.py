#!/usr/bin/env python
"""MCP servers start only when an agent that declares them runs.

    python benchmarks/bench_mcp_start.py [--repeats N]

Three variants of one small team (a supervisor that may delegate to a `clock`
worker), driven by the scripted model so no provider is involved:

* **no MCP entry** — `clock` has no tools;
* **MCP declared, never used** — `clock` declares `mcp-server-time` (stdio), but the
  supervisor answers without delegating, so no agent that declares it runs;
* **MCP used** — the supervisor delegates to `clock`, which calls the server once.

For each, the median wall time of a run and whether a server process was started
(processes carrying a marker in their environment, looked for during the run and
after it). The second line should read like the first: same time, no server.
Figures for people to read; nothing is asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "runner"))

import psutil  # noqa: E402
import yaml  # noqa: E402

import teamrun  # noqa: E402
from teamrun.testing.scripted import ScriptedCall, ScriptedModel, delegate, tool_call  # noqa: E402


def _marked(marker: str) -> list[int]:
    pids = []
    for process in psutil.process_iter():
        try:
            if process.status() != psutil.STATUS_ZOMBIE and process.environ().get("BENCH_MARKER") == marker:
                pids.append(process.pid)
        except (psutil.Error, OSError):
            continue
    return pids


def _team(directory: Path, variant: str, marker: str) -> Path:
    clock: dict[str, Any] = {"description": "Tells the time."}
    tools: dict[str, Any] = {}
    if variant != "none":
        clock["tools"] = ["time"]
        tools["time"] = {
            "mcp": {
                "command": [sys.executable, "-m", "mcp_server_time", "--local-timezone", "Etc/UTC"],
                "env": {"BENCH_MARKER": marker},
            }
        }
    data = {
        "version": 1,
        "name": "bench",
        "supervisor": "lead",
        "agents": {"lead": {"delegates_to": ["clock"]}, "clock": clock},
        **({"tools": tools} if tools else {}),
    }
    path = directory / f"{variant}.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def _run_once(path: Path, variant: str, marker: str) -> tuple[float, bool]:
    seen: list[int] = []

    def look(reply: Any) -> Any:
        def step(call: ScriptedCall) -> Any:
            seen.extend(_marked(marker))
            return reply(call) if callable(reply) else reply

        return step

    if variant == "used":
        script = {
            "lead": [delegate("clock", task="time?"), look("it is now")],
            "clock": [tool_call("time_get_current_time", timezone="UTC"), look("noon")],
        }
    else:
        script = {"lead": [look("no need to ask")]}
    team = teamrun.load_team(path, chat_model=ScriptedModel(script))
    started = time.perf_counter()
    result = asyncio.run(team.run("What time is it?"))
    elapsed = time.perf_counter() - started
    if result.status != "done":
        raise SystemExit(f"{variant}: the run ended {result.status}: {result.error}")
    return elapsed, bool(seen or _marked(marker))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    labels = {"none": "no MCP entry", "declared": "MCP declared, never used", "used": "MCP used (one call)"}
    with tempfile.TemporaryDirectory() as tmp:
        print(f"{'variant':<28} {'median wall (s)':>16} {'min (s)':>9}  server started")
        baseline = None
        for variant, label in labels.items():
            marker = uuid.uuid4().hex
            path = _team(Path(tmp), variant, marker)
            _run_once(path, variant, marker)  # warm-up (imports)
            runs = [_run_once(path, variant, marker) for _ in range(args.repeats)]
            times = [t for t, _ in runs]
            started = {s for _, s in runs}
            median = statistics.median(times)
            baseline = baseline or median
            shown = "yes" if started == {True} else "no" if started == {False} else "sometimes"
            print(f"{label:<28} {median:>16.4f} {min(times):>9.4f}  {shown}   ({median / baseline:.1f}x no-MCP)")
            if _marked(marker):
                print(f"  !! a server process outlived the {label!r} runs")


if __name__ == "__main__":
    main()
