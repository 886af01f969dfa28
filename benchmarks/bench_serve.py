#!/usr/bin/env python
"""What `teamrun serve` adds per request, next to calling the provider directly.

    python benchmarks/bench_serve.py                       # 1, 20 and 100 concurrent clients
    python benchmarks/bench_serve.py --clients 1 50 --requests 200 --latency 0.3

The fake OpenAI-compatible provider (tests/fakeserver.py) answers every
request after ``--latency`` seconds (300 ms by default). A one-agent team on
that provider is served by `teamrun serve` in a subprocess. For each number
of concurrent clients, the same number of chat completions is sent (with
httpx) once straight to the provider and once through teamrun's
OpenAI-compatible endpoint; the script prints requests/s and the mean and
p95 latency of each, and the latency teamrun adds. Reports figures; asserts nothing.
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
from pathlib import Path

import httpx

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
for _name in ("NO_PROXY", "no_proxy"):  # loopback traffic never goes through a proxy
    os.environ[_name] = ",".join(filter(None, [os.environ.get(_name), "127.0.0.1", "localhost"]))

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))

import fakeserver  # noqa: E402
from fakeserver import FakeOpenAI, text  # noqa: E402

fakeserver._Server.request_queue_size = 512  # socketserver's default backlog (5) resets bursts of connections

BODY = {"model": "solo", "messages": [{"role": "user", "content": "Say hello."}]}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


async def measure(url: str, body: dict[str, object], clients: int, requests: int,
                  headers: dict[str, str]) -> tuple[float, list[float]]:
    """(requests/s, latencies) of ``requests`` POSTs from ``clients`` concurrent workers."""
    latencies: list[float] = []
    todo = iter(range(requests))
    limits = httpx.Limits(max_connections=clients, max_keepalive_connections=0)  # the fake closes connections
    async with httpx.AsyncClient(timeout=120, limits=limits, headers=headers) as client:
        async def worker() -> None:
            for _ in todo:
                started = time.perf_counter()
                response = await client.post(url, json=body)
                response.raise_for_status()
                latencies.append(time.perf_counter() - started)

        started = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(clients)))
        wall = time.perf_counter() - started
    return requests / wall, latencies


def p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--clients", type=int, nargs="+", default=[1, 20, 100])
    parser.add_argument("--requests", type=int, default=0, help="requests per point (default: 5 per client, >= 20)")
    parser.add_argument("--latency", type=float, default=0.3, help="the provider's answer time, seconds")
    args = parser.parse_args()

    fake = FakeOpenAI(latency=args.latency).start()
    fake.handler("*", lambda request: text("Hello from the fake provider."))
    os.environ["OPENAI_API_KEY"] = "sk-fake-bench-key-0123456789"
    work = Path(tempfile.mkdtemp(prefix="bench-serve-"))
    team = work / "solo.yaml"
    team.write_text(f"version: 1\nname: solo\nsupervisor: lead\ndefaults:\n  model: openai/solo\n"
                    f"  api_base: {fake.url}\nagents:\n  lead:\n    description: Answers.\n", encoding="utf-8")
    port = free_port()
    most = max(args.clients)
    env = {**os.environ, "PYTHONPATH": str(REPO / "runner")}
    server = subprocess.Popen([sys.executable, "-m", "teamrun.cli", "-q", "serve", str(team), "--port", str(port),
                               "--max-concurrent-runs", str(most)], env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    served = f"http://127.0.0.1:{port}/v1/chat/completions"
    direct = f"{fake.url}/chat/completions"
    try:
        while True:
            if server.poll() is not None:
                raise SystemExit("teamrun serve did not start")
            try:
                httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=5)
                break
            except httpx.TransportError:
                time.sleep(0.05)
        asyncio.run(measure(served, BODY, 1, 3, {}))  # warm up (LiteLLM's import, connections)
        print(f"provider latency {args.latency * 1000:.0f} ms; teamrun serve pid {server.pid}")
        print(f"{'clients':>7} {'requests':>8} | {'direct req/s':>12} {'mean ms':>8} {'p95 ms':>7} | "
              f"{'served req/s':>12} {'mean ms':>8} {'p95 ms':>7} | {'added ms':>8}")
        for clients in args.clients:
            count = args.requests or max(20, 5 * clients)
            rate_d, lat_d = asyncio.run(measure(direct, BODY, clients, count,
                                                {"Authorization": "Bearer " + os.environ["OPENAI_API_KEY"]}))
            rate_s, lat_s = asyncio.run(measure(served, BODY, clients, count, {}))
            added = (statistics.mean(lat_s) - statistics.mean(lat_d)) * 1000
            print(f"{clients:>7} {count:>8} | {rate_d:>12.1f} {statistics.mean(lat_d) * 1000:>8.0f} "
                  f"{p95(lat_d) * 1000:>7.0f} | {rate_s:>12.1f} {statistics.mean(lat_s) * 1000:>8.0f} "
                  f"{p95(lat_s) * 1000:>7.0f} | {added:>8.1f}")
    finally:
        server.terminate()
        server.wait(timeout=60)
        fake.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
