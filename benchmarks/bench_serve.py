#!/usr/bin/env python
"""What `teamrun serve` adds per request, next to calling the provider directly.

    python benchmarks/bench_serve.py                       # 1, 20 and 100 concurrent clients
    python benchmarks/bench_serve.py --clients 1 50 --requests 200 --latency 0.3
    python benchmarks/bench_serve.py --baseline-ref 5a6bde9 --rounds 3   # ... and an older commit, interleaved
    python benchmarks/bench_serve.py --layers              # ... and the CPU of LiteLLM and Team.run alone

The fake OpenAI-compatible provider (tests/fakeserver.py) runs in a process of
its own and answers every request after ``--latency`` seconds (300 ms by
default). A one-agent team on that provider is served by `teamrun serve` in a
subprocess. For each number of concurrent clients, the same number of chat
completions is sent (with httpx) once straight to the provider and once
through teamrun's OpenAI-compatible endpoint; the script prints requests/s,
the mean and p95 latency of each, the latency teamrun adds, and the server
process's CPU time per request (read from /proc: on a shared machine this
moves far less than requests/s). With ``--baseline-ref`` the same team is also
served from that commit's code (unpacked with `git archive`), measured in
turns with this tree's; ``--rounds`` repeats every point and reports medians.
``--layers`` adds, in this process, the CPU per call of a bare
``litellm.acompletion`` loop and of ``Team.run`` at the same concurrency:
what any LiteLLM program pays, and what the engine adds, before HTTP.
Reports figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import httpx

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
for _name in ("NO_PROXY", "no_proxy"):  # loopback traffic never goes through a proxy
    os.environ[_name] = ",".join(filter(None, [os.environ.get(_name), "127.0.0.1", "localhost"]))

REPO = Path(__file__).resolve().parents[1]
BODY = {"model": "solo", "messages": [{"role": "user", "content": "Say hello."}]}
KEY = "sk-fake-bench-key-0123456789"

FAKE_PROVIDER = """
import sys, time
sys.path.insert(0, sys.argv[1])
import fakeserver
from fakeserver import FakeOpenAI, text
fakeserver._Server.request_queue_size = 512  # socketserver's default backlog (5) resets bursts of connections
fake = FakeOpenAI(latency=float(sys.argv[2])).start()
fake.handler("*", lambda request: text("Hello from the fake provider."))
print(fake.url, flush=True)
sys.stdin.read()  # until the benchmark closes our stdin
"""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def process_cpu_s(pid: int) -> float | None:
    """User + system CPU seconds of process ``pid`` so far (Linux), else ``None``."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@dataclass
class Point:
    rate: float
    latencies: list[float]
    cpu_ms: float | None = None
    """Server CPU per request (ms), when measured."""

    @property
    def mean_ms(self) -> float:
        return statistics.mean(self.latencies) * 1000

    @property
    def p95_ms(self) -> float:
        ordered = sorted(self.latencies)
        return ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))] * 1000


async def measure(url: str, body: dict[str, object], clients: int, requests: int,
                  headers: dict[str, str]) -> Point:
    """Requests/s and latencies of ``requests`` POSTs from ``clients`` concurrent workers."""
    latencies: list[float] = []
    todo = iter(range(requests))
    limits = httpx.Limits(max_connections=clients, max_keepalive_connections=0)  # the fake closes connections
    async with httpx.AsyncClient(timeout=300, limits=limits, headers=headers) as client:
        async def worker() -> None:
            for _ in todo:
                started = time.perf_counter()
                response = await client.post(url, json=body)
                response.raise_for_status()
                latencies.append(time.perf_counter() - started)

        started = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(clients)))
        wall = time.perf_counter() - started
    return Point(requests / wall, latencies)


class Served:
    """`teamrun serve` of the bench team, from the code under ``root`` (this tree or an unpacked commit)."""

    def __init__(self, label: str, root: Path, team: Path, slots: int) -> None:
        self.label = label
        self.port = free_port()
        env = {**os.environ, "PYTHONPATH": str(root / "runner"), "OPENAI_API_KEY": KEY}
        self.process = subprocess.Popen(
            [sys.executable, "-m", "teamrun.cli", "-q", "serve", str(team), "--port", str(self.port),
             "--max-concurrent-runs", str(slots)], env=env, cwd=root,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.url = f"http://127.0.0.1:{self.port}/v1/chat/completions"

    def wait_ready(self) -> None:
        while True:
            if self.process.poll() is not None:
                raise SystemExit(f"teamrun serve ({self.label}) did not start")
            try:
                httpx.get(f"http://127.0.0.1:{self.port}/readyz", timeout=5)
                break
            except httpx.TransportError:
                time.sleep(0.05)
        asyncio.run(measure(self.url, BODY, 1, 3, {}))  # warm up (LiteLLM's import, connections)

    def measure(self, clients: int, count: int) -> Point:
        before = process_cpu_s(self.process.pid)
        point = asyncio.run(measure(self.url, BODY, clients, count, {}))
        after = process_cpu_s(self.process.pid)
        if before is not None and after is not None:
            point.cpu_ms = (after - before) * 1000 / count
        return point

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=60)


def unpack(ref: str, into: Path) -> Path:
    """The ``runner/`` and ``schemas/`` of commit ``ref``, unpacked under ``into``."""
    archive = subprocess.run(["git", "-C", str(REPO), "archive", ref, "runner", "schemas"], capture_output=True)
    if archive.returncode != 0:
        raise SystemExit(f"git archive {ref} failed: {archive.stderr.decode(errors='replace').strip()}")
    into.mkdir(parents=True, exist_ok=True)
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive.stdout, check=True)
    return into


