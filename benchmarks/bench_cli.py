#!/usr/bin/env python
"""What the ``teamrun`` command costs per model call, measured the way a user runs it.

    python benchmarks/bench_cli.py                 # CPU per call by slope, fixed cost, ratios
    python benchmarks/bench_cli.py --scale         # plus 1,000 and 5,000 workers: memory, CPU, wall
    python benchmarks/bench_cli.py --profile       # plus a cProfile of one teamrun process
    python benchmarks/bench_cli.py --startup       # only start-up: --version, --help, validate, `starting ...`

A fan-out team: the supervisor hands N items to a worker in one turn (N
``ask_worker`` calls); each worker calls one Python tool (``fetch``, answering
small text or ~30k characters) and then answers; the supervisor answers last.
That is 2N + 2 model calls. The same calls, messages and tool outputs are made
by a bare loop (``litellm.acompletion`` + ``asyncio.gather``) in its own
process. Both run as whole processes against one fake provider (a subprocess
answering at once); their CPU (user + system, from ``wait4``) is what is
compared: the slope between two sizes is the CPU per model call, the
intercept is the fixed cost. Minimum of ``--repeats`` runs per point.
Results are ratios to read, never assertions.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
for _name in ("NO_PROXY", "no_proxy"):  # loopback traffic never goes through a proxy
    os.environ[_name] = ",".join(filter(None, [os.environ.get(_name), "127.0.0.1", "localhost"]))

REPO = Path(__file__).resolve().parents[1]
KEY_ENV = "TEAMRUN_BENCH_KEY"
PER_CALL_TARGET = 1.30
FIXED_TARGET_S = 0.30
SIZES = {"small": 40, "30k": 30_000}


# -- start-up (issue 27.3/27.4): `bench_cli.py --startup` --------------------------------------
LIBRARIES = "import yaml, jsonschema, pydantic, jinja2, click"
"""What `teamrun validate` needs to import: its yardstick."""
STARTUP_TARGET = 1.5


def _cpu_and_wall(argv: list[str], env: dict[str, str], until: str | None = None) -> tuple[float, float]:
    """User+system CPU of the whole process (``wait4``) and its wall time; with ``until``, the wall time
    until that text starts a line of stderr (the process still runs to its end)."""
    start = time.perf_counter()
    process = subprocess.Popen(argv, env=env, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    assert process.stderr is not None
    seen = None
    for line in process.stderr:
        if until is not None and seen is None and line.startswith(until):
            seen = time.perf_counter() - start
    _pid, status, usage = os.wait4(process.pid, 0)
    wall = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status) != 0:
        raise RuntimeError(f"{' '.join(argv)} exited {os.waitstatus_to_exitcode(status)}")
    if until is not None:
        if seen is None:
            raise RuntimeError(f"{' '.join(argv)} never printed {until!r}")
        return usage.ru_utime + usage.ru_stime, seen
    return usage.ru_utime + usage.ru_stime, wall


def startup_table(repeats: int) -> None:
    """Each command next to its yardstick, run in turn (A B A B ...): the median of the pairwise ratios."""
    import statistics

    env = {**os.environ, "PYTHONPATH": str(REPO / "runner")}
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # as installed: bytecode cached (the warm-up run writes it)
    env["PYTHONPYCACHEPREFIX"] = tempfile.mkdtemp(prefix="teamrun-bench-pyc-")
    teamrun = [sys.executable, "-c", "import sys; from teamrun.cli import main; sys.argv[0] = 'teamrun'; main()"]
    click_only = [sys.executable, "-c", "import click"]
    libraries = [sys.executable, "-c", LIBRARIES]
    research = str(REPO / "teams" / "research-report.yaml")
    rows = [
        ("teamrun --version", [*teamrun, "--version"], "import click", click_only, None),
        ("teamrun --help", [*teamrun, "--help"], "import click", click_only, None),
        ("teamrun validate FILE", [*teamrun, "validate", research], LIBRARIES, libraries, None),
        (
            "execute: `starting ...` line",
            [*teamrun, "execute", research, "--input", "Compare Rust and Go", "--progress", "plain"],
            LIBRARIES,
            libraries,
            "starting ",
        ),
    ]
    print(
        f"\nstart-up: each command and its yardstick (python -c '...') in turn, {repeats} pairs after a "
        "warm-up; median of the pairwise ratios (CPU: user+system of the whole process)"
    )
    print(f"  {'command':30s} {'CPU ms':>7s} {'yardstick':50s} {'CPU ms':>7s} {'CPU ratio':>9s} {'wall ratio':>10s}")
    for label, argv, base_label, base, until in rows:
        _cpu_and_wall(argv, env, until)  # warm-up: file cache and bytecode
        _cpu_and_wall(base, env)
        pairs = [(_cpu_and_wall(argv, env, until), _cpu_and_wall(base, env)) for _ in range(repeats)]
        cpu = statistics.median(a[0] for a, _ in pairs)
        base_cpu = statistics.median(b[0] for _, b in pairs)
        cpu_ratio = statistics.median(a[0] / b[0] for a, b in pairs)
        wall_ratio = statistics.median(a[1] / b[1] for a, b in pairs)
        target = "" if until else f"  {'holds' if cpu_ratio <= STARTUP_TARGET else 'MISSED'} (<= {STARTUP_TARGET})"
        print(
            f"  {label:30s} {cpu * 1000:7.0f} {base_label:50s} {base_cpu * 1000:7.0f} {cpu_ratio:8.2f}x "
            f"{wall_ratio:9.2f}x{target}"
        )
    print("  (the `starting ...` row: wall time until the line appears; CPU of the whole run)")


# -- the fake provider (a subprocess: `bench_cli.py --serve`) --------------------------------
def _serve() -> None:
    sys.path.insert(0, str(REPO))
    from tests import fakeserver
    from tests.fakeserver import FakeOpenAI, Reply, text, tool_calls

    fakeserver._RequestHandler.disable_nagle_algorithm = True

    def reply(request: dict[str, Any]) -> Reply:
        messages = request.get("messages", [])
        answered = any(m.get("role") == "tool" for m in messages)
        if request.get("model") == "lead":
            if answered:
                return text("Every item was read; the findings are summarised above.")
            count = int(messages[-1]["content"].split()[1])
            return tool_calls(*[("ask_worker", {"task": f"item-{i}"}) for i in range(count)])
        if answered:
            return text("The item says what it should; nothing is missing.")
        item = messages[-1]["content"].split()[0]
        return tool_calls(("fetch", {"item": item}))

    server = FakeOpenAI()
    server.handler("*", reply)
    server.start()
    print(server.port, flush=True)
    sys.stdin.read()
    server.stop()


class Provider:
    def __init__(self) -> None:
        self.process = subprocess.Popen(
            [sys.executable, __file__, "--serve"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )
        assert self.process.stdout is not None
        self.url = f"http://127.0.0.1:{self.process.stdout.readline().strip()}/v1"

    def close(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        self.process.wait(timeout=30)


# -- the two programs ------------------------------------------------------------------------
TOOLS = '''\
def fetch(item: str) -> str:
    """Read one item.

    Args:
        item: Which item.
    """
    import os
    size = int(os.environ.get("BENCH_TOOL_CHARS", "40"))
    line = f"{item}: a line of material that the worker reads and condenses. "
    return (line * (size // len(line) + 1))[:size]
'''

TEAM = """\
version: 1
name: bench-cli
supervisor: lead
defaults: {{api_base: "{url}", api_key_env: {key}, request_timeout_s: 60, num_retries: 0}}
agents:
  lead:
    model: openai/lead
    instructions: Hand every item to the worker, then summarise.
    delegates_to: [worker]
    delegation: {{parallel: true, max_concurrency: {concurrency}}}
    budget: {{max_steps: 5, max_delegations: 100000}}
  worker:
    model: openai/worker
    description: Reads one item and condenses it.
    tools: [fetch]
    budget: {{max_steps: 5, max_tool_calls: 5}}
