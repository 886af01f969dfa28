#!/usr/bin/env python
"""`teamrun serve` as a user runs it: server CPU per model call next to a bare LiteLLM loop, req/s, refusals.

    python benchmarks/bench_serve.py                          # everything, default sizes (several minutes)
    python benchmarks/bench_serve.py --clients 100 --teams solo --modes plain stream --workers 1 2
    python benchmarks/bench_serve.py --baseline-ref main      # ... and that commit's code, served in turns
    python benchmarks/bench_serve.py --profile 100            # py-spy of the server at 100 clients (if installed)
    python benchmarks/bench_serve.py --cprofile 20 100 --no-refused  # cProfile of the server's loop thread

Every party runs in a process of its own, on loopback only:

* the fake OpenAI-compatible provider (``tests/fakeserver.py``), answering
  after ``--latency`` seconds (100 ms by default, so runs overlap);
* ``teamrun serve`` of two teams on it — ``solo`` (one agent, one model call
  per request) and ``fanout`` (a supervisor hands one task to each of three
  workers in one turn, then answers: five model calls per request) — with
  ``--workers 1`` and (``--workers 1 2``) several processes;
* the bare loop: a small program making the same model calls with
  ``litellm.acompletion`` + ``asyncio.gather`` at the same concurrency (what
  any LiteLLM program pays), in its own process;
* this script, the clients (aiohttp): N concurrent clients, each sending its
  next request when the last is answered, plain or streaming
  (``"stream": true``, read to ``[DONE]``). The clients must cost far less
  than the server, or they become the bottleneck and set the pace: with
  httpx (7-14 ms of CPU per request at 100 clients, against aiohttp's 0.3 ms)
  this process filled its core, requests reached the server up to 5 s after
  they were sent, in bursts, and the server's figures followed the clients'.

For each point, CPU is taken by slope: two batches of different sizes, the
server's CPU time (from /proc, every process of the server) and the bare
loop's (``time.process_time`` in its process) for each, and the difference
divided by the difference in model calls — so whatever a batch costs once
(a warm-up, a timer firing) cancels out. The headline is that ratio, served /
bare, from the same run. Requests/s is next to the bare loop's (calling the
provider directly through LiteLLM at the same concurrency) and to raw aiohttp
requests to the provider. A last part fills the server's only run slot and
measures the CPU of a request refused with 429, next to a ``GET /healthz``.

Reports figures; asserts nothing. Bounded: every batch is a fixed number of
requests (``--size``), and every request has a timeout.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import httpx

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
for _name in ("NO_PROXY", "no_proxy"):  # loopback traffic never goes through a proxy
    os.environ[_name] = ",".join(filter(None, [os.environ.get(_name), "127.0.0.1", "localhost"]))

REPO = Path(__file__).resolve().parents[1]
KEY = "sk-fake-bench-key-0123456789"
CALLS = {"solo": 1, "fanout": 5, "hold": 1}
"""Model calls per request, by team."""
HOLD_S = 120.0
"""How long the provider takes to answer the ``hold`` team (it keeps the refusal server's only slot taken)."""

FAKE_PROVIDER = """
import sys
sys.path.insert(0, sys.argv[1])
import fakeserver
from fakeserver import FakeOpenAI, text, tool_calls
fakeserver._Server.request_queue_size = 1024  # socketserver's default backlog (5) resets bursts of connections
fake = FakeOpenAI(latency=float(sys.argv[2])).start()

def answer(request):
    model = request.get("model", "")
    if model == "hold":
        return text("held", delay=float(sys.argv[3]))
    if model == "lead" and not any(m.get("role") == "tool" for m in request["messages"]):
        return tool_calls(*[(f"ask_w{i}", {"task": f"part {i} of the question"}) for i in (1, 2, 3)])
    return text("Hello from the fake provider: a short answer of a few words.")

fake.handler("*", answer)
print(fake.url, flush=True)
sys.stdin.read()  # until the benchmark closes our stdin
"""

TEAMS = {
    "solo": """version: 1
name: solo
supervisor: lead
defaults:
  model: openai/{solo_model}
  api_base: {url}
agents:
  lead:
    description: Answers.
""",
    "fanout": """version: 1
name: fanout
supervisor: lead
defaults:
  model: openai/worker
  api_base: {url}
agents:
  lead:
    description: Splits the question in three and answers from the parts.
    model: openai/lead
    delegates_to: [w1, w2, w3]
    delegation: {{parallel: true, max_concurrency: 3}}
  w1: {{description: Answers part one.}}
  w2: {{description: Answers part two.}}
  w3: {{description: Answers part three.}}
""",
    "hold": """version: 1
name: hold
supervisor: lead
defaults:
  model: openai/hold
  api_base: {url}
agents:
  lead:
    description: Takes its time.
""",
}

BARE = r"""
import asyncio, json, os, sys, time
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
import litellm

URL = sys.argv[1]
TOOLS = [{"type": "function", "function": {"name": f"ask_w{i}", "description": f"Answers part {i}.",
          "parameters": {"type": "object", "properties": {"task": {"type": "string"}}, "required": ["task"]}}}
         for i in (1, 2, 3)]

def shown(message):
    out = {"role": "assistant", "content": message.content}
    if message.tool_calls:
        out["tool_calls"] = [{"id": c.id, "type": "function",
                              "function": {"name": c.function.name, "arguments": c.function.arguments}}
                             for c in message.tool_calls]
    return out

async def call(model, messages, tools=None):
    kwargs = {"tools": tools} if tools else {}
    response = await litellm.acompletion(model=f"openai/{model}", api_base=URL, messages=messages, **kwargs)
    return response.choices[0].message

async def solo():
    await call(sys.argv[2], [{"role": "user", "content": "Say hello."}])

async def fanout():
    messages = [{"role": "system", "content": "Split the question in three."},
                {"role": "user", "content": "Say hello."}]
    message = await call("lead", messages, TOOLS)
    messages.append(shown(message))
    async def part(c):
        task = json.loads(c.function.arguments)["task"]
        return await call("worker", [{"role": "system", "content": "Answer."}, {"role": "user", "content": task}])
    answers = await asyncio.gather(*(part(c) for c in message.tool_calls))
    for c, answer in zip(message.tool_calls, answers):
        messages.append({"role": "tool", "tool_call_id": c.id,
                         "content": json.dumps({"status": "ok", "response": answer.content})})
    await call("lead", messages, TOOLS)

async def batch(kind, clients, count):
    todo = iter(range(count))
    task = solo if kind == "solo" else fanout
    async def worker():
        for _ in todo:
            await task()
    await asyncio.gather(*(worker() for _ in range(clients)))

print("ready", flush=True)
for line in sys.stdin:
    kind, clients, count = line.split()
    cpu, wall = time.process_time(), time.perf_counter()
    asyncio.run(batch(kind, int(clients), int(count)))
    print(time.process_time() - cpu, time.perf_counter() - wall, flush=True)
"""


PROFILED = r"""
import cProfile, os, runpy, signal, sys, time
out = sys.argv[1]
profiler = None
def on(sig, frame):
    global profiler
    profiler = cProfile.Profile(time.thread_time)  # CPU of the thread it runs on: the event loop's
    profiler.enable()
def off(sig, frame):
    profiler.disable()
    profiler.dump_stats(out + ".part")
    os.replace(out + ".part", out)
signal.signal(signal.SIGUSR1, on)
signal.signal(signal.SIGUSR2, off)
sys.argv = ["teamrun", *sys.argv[2:]]
runpy.run_module("teamrun.cli", run_name="__main__")
"""
"""Runs ``teamrun`` with cProfile switched on by SIGUSR1 and dumped to ``argv[1]`` by SIGUSR2."""


# -- measuring ------------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def tree_pids(pid: int) -> list[int]:
    """``pid`` and all its descendants (Linux /proc)."""
    found = [pid]
    for current in found:
        for task in Path(f"/proc/{current}/task").glob("*"):
            try:
                found += [int(p) for p in (task / "children").read_text().split()]
            except OSError:
                continue
    return found


def tree_cpu_s(pid: int) -> float:
    """User + system CPU seconds so far of ``pid`` and its descendants (Linux)."""
    total = 0.0
    for each in tree_pids(pid):
        try:
            fields = Path(f"/proc/{each}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return total


@dataclass
class Batch:
    count: int
    wall_s: float
    cpu_s: float
    refused: int = 0
    latencies: list[float] = field(default_factory=list)

    @property
    def rate(self) -> float:
        return self.count / self.wall_s


def slope_ms(small: Batch, large: Batch, calls_per_request: int) -> float:
    """CPU per model call (ms) between two batches: the difference over the difference in calls."""
    return (large.cpu_s - small.cpu_s) * 1000 / ((large.count - small.count) * calls_per_request)


dropped: list[float] = []
"""When a connection dropped under a request (the request was sent again)."""


async def drive(
    send: Callable[[aiohttp.ClientSession], Awaitable[int]], clients: int, count: int, client: aiohttp.ClientSession
) -> tuple[float, list[float], int]:
    """``count`` requests from ``clients`` concurrent workers: wall seconds, latencies, refusals (429)."""
    todo = iter(range(count))
    latencies: list[float] = []
    refused = 0

    async def worker() -> None:
        nonlocal refused
        for _ in todo:
            started = time.perf_counter()
            for attempt in range(3):  # as the OpenAI client does: a dropped connection is retried
                try:
                    status = await send(client)
                    break
                except aiohttp.ClientConnectionError:
                    dropped.append(time.perf_counter())
                    if attempt == 2:
                        raise
            latencies.append(time.perf_counter() - started)
            if status == 429:
                refused += 1
            elif status >= 400:
                raise SystemExit(f"a request failed with HTTP {status}")

    started = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(clients)))
    return time.perf_counter() - started, latencies, refused