def median_point(points: list[Point]) -> Point:
    """The round with the median requests/s (its latencies), with the median CPU per request."""
    chosen = sorted(points, key=lambda p: p.rate)[len(points) // 2]
    cpus = [p.cpu_ms for p in points if p.cpu_ms is not None]
    return Point(chosen.rate, chosen.latencies, statistics.median(cpus) if cpus else None)


def layers(provider: str, clients: int, count: int) -> None:
    """CPU per call, in this process, of bare LiteLLM and of Team.run (no HTTP in front)."""
    sys.path.insert(0, str(REPO / "runner"))
    os.environ["OPENAI_API_KEY"] = KEY
    import litellm

    from teamrun.engine.team import load_team

    async def drive(call: object, n: int, width: int) -> None:
        todo = iter(range(n))

        async def worker() -> None:
            for _ in todo:
                await call()  # type: ignore[operator]

        await asyncio.gather(*(worker() for _ in range(width)))

    def cpu_per_call(call: object) -> float:
        asyncio.run(drive(call, 10, min(clients, 10)))  # warm up
        started = time.process_time()
        asyncio.run(drive(call, count, clients))
        return (time.process_time() - started) * 1000 / count

    async def bare() -> None:
        await litellm.acompletion(model="openai/solo", api_base=provider, messages=BODY["messages"])

    work = Path(tempfile.mkdtemp(prefix="bench-serve-layers-"))
    (work / "solo.yaml").write_text(team_text(provider), encoding="utf-8")
    team = load_team(work / "solo.yaml")

    async def engine() -> None:
        await team.run("Say hello.")

    print(f"\nCPU per call in one process, {clients} concurrent, {count} calls (no HTTP server in front):")
    print(f"  bare litellm.acompletion   {cpu_per_call(bare):6.2f} ms")
    print(f"  Team.run (one agent)       {cpu_per_call(engine):6.2f} ms")


def team_text(provider: str) -> str:
    return (f"version: 1\nname: solo\nsupervisor: lead\ndefaults:\n  model: openai/solo\n"
            f"  api_base: {provider}\nagents:\n  lead:\n    description: Answers.\n")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--clients", type=int, nargs="+", default=[1, 20, 100])
    parser.add_argument("--requests", type=int, default=0, help="requests per point (default: 5 per client, >= 20)")
    parser.add_argument("--latency", type=float, default=0.3, help="the provider's answer time, seconds")
    parser.add_argument("--rounds", type=int, default=1, help="measure every point this many times (medians)")
    parser.add_argument("--baseline-ref", default="", help="also serve this commit's code, measured in turns")
    parser.add_argument("--layers", action="store_true", help="also the CPU of bare LiteLLM and Team.run")
    args = parser.parse_args()

    fake = subprocess.Popen([sys.executable, "-c", FAKE_PROVIDER, str(REPO / "tests"), str(args.latency)],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert fake.stdout is not None
    provider = fake.stdout.readline().strip()
    work = Path(tempfile.mkdtemp(prefix="bench-serve-"))
    team = work / "solo.yaml"
    team.write_text(team_text(provider), encoding="utf-8")
    most = max(args.clients)
    baseline = unpack(args.baseline_ref, work / "baseline") if args.baseline_ref else None
    servers = [Served("this tree", REPO, team, most)]
    direct = f"{provider}/chat/completions"
    try:
        if baseline is not None:
            servers.append(Served(args.baseline_ref, baseline, team, most))
        for server in servers:
            server.wait_ready()
        print(f"provider latency {args.latency * 1000:.0f} ms; {args.rounds} round(s) per point; "
              f"CPU = the server process's CPU time per request")
        print(f"{'clients':>7} {'requests':>8} | {'direct req/s':>12} {'mean ms':>8} {'p95 ms':>7} | "
              f"{'served':<12} {'req/s':>7} {'mean ms':>8} {'p95 ms':>7} {'added ms':>8} {'CPU ms':>7}")
        for clients in args.clients:
            count = args.requests or max(20, 5 * clients)
            direct_points: list[Point] = []
            served_points: dict[str, list[Point]] = {s.label: [] for s in servers}
            for _ in range(args.rounds):
                direct_points.append(asyncio.run(measure(direct, BODY, clients, count,
                                                         {"Authorization": "Bearer " + KEY})))
                for server in servers:
                    served_points[server.label].append(server.measure(clients, count))
            d = median_point(direct_points)
            for index, server in enumerate(servers):
                s = median_point(served_points[server.label])
                head = (f"{clients:>7} {count:>8} | {d.rate:>12.1f} {d.mean_ms:>8.0f} {d.p95_ms:>7.0f}" if index == 0
                        else f"{'':>7} {'':>8} | {'':>12} {'':>8} {'':>7}")
                cpu = f"{s.cpu_ms:>7.2f}" if s.cpu_ms is not None else f"{'n/a':>7}"
                print(f"{head} | {server.label:<12} {s.rate:>7.1f} {s.mean_ms:>8.0f} {s.p95_ms:>7.0f} "
                      f"{s.mean_ms - d.mean_ms:>8.1f} {cpu}")
        if args.layers:
            layers(provider, max(c for c in args.clients if c <= 20) if min(args.clients) <= 20 else 20,
                   max(100, args.requests))
    finally:
        for server in servers:
            server.stop()
        fake.kill()
        fake.wait()
    return 0


if __name__ == "__main__":
    sys.exit(main())