tools:
  fetch: {{python: "bench_tools:fetch", max_output_chars: 100000}}  # the bare loop keeps all 30k too
"""

BARE = """\
import asyncio, json, os, sys
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import litellm
from bench_tools import fetch

URL, KEY, COUNT, CONCURRENCY = sys.argv[1], os.environ["{key}"], int(sys.argv[2]), int(sys.argv[3])
TASK = {{"type": "string", "description": "The sub-task."}}

def function(name, description, properties, required):
    return {{"type": "function", "function": {{"name": name, "description": description, "parameters": {{
        "type": "object", "properties": properties, "required": required, "additionalProperties": False}}}}}}

LEAD_TOOLS = [function("ask_worker", "Reads one item and condenses it.", {{"task": TASK}}, ["task"])]
WORKER_TOOLS = [function("fetch", "Read one item.", {{"item": {{"type": "string"}}}}, ["item"])]

async def call(model, messages, tools):
    response = await litellm.acompletion(model="openai/" + model, messages=list(messages), tools=tools,
                                         api_base=URL, api_key=KEY, timeout=60, num_retries=0, max_retries=0)
    return response.choices[0].message

def shown(message):
    out = {{"role": "assistant", "content": message.content}}
    if message.tool_calls:
        out["tool_calls"] = [{{"id": c.id, "type": "function", "function": {{
            "name": c.function.name, "arguments": c.function.arguments}}}} for c in message.tool_calls]
    return out