def chat_sender(url: str, team: str, stream: bool) -> Callable[[aiohttp.ClientSession], Awaitable[int]]:
    body = {"model": team, "messages": [{"role": "user", "content": "Say hello."}], "stream": stream}

    async def send(client: aiohttp.ClientSession) -> int:
        if not stream:
            return await answered(client.post(url, json=body))
        async with client.post(url, json=body) as response:
            seen = b""
            async for piece in response.content.iter_any():
                seen = (seen + piece)[-32:]
            if response.status == 200 and b"[DONE]" not in seen:
                raise SystemExit("a stream ended without [DONE]")
            return response.status

    return send


async def answered(request: Any) -> int:
    """The HTTP status of ``request`` (an aiohttp request, not yet entered), its body read."""
    async with request as response:
        await response.read()
        return int(response.status)


def session(connections: int, *, force_close: bool = False) -> aiohttp.ClientSession:
    """The clients' HTTP session: at most ``connections`` at once, kept alive unless ``force_close``."""
    connector = aiohttp.TCPConnector(limit=connections, force_close=force_close)
    return aiohttp.ClientSession(connector=connector, timeout=aiohttp.ClientTimeout(total=120))


async def chat_batch(base: str, pids: list[int], team: str, stream: bool, clients: int, count: int) -> Batch:
    """``count`` chat completions of ``team`` sent to ``base`` by ``clients`` concurrent clients; the CPU is that of
    the processes ``pids`` and their descendants (a server, or several replicas behind a load balancer at ``base``)."""
    send = chat_sender(f"{base}/v1/chat/completions", team, stream)
    async with session(clients + 10) as client:
        before = sum(tree_cpu_s(pid) for pid in pids)
        wall, latencies, refused = await drive(send, clients, count, client)
        after = sum(tree_cpu_s(pid) for pid in pids)
    return Batch(count, wall, after - before, refused, latencies)


