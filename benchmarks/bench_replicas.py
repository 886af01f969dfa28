#!/usr/bin/env python
"""Replicas (`teamrun serve --lease`) next to one server, on PostgreSQL: server CPU per served call (issue 46).

    python benchmarks/bench_replicas.py                          # 20 and 100 clients, 2 replicas, 2 rounds
    python benchmarks/bench_replicas.py --clients 20 --rounds 3 --postgres postgresql+psycopg://u@host/db

In one run, every party in its own process on loopback:

* the fake OpenAI-compatible provider of ``bench_serve.py`` (``--latency``, 100 ms by default), shared;
* a throwaway PostgreSQL server (``tests/pgserver.py``, as the store tests start it; or ``--postgres URL``, a
  server this may create databases on), one fresh database for each set-up;
* **one server**: ``teamrun serve --store <postgres>`` of the ``solo`` team (one model call per request);
* **replicas**: ``--replicas`` (2) ``teamrun serve --store <another postgres database> --lease S``, behind
  HAProxy (Debian's package, started as the replica tests start it: ``tests/replicas/cluster.py``,
  round-robin, no stickiness);
* this script, the clients of ``bench_serve.py`` (aiohttp, keep-alive, N concurrent, plain requests).

The two set-ups get the same load, interleaved (their order swaps every round): two batches per point (2 and 6
requests per client, at least 20 and 60). CPU is the user + system time of the servers' processes (every
replica's, from /proc; HAProxy's and PostgreSQL's are printed apart), per served call: the large batch's over
its calls, and the slope of the two batches (what a batch costs once cancels). The headline is the ratio
replicas / one server (issue 46's target: at most 1.15x, the coordination's cost). PostgreSQL's figure counts
its living processes only (a backend that ended took its CPU with it). Reports figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "benchmarks")]  # tests.* (PostgreSQL, HAProxy) and bench_serve

from bench_serve import Batch, Served, chat_batch, sizes, slope_ms, start_provider, tree_cpu_s, tree_pids, write_teams  # noqa: E402

SETUPS = ("one server", "one replica", "replicas")
"""``teamrun serve --store``; the same with ``--lease`` alone (the lease's own cost); ``--replicas`` behind HAProxy."""


@dataclass
class Point:
    """The figures of one set-up at one client count, a list per measure (one entry per round)."""

    per_call_ms: list[float] = field(default_factory=list)
    slope_ms: list[float] = field(default_factory=list)
    rate: list[float] = field(default_factory=list)
    balancer_ms: list[float] = field(default_factory=list)
    postgres_ms: list[float] = field(default_factory=list)


@contextlib.contextmanager
def postgres(url: str) -> Iterator[tuple[str, int | None]]:
    """A PostgreSQL server's SQLAlchemy URL and its postmaster's pid (``None`` for ``url``, a server elsewhere)."""
    if url:
        yield url, None
        return
    from tests.pgserver import PostgresServer

    server = PostgresServer().start()
    try:
        pid = int((server.data / "postmaster.pid").read_text().split()[0])
        yield server.url, pid
    finally:
        server.stop()


def haproxy_pid() -> int | None:
    """The HAProxy this process started (its CPU is the balancer's)."""
    for pid in tree_pids(os.getpid()):
        try:
            program = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0]
        except OSError:
            continue
        if program.endswith(b"haproxy"):
            return pid
    return None


def measure(
    base: str, pids: list[int], others: Sequence[int | None], clients: int, small: int, large: int
) -> tuple[Batch, Batch, list[float]]:
    """The two batches of a point, and the CPU seconds the processes ``others`` spent meanwhile."""
    before = [tree_cpu_s(pid) if pid else 0.0 for pid in others]
    a = asyncio.run(chat_batch(base, pids, "solo", False, clients, small))
    b = asyncio.run(chat_batch(base, pids, "solo", False, clients, large))
    after = [tree_cpu_s(pid) if pid else 0.0 for pid in others]
    return a, b, [y - x for x, y in zip(before, after, strict=True)]