async def worker(task, slots):
    async with slots:
        messages = [{{"role": "system", "content": "You read one item."}}, {{"role": "user", "content": task}}]
        while True:
            message = await call("worker", messages, WORKER_TOOLS)
            messages.append(shown(message))
            if not message.tool_calls:
                return message.content or ""
            for c in message.tool_calls:
                result = await asyncio.to_thread(fetch, **json.loads(c.function.arguments))
                messages.append({{"role": "tool", "tool_call_id": c.id, "content": result}})

async def main():
    slots = asyncio.Semaphore(CONCURRENCY)
    messages = [{{"role": "system", "content": "Hand every item to the worker."}},
                {{"role": "user", "content": f"items {{COUNT}}"}}]
    while True:
        message = await call("lead", messages, LEAD_TOOLS)
        messages.append(shown(message))
        if not message.tool_calls:
            print(message.content)
            return
        calls = list(message.tool_calls)
        answers = await asyncio.gather(*(worker(json.loads(c.function.arguments)["task"], slots) for c in calls))
        for c, answer in zip(calls, answers):
            messages.append({{"role": "tool", "tool_call_id": c.id,
                              "content": json.dumps({{"agent": "worker", "status": "ok", "response": answer}})}})

asyncio.run(main())
"""


@dataclass(frozen=True)
class Sample:
    cpu_s: float
    wall_s: float
    max_rss_mb: float


def run_measured(argv: list[str], env: dict[str, str], cwd: Path) -> Sample:
    start = time.perf_counter()
    process = subprocess.Popen(argv, env=env, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    assert process.stderr is not None
    _pid, status, usage = os.wait4(process.pid, 0)
    wall = time.perf_counter() - start
    err = process.stderr.read().decode(errors="replace")
    process.returncode = os.waitstatus_to_exitcode(status)
    if process.returncode != 0:
        raise RuntimeError(f"{' '.join(argv[:3])}... exited {process.returncode}:\n{err[-2000:]}")
    return Sample(usage.ru_utime + usage.ru_stime, wall, usage.ru_maxrss / 1024)


class Bench:
    def __init__(self, directory: Path, url: str, python: str, teamrun: list[str]) -> None:
        self.directory = directory
        self.url = url
        self.python = python
        self.teamrun = teamrun
        (directory / "bench_tools.py").write_text(TOOLS, encoding="utf-8")
        (directory / "bare.py").write_text(BARE.format(key=KEY_ENV), encoding="utf-8")

    def team(self, concurrency: int) -> Path:
        path = self.directory / f"team-{concurrency}.yaml"
        path.write_text(TEAM.format(url=self.url, key=KEY_ENV, concurrency=concurrency), encoding="utf-8")
        return path

    def env(self, tool_chars: int) -> dict[str, str]:
        env = {**os.environ, KEY_ENV: "sk-bench-not-a-real-key", "BENCH_TOOL_CHARS": str(tool_chars)}
        # A bytecode cache, as an installed package has, even where PYTHONDONTWRITEBYTECODE is set:
        # compiling teamrun's modules on every start is not what a user pays. The warm-up run fills it.
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env["PYTHONPYCACHEPREFIX"] = str(self.directory / "pycache")
        return env

    def teamrun_run(self, items: int, tool_chars: int, concurrency: int) -> Sample:
        argv = [
            *self.teamrun,
            "-q",
            "execute",
            str(self.team(concurrency)),
            "--input",
            f"items {items}",
            "--progress",
            "none",
        ]
        return run_measured(argv, self.env(tool_chars), self.directory)

    def bare_run(self, items: int, tool_chars: int, concurrency: int) -> Sample:
        argv = [self.python, str(self.directory / "bare.py"), self.url, str(items), str(concurrency)]
        return run_measured(argv, self.env(tool_chars), self.directory)


def calls(items: int) -> int:
    return 2 * items + 2


def best(samples: list[Sample]) -> Sample:
    return min(samples, key=lambda s: s.cpu_s)


def slope_table(bench: Bench, small: int, large: int, repeats: int) -> list[tuple[str, float, float]]:
    """(label, per-call ratio, fixed difference in s) for each tool output size."""
    results = []
    print(
        f"\nCPU of the whole process (user+system), min of {repeats}; sizes {small} and {large} items "
        f"({calls(small)} and {calls(large)} model calls)"
    )
    print(f"  {'tool output':12s} {'program':8s} {'CPU@small':>10s} {'CPU@large':>10s} {'ms/call':>8s} {'fixed s':>8s}")
    for label, chars in SIZES.items():
        figures: dict[str, tuple[float, float]] = {}
        points: dict[str, dict[int, list[Sample]]] = {"bare": {small: [], large: []}, "teamrun": {small: [], large: []}}
        for _ in range(repeats):  # interleaved so drift hits both alike
            for items in (small, large):
                points["bare"][items].append(bench.bare_run(items, chars, 256))
                points["teamrun"][items].append(bench.teamrun_run(items, chars, 256))
        for program, by_size in points.items():
            a, b = best(by_size[small]).cpu_s, best(by_size[large]).cpu_s
            per_call = (b - a) / (calls(large) - calls(small))
            fixed = a - per_call * calls(small)
            figures[program] = (per_call, fixed)
            print(f"  {label:12s} {program:8s} {a:10.2f} {b:10.2f} {per_call * 1000:8.2f} {fixed:8.2f}")
        ratio = figures["teamrun"][0] / figures["bare"][0]
        extra = figures["teamrun"][1] - figures["bare"][1]
        results.append((label, ratio, extra))
    return results


def scale_table(bench: Bench, counts: list[int]) -> None:
    print("\nscale: one run, max_concurrency 256, small tool output (one run per point)")
    print(f"  {'workers':>8s} {'program':8s} {'wall s':>8s} {'CPU s':>8s} {'ms/call':>8s} {'peak MB':>8s}")
    rows: dict[str, list[tuple[int, Sample]]] = {"bare": [], "teamrun": []}
    for count in counts:
        for program, run in (("bare", bench.bare_run), ("teamrun", bench.teamrun_run)):
            sample = run(count, SIZES["small"], 256)
            rows[program].append((count, sample))
            print(
                f"  {count:8d} {program:8s} {sample.wall_s:8.2f} {sample.cpu_s:8.2f} "
                f"{sample.cpu_s / calls(count) * 1000:8.2f} {sample.max_rss_mb:8.1f}"
            )
    if len(counts) >= 2:
        for program, points in rows.items():
            (n0, s0), (n1, s1) = points[0], points[-1]
            per_worker_kb = (s1.max_rss_mb - s0.max_rss_mb) * 1024 / (n1 - n0)
            growth = (s1.cpu_s / calls(n1)) / (s0.cpu_s / calls(n0))
            print(
                f"  {program}: peak memory per extra worker {per_worker_kb:.1f} KB; CPU per call at "
                f"{n1} / at {n0} workers = {growth:.2f} (1.0 = linear, no quadratic growth)"
            )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--small", type=int, default=20, help="items in the small run")
    parser.add_argument("--large", type=int, default=160, help="items in the large run")
    parser.add_argument("--repeats", type=int, default=3, help="runs per point (the minimum is kept)")
    parser.add_argument("--scale", action="store_true", help="also run 1,000 and 5,000 workers")
    parser.add_argument("--scale-counts", default="1000,5000", help="worker counts for --scale")
    parser.add_argument("--profile", action="store_true", help="cProfile one teamrun run at the large size")
    parser.add_argument(
        "--startup",
        action="store_true",
        help="only the start-up figures: --version, --help, validate, the `starting ...` line",
    )
    parser.add_argument("--startup-repeats", type=int, default=15, help="pairs per start-up figure")
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.serve:
        _serve()
        return 0
    if args.startup:
        startup_table(args.startup_repeats)
        print(json.dumps({"note": "ratios for people to read; nothing here asserts a timing"}))
        return 0
    teamrun = [sys.executable, "-m", "teamrun.cli"]
    provider = Provider()
    try:
        with tempfile.TemporaryDirectory(prefix="teamrun-bench-cli-") as tmp:
            bench = Bench(Path(tmp), provider.url, sys.executable, teamrun)
            bench.teamrun_run(2, 40, 256)  # warm the file caches of both programs
            bench.bare_run(2, 40, 256)
            results = slope_table(bench, args.small, args.large, args.repeats)
            print(
                f"\n{'tool output':12s} {'per-call CPU ratio':>20s} {'target':>8s} "
                f"{'fixed extra s':>14s} {'target':>8s}"
            )
            for label, ratio, extra in results:
                print(
                    f"{label:12s} {ratio:19.2f}x {'<= 1.30':>8s} {extra:14.2f} {'<= 0.30':>8s}  "
                    f"{'holds' if ratio <= PER_CALL_TARGET and extra <= FIXED_TARGET_S else 'MISSED'}"
                )
            if args.profile:
                out = Path(tmp) / "teamrun.prof"
                env = bench.env(SIZES["30k"])
                argv = [
                    sys.executable,
                    "-m",
                    "cProfile",
                    "-o",
                    str(out),
                    "-m",
                    "teamrun.cli",
                    "-q",
                    "execute",
                    str(bench.team(256)),
                    "--input",
                    f"items {args.large}",
                    "--progress",
                    "none",
                ]
                subprocess.run(argv, env=env, cwd=tmp, check=True, stdout=subprocess.DEVNULL)
                import pstats

                print(f"\ncProfile of one teamrun run ({args.large} items, 30k tool output), by own time:")
                pstats.Stats(str(out)).sort_stats("tottime").print_stats(15)
            if args.scale:
                scale_table(bench, [int(c) for c in args.scale_counts.split(",")])
    finally:
        provider.close()
    print(json.dumps({"note": "ratios for people to read; nothing here asserts a timing"}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
