#!/usr/bin/env python
"""How much teamrun costs on top of the model calls it makes.

    python benchmarks/bench_execute.py            # both benchmarks, a table of ratios
    python benchmarks/bench_execute.py --profile  # plus a cProfile of teamrun's client CPU

1. **Client CPU per model call** (server answers at once): a supervisor hands
   three workers a task per round; each worker calls a tool a few times and
   answers. The same calls, with the same message and tool shapes, are made
   by a minimal hand-written baseline (``litellm.acompletion`` +
   ``asyncio.gather``). ``time.process_time()`` of this process is measured
   around each run (plus a short settle, so LiteLLM's background logging is
   counted); the fake server runs in a subprocess so its CPU is not counted.
   Target: teamrun <= 1.3 x the baseline.
2. **Fan-out wall time** (server latency 300 ms): the supervisor delegates to
   three workers in one turn, each answers in one call, then the supervisor
   answers. The critical path is three model calls (900 ms). Target: teamrun
   <= 1.15 x the critical path.

Both are warmed up first (LiteLLM's first call is slow). Results are ratios
for people to read, not assertions; ``--check`` exits 1 when a target is missed.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
for _name in ("NO_PROXY", "no_proxy"):  # loopback traffic never goes through a proxy
    os.environ[_name] = ",".join(filter(None, [os.environ.get(_name), "127.0.0.1", "localhost"]))

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

KEY_ENV = "TEAMRUN_BENCH_KEY"
CPU_TARGET = 1.30
FANOUT_TARGET = 1.15


@dataclass(frozen=True)
class Shape:
    """The conversation every run follows: rounds of delegation to workers that call a tool."""

    workers: int
    rounds: int
    """Supervisor turns that delegate (one task to every worker each)."""
    turns: int
    """Model calls per worker invocation: ``turns - 1`` tool turns, then the answer."""

    @property
    def calls(self) -> int:
        return self.rounds * self.workers * self.turns + self.rounds + 1

    @property
    def names(self) -> list[str]:
        return [f"w{i}" for i in range(1, self.workers + 1)]


# -- the fake server (runs in a subprocess: `bench_execute.py --serve ...`) ------------------
def _serve(latency: float, shape: Shape) -> None:
    from tests import fakeserver
    from tests.fakeserver import FakeOpenAI, Reply, text, tool_calls

    # The server writes headers and body separately; without TCP_NODELAY every answer
    # waits ~40 ms for the client's delayed ACK (Nagle), which would swamp both benchmarks.
    fakeserver._RequestHandler.disable_nagle_algorithm = True

    def reply(request: dict[str, Any]) -> Reply:
        messages = request.get("messages", [])
        if request.get("model") == "lead":
            done = sum(1 for m in messages if m.get("role") == "assistant" and m.get("tool_calls"))
            if done < shape.rounds:
                return tool_calls(
                    *[
                        (f"ask_{name}", {"task": f"round {done + 1}: look into part {name} and report"})
                        for name in shape.names
                    ]
                )
            return text("Final answer: every part was looked into and the findings agree.")
        steps = sum(1 for m in messages if m.get("role") == "tool")
        if steps < shape.turns - 1:
            return tool_calls(("note", {"text": f"finding number {steps + 1} about this part"}))
        return text(f"{request.get('model')}: the part checks out ({steps} notes taken).")

    server = FakeOpenAI(latency=latency)
    server.handler("*", reply)
    server.start()
    print(server.port, flush=True)
    sys.stdin.read()  # until the parent closes our stdin
    server.stop()


class ServerProcess:
    """The fake server in a child process, so its CPU time is not the client's."""

    def __init__(self, latency: float, shape: Shape) -> None:
        self.process = subprocess.Popen(
            [
                sys.executable,
                str(Path(__file__).resolve()),
                "--serve",
                "--latency",
                str(latency),
                "--shape",
                json.dumps([shape.workers, shape.rounds, shape.turns]),
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            cwd=REPO,
        )
        assert self.process.stdout is not None
        port = self.process.stdout.readline().strip()
        if not port.isdigit():
            self.close()
            raise RuntimeError(f"the fake server did not start (said {port!r})")
        self.url = f"http://127.0.0.1:{port}/v1"

    def close(self) -> None:
        if self.process.stdin is not None:
            self.process.stdin.close()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()


# -- teamrun --------------------------------------------------------------------------------
TOOLS_MODULE = '''\
async def note(text: str) -> str:
    """Write down one finding.

    Args:
        text: The finding.
    """
    return "noted: " + text
'''


def write_team(directory: Path, url: str, shape: Shape, *, tools: bool) -> Path:
    (directory / "bench_tools.py").write_text(TOOLS_MODULE, encoding="utf-8")
    worker_tools = "tools: [note]" if tools else "tools: []"
    workers = "\n".join(
        f"  {name}: {{model: openai/{name}, description: Looks into part {name}., {worker_tools},"
        f" budget: {{max_steps: {shape.turns + 5}, max_tool_calls: {shape.turns + 5}}}}}"
        for name in shape.names
    )
    body = (
        textwrap.dedent(f"""\
        version: 1
        name: bench
        supervisor: lead
        defaults:
          api_base: {url}
          api_key_env: {KEY_ENV}
          request_timeout_s: 30
        agents:
          lead:
            model: openai/lead
            description: Splits the work and writes the answer.
            instructions: Split the task between your workers, then answer.
            delegates_to: [{", ".join(shape.names)}]
            budget: {{max_steps: {shape.rounds + 5}, max_delegations: {shape.rounds * shape.workers + 5}}}
        """)
        + workers
        + "\n"
    )
    if tools:
        body += 'tools:\n  note: {python: "bench_tools:note"}\n'
    path = directory / f"team-{shape.workers}-{shape.rounds}-{shape.turns}.yaml"
    path.write_text(body, encoding="utf-8")
    return path


def teamrun_runner(path: Path, *, subscribers: tuple[Any, ...] = ()) -> Callable[[], Awaitable[Any]]:
    import teamrun

    team = teamrun.load_team(path)

    async def run() -> Any:
        result = await team.run("Look into every part and report.", subscribers=subscribers)
        if result.status != "done":
            raise RuntimeError(f"teamrun run {result.status}: {result.error or result.stopped_by}")
        return result

    return run


# -- the hand-written baseline: litellm.acompletion + asyncio.gather ------------------------
def _function(name: str, description: str, properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": {
                "type": "object",
                "properties": properties,
                "required": required,
                "additionalProperties": False,
            },
        },
    }