class Served:
    """`teamrun serve` of the bench teams, from the code under ``root`` (this tree or an unpacked commit)."""

    def __init__(
        self,
        label: str,
        root: Path,
        teams: list[Path],
        *,
        workers: int,
        slots: int,
        profile_to: Path | None = None,
        extra: Sequence[str] = (),
    ) -> None:
        self.label = label
        self.port = free_port()
        path = os.pathsep.join(filter(None, [str(root / "runner"), os.environ.get("BENCH_SERVE_PYTHONPATH")]))
        env = {**os.environ, "PYTHONPATH": path, "OPENAI_API_KEY": KEY}
        more = ["--workers", str(workers)] if workers > 1 else []
        start = ["-c", PROFILED, str(profile_to)] if profile_to is not None else ["-m", "teamrun.cli"]
        self.process = subprocess.Popen(
            [
                sys.executable,
                *start,
                "-q",
                "serve",
                *map(str, teams),
                "--port",
                str(self.port),
                "--max-concurrent-runs",
                str(slots),
                *more,
                *extra,
            ],
            env=env,
            cwd=root,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        self.base = f"http://127.0.0.1:{self.port}"

    def wait_ready(self, team: str, workers: int) -> None:
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise SystemExit(f"teamrun serve ({self.label}) did not start")
            try:
                httpx.get(f"{self.base}/readyz", timeout=5).raise_for_status()
                break
            except httpx.HTTPError:
                time.sleep(0.1)
        # warm up every process (LiteLLM's import, its first call): enough requests to reach each one
        asyncio.run(self._batch(team, False, max(2, 4 * workers), max(8, 16 * workers)))

    async def _batch(self, team: str, stream: bool, clients: int, count: int) -> Batch:
        return await chat_batch(self.base, [self.process.pid], team, stream, clients, count)

    def batch(self, team: str, stream: bool, clients: int, count: int) -> Batch:
        return asyncio.run(self._batch(team, stream, clients, count))

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


class Bare:
    """The bare loop's process: ``litellm.acompletion`` + ``asyncio.gather``, batches on request."""

    def __init__(self, script: Path, provider: str, solo_model: str) -> None:
        env = {**os.environ, "OPENAI_API_KEY": KEY}
        self.process = subprocess.Popen(
            [sys.executable, str(script), provider, solo_model],
            env=env,
            text=True,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
        )
        assert self.process.stdout is not None
        self.process.stdout.readline()
        self.batch("solo", 4, 8)
        self.batch("fanout", 4, 8)

    def batch(self, team: str, clients: int, count: int) -> Batch:
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write(f"{team} {clients} {count}\n")
        self.process.stdin.flush()
        cpu, wall = map(float, self.process.stdout.readline().split())
        return Batch(count, wall, cpu)

    def stop(self) -> None:
        self.process.kill()
        self.process.wait()


async def raw_direct(url: str, clients: int, count: int) -> float:
    """Requests/s of plain aiohttp POSTs straight to the provider."""
    body = {"model": "solo", "messages": [{"role": "user", "content": "Say hello."}]}
    headers = {"Authorization": "Bearer " + KEY}
    async with session(clients, force_close=True) as client:  # the fake closes connections

        async def send(c: aiohttp.ClientSession) -> int:
            return await answered(c.post(url, json=body, headers=headers))

        wall, _, _ = await drive(send, clients, count, client)
    return count / wall


# -- the parts ------------------------------------------------------------------------------------


def sizes(clients: int, size: int) -> tuple[int, int]:
    """The two batch sizes (requests) for ``clients`` concurrent clients."""
    small = max(20, size * clients)
    return small, 3 * small


def per_call(args: argparse.Namespace, servers: list[tuple[Served, int]], bare: Bare, provider: str) -> None:
    print(f"\n== CPU per model call (slope of two batches per point; {args.rounds} round(s), medians) ==")
    print(
        f"{'team':<7} {'clients':>7} {'mode':<6} | {'bare ms':>7} {'bare r/s':>8} {'raw r/s':>9} | "
        f"{'server':<14} {'ms/call':>7} {'ratio':>6} {'req/s':>7} {'r/s ratio':>9} {'mean ms':>8}"
    )
    for team in args.teams:
        for clients in args.clients:
            small, large = sizes(clients, args.size if team == "solo" else max(1, args.size // 2))
            bare_ms, bare_rate, raw = [], [], []
            served: dict[tuple[str, str], list[tuple[float, Batch]]] = {}
            for _ in range(args.rounds):
                b_small, b_large = bare.batch(team, clients, small), bare.batch(team, clients, large)
                bare_ms.append(slope_ms(b_small, b_large, CALLS[team]))
                bare_rate.append(b_large.rate)
                if team == "solo":
                    raw.append(asyncio.run(raw_direct(f"{provider}/chat/completions", clients, large)))
                for server, _workers in servers:
                    for mode in args.modes:
                        s_small = server.batch(team, mode == "stream", clients, small)
                        s_large = server.batch(team, mode == "stream", clients, large)
                        served.setdefault((server.label, mode), []).append(
                            (slope_ms(s_small, s_large, CALLS[team]), s_large)
                        )
            bare_cpu, bare_rps = statistics.median(bare_ms), statistics.median(bare_rate)
            raw_rps = f"{statistics.median(raw):>9.1f}" if raw else f"{'':>9}"
            first = True
            for (label, mode), points in served.items():
                cpu = statistics.median(p[0] for p in points)
                rate = statistics.median(p[1].rate for p in points)
                mean = statistics.median(statistics.mean(p[1].latencies) * 1000 for p in points)
                head = (
                    f"{team:<7} {clients:>7} {mode:<6} | {bare_cpu:>7.2f} {bare_rps:>8.1f} {raw_rps} | "
                    if first
                    else f"{'':<7} {'':>7} {mode:<6} | {'':>7} {'':>8} {'':>9} | "
                )
                first = False
                print(
                    f"{head}{label:<14} {cpu:>7.2f} {cpu / bare_cpu:>5.2f}x {rate:>7.1f} "
                    f"{rate / bare_rps:>8.2f}x {mean:>8.0f}",
                    flush=True,
                )


def refusals(args: argparse.Namespace, root: Path, teams: dict[str, Path]) -> None:
    """The CPU of a 429: one run slot, held by a slow run, and bursts of requests that all get refused."""
    server = Served("refusals", root, [teams["solo"], teams["hold"]], workers=1, slots=1)
    try:
        server.wait_ready("solo", 1)

        async def measure() -> None:
            async with session(2) as client:
                async with client.post(f"{server.base}/v1/runs", json={"team": "hold", "input": "wait"}) as held:
                    held.raise_for_status()
                    run_id = (await held.json())["id"]
                try:
                    clients = args.refused_clients
                    small, large = 2 * args.refused, 6 * args.refused

                    async def timed(
                        send: Callable[[aiohttp.ClientSession], Awaitable[int]], count: int, expect: int
                    ) -> Batch:
                        async with session(clients + 5) as c:
                            before = tree_cpu_s(server.process.pid)
                            wall, _, refused = await drive(send, clients, count, c)
                            after = tree_cpu_s(server.process.pid)
                        if expect == 429 and refused != count:
                            raise SystemExit(f"expected {count} refusals, got {refused}")
                        return Batch(count, wall, after - before, refused)

                    chat = chat_sender(f"{server.base}/v1/chat/completions", "solo", False)
                    stream = chat_sender(f"{server.base}/v1/chat/completions", "solo", True)

                    async def health(c: aiohttp.ClientSession) -> int:
                        return await answered(c.get(f"{server.base}/healthz"))

                    async def runs(c: aiohttp.ClientSession) -> int:
                        return await answered(c.post(f"{server.base}/v1/runs", json={"team": "solo", "input": "x"}))

                    rows = [
                        ("GET /healthz (200)", health, 200),
                        ("chat completion, refused", chat, 429),
                        ("streaming chat, refused", stream, 429),
                        ("POST /v1/runs, refused", runs, 429),
                    ]
                    measured: dict[str, float] = {}
                    for _ in range(args.rounds):
                        for name, send, expect in rows:
                            await timed(send, 20, expect)  # warm-up
                            a, b = await timed(send, small, expect), await timed(send, large, expect)
                            measured.setdefault(name, 0.0)
                            measured[name] += (b.cpu_s - a.cpu_s) * 1000 / (large - small) / args.rounds
                    print(
                        f"\n== a refused request (429): server CPU per request, {clients} clients, slope of "
                        f"{small} and {large} requests, keep-alive connections =="
                    )
                    base = measured["GET /healthz (200)"]
                    for name, _, _ in rows:
                        print(f"  {name:<28} {measured[name]:6.3f} ms   {measured[name] / base:5.2f}x /healthz")
                finally:
                    await answered(client.post(f"{server.base}/v1/runs/{run_id}/cancel"))

        asyncio.run(measure())
    finally:
        server.stop()


def profile(args: argparse.Namespace, server: Served, clients: int) -> None:
    """py-spy of the server while ``clients`` streaming clients run the solo team."""
    spy = shutil.which("py-spy")
    if spy is None:
        print("\n(--profile: py-spy is not installed; pip install py-spy)")
        return
    out = Path(tempfile.mkdtemp(prefix="bench-serve-profile-")) / "profile.txt"
    pids = [p for p in tree_pids(server.process.pid) if p != server.process.pid] or [server.process.pid]
    target = pids[-1]
    spies = subprocess.Popen(
        [
            spy,
            "record",
            "--pid",
            str(target),
            "--format",
            "raw",
            "--rate",
            "250",
            "--output",
            str(out),
            "--nonblocking",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    time.sleep(1)
    server.batch("solo", True, clients, 8 * clients)
    spies.terminate()
    spies.wait()
    print(f"\n== py-spy of the server (pid {target}), solo, streaming, {clients} clients: {out} ==")
    if out.exists():
        print_profile(out)


def cprofile(args: argparse.Namespace, root: Path, team: Path) -> None:
    """cProfile (CPU clock of the event-loop thread) of a one-process server, solo team, at each ``--cprofile``
    client count, plain and streaming: the top entries per request, by own and by cumulative time."""
    import pstats

    folder = Path(tempfile.mkdtemp(prefix="bench-serve-cprofile-"))
    out = folder / "server.prof"
    server = Served("cprofile", root, [team], workers=1, slots=max(args.cprofile), profile_to=out)
    try:
        server.wait_ready("solo", 1)
        for clients in args.cprofile:
            for mode in args.modes:
                count = max(300, 4 * clients)
                server.batch("solo", mode == "stream", clients, count // 4)  # warm
                server.process.send_signal(__import__("signal").SIGUSR1)
                time.sleep(0.2)
                measured = server.batch("solo", mode == "stream", clients, count)
                server.process.send_signal(__import__("signal").SIGUSR2)
                deadline = time.monotonic() + 60
                while not out.exists() and time.monotonic() < deadline:
                    time.sleep(0.1)
                keep = folder / f"solo-{mode}-{clients}.prof"
                out.rename(keep)
                stats = pstats.Stats(str(keep))
                total = stats.total_tt  # type: ignore[attr-defined]
                calls = stats.total_calls  # type: ignore[attr-defined]
                print(
                    f"\n== cProfile of the server's loop thread: solo, {mode}, {clients} clients, {count} requests: "
                    f"{total * 1000 / count:.2f} ms CPU and {calls / count:,.0f} calls per request "
                    f"(server process {measured.cpu_s * 1000 / count:.2f} ms/request); {keep} =="
                )
                rows = stats.stats  # type: ignore[attr-defined]
                for key, label in (("tottime", "own"), ("cumtime", "cumulative")):
                    index = 2 if key == "tottime" else 3
                    print(f"  top by {label} time (ms per request, calls per request):")
                    ranked = sorted(rows.items(), key=lambda kv: -kv[1][index])[: args.cprofile_top]
                    for (file, line, name), row in ranked:
                        where = f"{Path(file).parent.name}/{Path(file).name}:{line}" if line else file
                        print(f"    {row[index] * 1000 / count:7.3f}  {row[1] / count:7.1f}  {name}  ({where})")
    finally:
        server.stop()


def print_profile(path: Path, top: int = 25) -> None:
    """Self and inclusive sample shares of the functions in a py-spy raw (collapsed stacks) file."""
    own: dict[str, int] = {}
    inclusive: dict[str, int] = {}
    total = 0
    for line in path.read_text().splitlines():
        stack, _, count_text = line.rpartition(" ")
        count = int(count_text)
        total += count
        frames = [
            f.split(" (")[0] + " (" + f.split(" (")[-1].split(":")[0].rsplit("/", 1)[-1] for f in stack.split(";")
        ]
        own[frames[-1]] = own.get(frames[-1], 0) + count
        for frame in set(frames):
            inclusive[frame] = inclusive.get(frame, 0) + count
    print(f"  {total} samples; top by own time:")
    for frame, count in sorted(own.items(), key=lambda kv: -kv[1])[:top]:
        print(f"    {100 * count / total:5.1f} %  {frame}")


def unpack(ref: str, into: Path) -> Path:
    """The ``runner/`` and ``schemas/`` of commit ``ref``, unpacked under ``into``."""
    archive = subprocess.run(["git", "-C", str(REPO), "archive", ref, "runner", "schemas"], capture_output=True)
    if archive.returncode != 0:
        raise SystemExit(f"git archive {ref} failed: {archive.stderr.decode(errors='replace').strip()}")
    into.mkdir(parents=True, exist_ok=True)
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive.stdout, check=True)
    return into


def start_provider(latency: float) -> tuple[subprocess.Popen[str], str]:
    """The fake provider in a process of its own, answering after ``latency`` seconds: the process and its URL.
    Stop it with ``kill()``."""
    fake = subprocess.Popen(
        [sys.executable, "-c", FAKE_PROVIDER, str(REPO / "tests"), str(latency), str(HOLD_S)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert fake.stdout is not None
    return fake, fake.stdout.readline().strip()


def write_teams(work: Path, provider: str, solo_model: str) -> dict[str, Path]:
    """The bench teams (:data:`TEAMS`) written under ``work`` for the provider at ``provider``, by name."""
    teams = {}
    for name, text in TEAMS.items():
        teams[name] = work / f"{name}.yaml"
        teams[name].write_text(text.format(url=provider, solo_model=solo_model), encoding="utf-8")
    return teams


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--clients", type=int, nargs="+", default=[1, 20, 100])
    parser.add_argument("--teams", nargs="+", choices=["solo", "fanout"], default=["solo", "fanout"])
    parser.add_argument("--modes", nargs="+", choices=["plain", "stream"], default=["plain", "stream"])
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2], help="serve with these --workers")
    parser.add_argument(
        "--size",
        type=int,
        default=2,
        help="the small batch is SIZE requests per client (min 20), the large one 3x that",
    )
    parser.add_argument("--latency", type=float, default=0.1, help="the provider's answer time, seconds")
    parser.add_argument("--rounds", type=int, default=1, help="measure every point this many times (medians)")
    parser.add_argument("--refused", type=int, default=300, help="refusal batches: 2x and 6x this many requests")
    parser.add_argument("--refused-clients", type=int, default=20)
    parser.add_argument("--no-refused", action="store_true", help="skip the refusal part")
    parser.add_argument("--baseline-ref", default="", help="also serve this commit's code (one process)")
    parser.add_argument(
        "--profile",
        type=int,
        default=0,
        metavar="CLIENTS",
        help="py-spy the (first) server at this many streaming clients",
    )
    parser.add_argument(
        "--cprofile",
        type=int,
        nargs="+",
        default=[],
        metavar="CLIENTS",
        help="instead of the rest: cProfile the server (solo team, --modes) at these client counts",
    )
    parser.add_argument("--cprofile-top", type=int, default=30, help="entries to print per profile")
    parser.add_argument(
        "--solo-model",
        default="solo",
        help="the model name the solo team and the bare loop ask the fake provider for: LiteLLM knows no price "
        "for 'solo' (as for most local models) and looks for one on every call; a name it prices (gpt-4o-mini) "
        "takes its priced path",
    )
    args = parser.parse_args()

    print(
        f"load average {os.getloadavg()[0]:.1f} {os.getloadavg()[1]:.1f} {os.getloadavg()[2]:.1f} on "
        f"{os.cpu_count()} cores; provider latency {args.latency * 1000:.0f} ms; solo model {args.solo_model!r}"
    )
    fake, provider = start_provider(args.latency)
    work = Path(tempfile.mkdtemp(prefix="bench-serve-"))
    teams = write_teams(work, provider, args.solo_model)
    (work / "bare.py").write_text(BARE, encoding="utf-8")
    most = max(args.clients + args.cprofile)
    servers: list[tuple[Served, int]] = []
    bare: Bare | None = None
    try:
        if args.cprofile:
            cprofile(args, REPO, teams["solo"])
            args.workers, args.baseline_ref, args.no_refused, args.clients = [], "", True, []
        served_teams = [teams[t] for t in args.teams]
        for workers in args.workers:
            servers.append((Served(f"this, {workers} proc", REPO, served_teams, workers=workers, slots=most), workers))
        if args.baseline_ref:
            root = unpack(args.baseline_ref, work / "baseline")
            servers.append((Served(f"{args.baseline_ref[:8]}, 1", root, served_teams, workers=1, slots=most), 1))
        for server, workers in servers:
            for team in args.teams:
                server.wait_ready(team, workers)
        if servers:
            bare = Bare(work / "bare.py", provider, args.solo_model)
            if args.profile:
                profile(args, servers[0][0], args.profile)
            per_call(args, servers, bare, provider)
    finally:
        for server, _ in servers:
            server.stop()
        if bare is not None:
            bare.stop()
    try:
        if not args.no_refused:
            refusals(args, REPO, teams)
    finally:
        fake.kill()
        fake.wait()
        shutil.rmtree(work, ignore_errors=True)
    if dropped:
        print(f"\n{len(dropped)} requests met a dropped connection and were sent again")
    print(f"\nload average at the end {os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