def uptime() -> str:
    done = subprocess.run(["uptime"], capture_output=True, text=True, check=False)
    return done.stdout.strip() or f"load average {os.getloadavg()}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--clients", type=int, nargs="+", default=[20, 100])
    parser.add_argument("--replicas", type=int, default=2)
    parser.add_argument("--lease", type=float, default=15.0, help="the replicas' --lease, seconds")
    parser.add_argument("--size", type=int, default=2, help="batches of SIZE and 3xSIZE requests per client (min 20)")
    parser.add_argument("--rounds", type=int, default=2, help="measure every point this many times (medians)")
    parser.add_argument("--latency", type=float, default=0.1, help="the provider's answer time, seconds")
    parser.add_argument("--idle", type=float, default=10.0, help="measure idle CPU this many seconds (0: not)")
    parser.add_argument(
        "--no-one-replica", dest="one_replica", action="store_false", help="leave out one server with --lease alone"
    )
    parser.add_argument("--postgres", default="", help="a PostgreSQL server's URL (default: a throwaway one)")
    args = parser.parse_args(argv)

    from tests.pgserver import new_database
    from tests.replicas.cluster import haproxy

    print(f"uptime at the start: {uptime()}")
    print(
        f"{os.cpu_count()} cores; provider latency {args.latency * 1000:.0f} ms; {args.replicas} replicas, "
        f"--lease {args.lease:g}",
        flush=True,
    )
    setups = tuple(s for s in SETUPS if args.one_replica or s != "one replica")
    fake, provider = start_provider(args.latency)
    work = Path(tempfile.mkdtemp(prefix="bench-replicas-"))
    servers: list[Served] = []
    try:
        team = write_teams(work, provider, "solo")["solo"]
        slots = max(args.clients)
        with postgres(args.postgres) as (server_url, postmaster):
            one = Served(
                "one server", REPO, [team], workers=1, slots=slots, extra=["--store", new_database(server_url)]
            )
            servers.append(one)
            bases = {"one server": (one.base, [one.process.pid])}
            if "one replica" in setups:
                lease = ["--store", new_database(server_url), "--lease", f"{args.lease:g}"]
                alone = Served("one replica", REPO, [team], workers=1, slots=slots, extra=lease)
                servers.append(alone)
                bases["one replica"] = (alone.base, [alone.process.pid])
            lease = ["--store", new_database(server_url), "--lease", f"{args.lease:g}"]
            replicas = [
                Served(f"replica {i}", REPO, [team], workers=1, slots=slots, extra=lease) for i in range(args.replicas)
            ]
            servers += replicas
            for server in servers:
                server.wait_ready("solo", 1)
            with haproxy(work, [r.base for r in replicas]) as balancer:
                balancer_pid = haproxy_pid()
                bases["replicas"] = (balancer, [r.process.pid for r in replicas])
                idle = {setup: idle_ms(pids, args.idle) for setup, (_, pids) in bases.items()}
                points: dict[tuple[int, str], Point] = {}
                for clients in args.clients:
                    small, large = sizes(clients, args.size)
                    for round_ in range(args.rounds):
                        order = setups[round_ % len(setups) :] + setups[: round_ % len(setups)]
                        for setup in order:
                            base, pids = bases[setup]
                            others = [balancer_pid if setup == "replicas" else None, postmaster]
                            a, b, spent = measure(base, pids, others, clients, small, large)
                            point = points.setdefault((clients, setup), Point())
                            point.per_call_ms.append(b.cpu_s * 1000 / b.count)
                            point.slope_ms.append(slope_ms(a, b, 1))
                            point.rate.append(b.rate)
                            point.balancer_ms.append(spent[0] * 1000 / (a.count + b.count))
                            point.postgres_ms.append(spent[1] * 1000 / (a.count + b.count))
                report(args, points, idle)
    finally:
        for server in servers:
            server.stop()
        fake.kill()
        fake.wait()
        shutil.rmtree(work, ignore_errors=True)
    print(f"\nuptime at the end: {uptime()}")
    return 0


def idle_ms(pids: list[int], seconds: float) -> float:
    """CPU milliseconds per second the processes ``pids`` spend with no request (heartbeats, timers)."""
    if seconds <= 0:
        return float("nan")
    before = sum(tree_cpu_s(pid) for pid in pids)
    time.sleep(seconds)  # a measuring window, not a wait for something to happen
    return (sum(tree_cpu_s(pid) for pid in pids) - before) * 1000 / seconds


def report(args: argparse.Namespace, points: dict[tuple[int, str], Point], idle: dict[str, float]) -> None:
    print(
        f"\n== server CPU per served call (solo team: one model call a request; medians of {args.rounds} round(s)) =="
    )
    print(
        f"{'clients':>7} {'set-up':<11} | {'ms/call':>7} {'ratio':>6} | {'slope ms':>8} {'ratio':>6} | "
        f"{'req/s':>6} | {'haproxy ms':>10} {'postgres ms':>11}"
    )
    for clients in args.clients:
        one = points[(clients, "one server")]
        for setup in SETUPS:
            p = points[(clients, setup)]
            per_call, slope = statistics.median(p.per_call_ms), statistics.median(p.slope_ms)
            ratio = per_call / statistics.median(one.per_call_ms)
            slope_ratio = slope / statistics.median(one.slope_ms)
            label = f"{args.replicas} replicas" if setup == "replicas" else setup
            if (clients, setup) not in points:
                continue
            balancer = f"{statistics.median(p.balancer_ms):>10.2f}" if setup == "replicas" else f"{'':>10}"
            print(
                f"{clients:>7} {label:<11} | {per_call:>7.2f} {ratio:>5.2f}x | {slope:>8.2f} {slope_ratio:>5.2f}x | "
                f"{statistics.median(p.rate):>6.1f} | {balancer} {statistics.median(p.postgres_ms):>11.2f}",
                flush=True,
            )
    print("ratio: to one server (issue 46's target for the replicas: <= 1.15x); haproxy and postgres: not in ms/call")
    if args.idle > 0:
        print(f"idle (no requests, {args.idle:g} s): " + ", ".join(f"{k} {v:.2f} ms CPU/s" for k, v in idle.items()))


if __name__ == "__main__":
    sys.exit(main())