def baseline_runner(url: str, shape: Shape) -> Callable[[], Awaitable[Any]]:
    import litellm

    key = os.environ[KEY_ENV]
    task = {"type": "string", "description": "The sub-task, with everything the worker needs."}
    lead_tools = [
        _function(f"ask_{name}", f"Looks into part {name}.", {"task": task}, ["task"]) for name in shape.names
    ]
    note_tools = [
        _function(
            "note", "Write down one finding.", {"text": {"type": "string", "description": "The finding."}}, ["text"]
        )
    ]

    async def call(model: str, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Any:
        response = await litellm.acompletion(
            model=f"openai/{model}",
            messages=list(messages),
            tools=tools,
            api_base=url,
            api_key=key,
            timeout=30,
            num_retries=0,
            max_retries=0,
        )
        return response.choices[0].message

    def assistant(message: Any) -> dict[str, Any]:
        calls = message.tool_calls or []
        shown: dict[str, Any] = {"role": "assistant", "content": message.content}
        if calls:
            shown["tool_calls"] = [
                {
                    "id": c.id,
                    "type": "function",
                    "function": {"name": c.function.name, "arguments": c.function.arguments},
                }
                for c in calls
            ]
        return shown

    async def worker(name: str, job: str) -> str:
        messages = [
            {"role": "system", "content": f"You are {name}. Looks into part {name}."},
            {"role": "user", "content": job},
        ]
        while True:
            message = await call(name, messages, note_tools)
            messages.append(assistant(message))
            if not message.tool_calls:
                return str(message.content or "")
            for c in message.tool_calls:
                text = json.loads(c.function.arguments)["text"]
                messages.append({"role": "tool", "tool_call_id": c.id, "content": f"noted: {text}"})

    async def run() -> str:
        messages = [
            {"role": "system", "content": "Split the task between your workers, then answer."},
            {"role": "user", "content": "Look into every part and report."},
        ]
        while True:
            message = await call("lead", messages, lead_tools)
            messages.append(assistant(message))
            if not message.tool_calls:
                return str(message.content or "")
            calls = list(message.tool_calls)
            answers = await asyncio.gather(
                *(worker(c.function.name.removeprefix("ask_"), json.loads(c.function.arguments)["task"]) for c in calls)
            )
            for c, answer in zip(calls, answers, strict=True):
                content = json.dumps(
                    {"agent": c.function.name.removeprefix("ask_"), "status": "ok", "response": answer}
                )
                messages.append({"role": "tool", "tool_call_id": c.id, "content": content})

    return run


# -- measuring ------------------------------------------------------------------------------
async def cpu_of(run: Callable[[], Awaitable[Any]], settle_s: float = 0.05) -> float:
    """Client CPU seconds of one run, including LiteLLM's background work it leaves behind."""
    gc.collect()
    start = time.process_time()
    await run()
    await asyncio.sleep(settle_s)
    return time.process_time() - start


async def wall_of(run: Callable[[], Awaitable[Any]]) -> float:
    gc.collect()
    start = time.perf_counter()
    await run()
    return time.perf_counter() - start


@dataclass
class Row:
    name: str
    teamrun: str
    reference: str
    ratio: float
    target: float

    @property
    def holds(self) -> bool:
        return self.ratio <= self.target


async def bench_cpu(shape: Shape, repeats: int, directory: Path, profile: bool) -> list[Row]:
    server = ServerProcess(0.0, shape)
    try:
        path = write_team(directory, server.url, shape, tools=True)
        variants: dict[str, Callable[[], Awaitable[Any]]] = {
            "baseline": baseline_runner(server.url, shape),
            "teamrun": teamrun_runner(path),
            "plain": teamrun_runner(path, subscribers=(_plain_progress(),)),
        }
        if profile:
            variants["no_cost"] = _without_cost_lookup(variants["teamrun"])
        for run in [*variants.values(), *variants.values()]:  # warm-up: imports, first-call costs
            await run()
        samples: dict[str, list[float]] = {name: [] for name in variants}
        names = list(variants)
        for i in range(repeats):  # interleaved, rotating the order, so drift hits all alike
            for name in names[i % len(names) :] + names[: i % len(names)]:
                samples[name].append(await cpu_of(variants[name]) / shape.calls * 1000)
        if profile:
            await _profile({"baseline": variants["baseline"], "teamrun": variants["teamrun"]}, shape.calls)
    finally:
        server.close()
    labels = {
        "baseline": "baseline (acompletion + gather)",
        "teamrun": "teamrun (Python API)",
        "plain": "teamrun + PlainProgress",
        "no_cost": "teamrun, cost lookup skipped",
    }
    print(
        f"\nclient CPU per model call: {shape.calls} calls per run ({shape.rounds} rounds x "
        f"{shape.workers} workers x {shape.turns} turns + {shape.rounds + 1} lead calls), {repeats} runs each"
    )
    ratio: dict[str, float] = {}
    for name, values in samples.items():
        paired = [ours / base for ours, base in zip(values, samples["baseline"], strict=True)]
        ratio[name] = statistics.median(paired)
        print(
            f"  {labels[name]:34s} median {statistics.median(values):5.2f} ms/call  "
            f"min {min(values):5.2f}  max {max(values):5.2f}  paired ratio {ratio[name]:.2f}x"
        )
    base_ms = f"{statistics.median(samples['baseline']):.2f} ms"
    rows = [
        Row(
            "client CPU per model call",
            f"{statistics.median(samples['teamrun']):.2f} ms",
            base_ms,
            ratio["teamrun"],
            CPU_TARGET,
        ),
        Row(
            "  same, with PlainProgress",
            f"{statistics.median(samples['plain']):.2f} ms",
            base_ms,
            ratio["plain"],
            CPU_TARGET,
        ),
    ]
    if "no_cost" in samples:
        rows.append(
            Row(
                "  same, cost lookup skipped",
                f"{statistics.median(samples['no_cost']):.2f} ms",
                base_ms,
                ratio["no_cost"],
                CPU_TARGET,
            )
        )
    return rows


def _without_cost_lookup(run: Callable[[], Awaitable[Any]]) -> Callable[[], Awaitable[Any]]:
    """An ablation: ``run`` with the adapter's price lookup (``_cost``) replaced by 0.0."""
    from teamrun.llm import adapter

    async def ablated() -> Any:
        real = adapter._cost
        adapter._cost = lambda *_: 0.0
        try:
            return await run()
        finally:
            adapter._cost = real

    return ablated


def _plain_progress() -> Any:
    import io

    from teamrun.cli.progress import PlainProgress

    return PlainProgress(io.StringIO())


async def _profile(runs: dict[str, Callable[[], Awaitable[Any]]], calls: int, repeats: int = 3) -> None:
    """Where the client CPU goes, per model call, teamrun next to the baseline."""
    import cProfile
    import pstats

    areas: dict[str, dict[str, float]] = {}
    tops: dict[str, list[tuple[float, float, str]]] = {}
    for label, run in runs.items():
        profiler = cProfile.Profile()
        profiler.enable()
        for _ in range(repeats):
            await run()
        profiler.disable()
        table = pstats.Stats(profiler).stats  # type: ignore[attr-defined]
        per_call = 1000 / (repeats * calls)
        areas[label] = {}
        for (file, _line, _func), row in table.items():
            area = _area(file)
            areas[label][area] = areas[label].get(area, 0.0) + row[2] * per_call
        tops[label] = sorted(
            (
                (row[2] * per_call, row[3] * per_call, f"{_short(file)}:{func}")
                for (file, _line, func), row in table.items()
            ),
            reverse=True,
        )
    print(f"\ncProfile, {repeats} runs each; own CPU ms per model call by area (profiler overhead included):")
    print(f"  {'area':30s} {'baseline':>9s} {'teamrun':>9s} {'extra':>8s}")
    names = sorted(
        set(areas["baseline"]) | set(areas["teamrun"]),
        key=lambda a: -abs(areas["teamrun"].get(a, 0) - areas["baseline"].get(a, 0)),
    )
    for area in names[:12]:
        ours, base = areas["teamrun"].get(area, 0.0), areas["baseline"].get(area, 0.0)
        print(f"  {area:30s} {base:9.3f} {ours:9.3f} {ours - base:+8.3f}")
    total_base, total_ours = sum(areas["baseline"].values()), sum(areas["teamrun"].values())
    print(f"  {'total':30s} {total_base:9.3f} {total_ours:9.3f} {total_ours - total_base:+8.3f}")
    print("  teamrun: functions by own time (ms per model call; cumulative in brackets):")
    for own, cumulative, where in tops["teamrun"][:12]:
        print(f"    {own:6.3f}  [{cumulative:6.3f}]  {where}")
    print("  teamrun's own code and its cost lookups, cumulative ms per model call:")
    wanted = (
        "llm/adapter.py:_cost",
        "llm/adapter.py:_to_reply",
        "llm/adapter.py:build",
        "engine/turn/agent_loop.py:_tool",
        "tools/invoke.py:invoke_tool",
        "events.py:emit",
        "engine/delegation/delegator.py:_prompt",
        "engine/delegation/hooks.py:run",
    )
    seen = {where: cumulative for _own, cumulative, where in tops["teamrun"]}
    for where in wanted:
        if where in seen:
            print(f"    {seen[where]:6.3f}  {where}")


def _short(file: str) -> str:
    for marker in ("/runner/", "/teamrun/", "site-packages/"):
        if marker in file:
            return file.split(marker)[-1]
    return file.rsplit("/", 1)[-1]


def _area(file: str) -> str:
    if "/runner/" in file or "/teamrun/" in file:
        return "teamrun/" + file.split("/runner/")[-1].split("/teamrun/")[-1].split("/")[0]
    if "site-packages/" in file:
        return file.split("site-packages/")[-1].split("/")[0]
    if file.startswith(("~", "<")):
        return "(built-in functions)"
    return "(stdlib)"


async def bench_fanout(latency: float, repeats: int, directory: Path) -> list[Row]:
    shape = Shape(workers=3, rounds=1, turns=1)
    server = ServerProcess(latency, shape)
    try:
        ours = teamrun_runner(write_team(directory, server.url, shape, tools=False))
        base = baseline_runner(server.url, shape)
        await base()
        await ours()
        walls: dict[str, list[float]] = {"teamrun": [], "baseline": []}
        for _ in range(repeats):
            walls["baseline"].append(await wall_of(base))
            walls["teamrun"].append(await wall_of(ours))
    finally:
        server.close()
    critical = 3 * latency
    median = {k: statistics.median(v) for k, v in walls.items()}
    print(
        f"\nfan-out to 3 workers at {latency * 1000:.0f} ms latency (critical path {critical * 1000:.0f} ms), "
        f"median of {repeats}:"
    )
    for key in ("baseline", "teamrun"):
        print(
            f"  {key:34s} {median[key] * 1000:6.0f} ms  "
            f"(min {min(walls[key]) * 1000:.0f}, max {max(walls[key]) * 1000:.0f})"
        )
    return [
        Row(
            "fan-out wall time",
            f"{median['teamrun'] * 1000:.0f} ms",
            f"{critical * 1000:.0f} ms (path)",
            median["teamrun"] / critical,
            FANOUT_TARGET,
        ),
        Row(
            "  baseline gather, for scale",
            f"{median['baseline'] * 1000:.0f} ms",
            f"{critical * 1000:.0f} ms (path)",
            median["baseline"] / critical,
            FANOUT_TARGET,
        ),
    ]


def print_table(rows: list[Row]) -> None:
    print(f"\n{'benchmark':30s} {'teamrun':>10s} {'reference':>18s} {'ratio':>7s} {'target':>8s}  holds")
    for row in rows:
        print(
            f"{row.name:30s} {row.teamrun:>10s} {row.reference:>18s} {row.ratio:6.2f}x "
            f"{'<= ' + format(row.target, '.2f'):>7s}x  {'yes' if row.holds else 'NO'}"
        )


async def main(args: argparse.Namespace) -> int:
    from teamrun.logs import configure_logging

    configure_logging(-1)  # errors only, as `teamrun -q`: log lines are not what is measured
    os.environ.setdefault(KEY_ENV, "sk-bench-not-a-real-key")
    shape = Shape(workers=3, rounds=args.rounds, turns=args.turns)
    with tempfile.TemporaryDirectory(prefix="teamrun-bench-") as tmp:
        rows = await bench_cpu(shape, args.repeats, Path(tmp), args.profile)
        rows += await bench_fanout(args.latency, args.fanout_repeats, Path(tmp))
    print_table(rows)
    missed = [row.name for row in rows if not row.name.startswith(" ") and not row.holds]
    return 1 if args.check and missed else 0


def _parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=9, help="measured runs per variant (median)")
    parser.add_argument("--rounds", type=int, default=3, help="supervisor rounds in the CPU benchmark")
    parser.add_argument("--turns", type=int, default=6, help="model calls per worker invocation")
    parser.add_argument("--fanout-repeats", type=int, default=5, help="measured fan-out runs (median)")
    parser.add_argument("--latency", type=float, default=0.3, help="server latency for the fan-out (s)")
    parser.add_argument("--profile", action="store_true", help="cProfile teamrun's client CPU")
    parser.add_argument("--check", action="store_true", help="exit 1 when a target is missed")
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--shape", default="[3, 1, 1]", help=argparse.SUPPRESS)
    return parser.parse_args(argv)


if __name__ == "__main__":
    options = _parse(sys.argv[1:])
    if options.serve:
        _serve(options.latency, Shape(*json.loads(options.shape)))
    else:
        sys.exit(asyncio.run(main(options)))
