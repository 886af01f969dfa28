#!/usr/bin/env python
"""Rows per second of `teamrun batch` on the local engine and on Ray, next to the ideal.

    python benchmarks/bench_batch.py                        # 1, 2, 4, 8 workers, 24 rows a point, 300 ms
    python benchmarks/bench_batch.py --rows 64 --workers 1 8 16 --rpm 600
    python benchmarks/bench_batch.py --engines local        # no Ray

The fake OpenAI-compatible provider (tests/fakeserver.py, in a subprocess)
answers every request after ``--latency`` seconds. A one-agent team on that provider makes
one model call per row, so ``w`` workers can at best finish ``w / latency``
rows a second: the ideal is linear in the workers up to the rate limit (with
``--rpm``, the exact best schedule under the limiter's sliding one-minute
window). Each point runs ``--rows`` rows through :func:`teamrun.evals.batch.run_batch`
after a warm-up batch (LiteLLM's import and first connections, Ray's actors
starting: that start-up is reported apart, in seconds). Ray runs on this
machine (``ray.init``, all its CPUs unless ``--ray-cpus``), with one runner
actor per CPU at most. Reports figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import heapq
import logging
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
for _name in ("NO_PROXY", "no_proxy"):  # loopback traffic never goes through a proxy
    os.environ[_name] = ",".join(filter(None, [os.environ.get(_name), "127.0.0.1", "localhost"]))
os.environ["OPENAI_API_KEY"] = "sk-fake-bench-key-0123456789"

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO / "runner"), str(REPO / "tests")]
# Ray's workers inherit this environment: they find the same teamrun
os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO / "runner"), os.environ.get("PYTHONPATH")]))

from teamrun.config.loader import LoadedConfig, load_config  # noqa: E402
from teamrun.evals.batch import InputRow, run_batch  # noqa: E402
from teamrun.evals.engines import Engine  # noqa: E402


def serve(latency: float) -> None:
    """The fake provider (``--serve``), in its own process so its CPU is not the batch's."""
    import fakeserver
    from fakeserver import FakeOpenAI, text

    fakeserver._Server.request_queue_size = 512  # socketserver's default backlog (5) resets bursts
    fakeserver._RequestHandler.disable_nagle_algorithm = True  # else each answer waits ~40 ms for an ACK
    server = FakeOpenAI(latency=latency)
    server.handler("*", lambda request: text("A short summary."))
    server.start()
    print(server.port, flush=True)
    sys.stdin.read()  # until the parent closes our stdin
    server.stop()


class Provider:
    def __init__(self, latency: float) -> None:
        self.process = subprocess.Popen(
            [sys.executable, __file__, "--serve", "--latency", str(latency)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.process.stdout is not None
        port = self.process.stdout.readline().strip()
        if not port.isdigit():
            self.close()
            raise SystemExit(f"the fake provider did not start (said {port!r})")
        self.url = f"http://127.0.0.1:{port}/v1"

    def close(self) -> None:
        if self.process.stdin is not None:
            self.process.stdin.close()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()


def ideal_rate(rows: int, workers: int, latency: float, rpm: int | None) -> float:
    """Rows/s of the best schedule: ``workers`` calls at once, each ``latency`` long, under the rpm window."""
    free = [0.0] * workers
    starts: list[float] = []
    end = 0.0
    for k in range(rows):
        start = heapq.heappop(free)
        if rpm is not None and k >= rpm:
            start = max(start, starts[k - rpm] + 60.0)
        starts.append(start)
        heapq.heappush(free, start + latency)
        end = max(end, start + latency)
    return rows / end


def make_engine(name: str, loaded: LoadedConfig, workers: int, rpm: int | None) -> Engine:
    if name == "ray":
        from teamrun.evals.engines.ray_engine import RayEngine, WorkerSpec

        return RayEngine(WorkerSpec.for_team(loaded), workers=workers, rpm=rpm)
    from teamrun.evals.engines.base import chat_model_for
    from teamrun.evals.engines.local import LocalEngine
    from teamrun.evals.ratelimit import RateLimitedModel, RateLimiter

    chat_model = chat_model_for(loaded)
    if rpm is not None:
        chat_model = RateLimitedModel(chat_model, RateLimiter(rpm=rpm))
    return LocalEngine(loaded, chat_model=chat_model)


def measure(
    engine_name: str, loaded: LoadedConfig, work: Path, rows: int, workers: int, rpm: int | None
) -> tuple[float, float]:
    """(rows/s, start-up seconds) of one point."""
    started = time.perf_counter()
    engine = make_engine(engine_name, loaded, workers, rpm)
    engine.start()
    try:
        warm = [InputRow(f"w{i}", f"Warm up {i}", {}, i) for i in range(workers)]
        scratch = work / f"warm-{engine_name}-{workers}.jsonl"
        asyncio.run(run_batch(loaded, warm, scratch, workers=workers, engine=engine))
        startup = time.perf_counter() - started
        batch = [InputRow(f"r{i}", f"Summarise item {i}", {}, i) for i in range(rows)]
        out = work / f"out-{engine_name}-{workers}.jsonl"
        began = time.perf_counter()
        outcome = asyncio.run(run_batch(loaded, batch, out, workers=workers, engine=engine))
        wall = time.perf_counter() - began
    finally:
        engine.close()
    if outcome.failed:
        failed = next(r for r in outcome.rows if r["status"] != "done")
        raise SystemExit(f"{engine_name}, {workers} workers: {outcome.failed} row(s) failed: {failed['error']}")
    return rows / wall, startup


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2, 4, 8])
    parser.add_argument("--rows", type=int, default=24, help="rows per point (default 24)")
    parser.add_argument("--latency", type=float, default=0.3, help="the provider's answer time, seconds")
    parser.add_argument("--rpm", type=int, help="--rpm for the batch (requests per minute, all workers)")
    parser.add_argument("--engines", nargs="+", choices=["local", "ray"], default=["local", "ray"])
    parser.add_argument("--ray-cpus", type=int, help="CPUs of the local Ray (default: all)")
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve(args.latency)
        return 0

    fake = Provider(args.latency)
    work = Path(tempfile.mkdtemp(prefix="bench-batch-"))
    team = work / "solo.yaml"
    team.write_text(
        f"version: 1\nname: solo\nsupervisor: lead\ndefaults:\n  model: openai/gpt-4o-mini\n"
        f"  api_base: {fake.url}\nagents:\n  lead:\n    description: Answers.\n",
        encoding="utf-8",
    )
    loaded = load_config(team)
    ray_cpus = "-"
    try:
        if "ray" in args.engines:
            import ray

            ray.init(
                num_cpus=args.ray_cpus, include_dashboard=False, log_to_driver=False, logging_level=logging.WARNING
            )
            ray_cpus = str(int(ray.cluster_resources().get("CPU", 0)))
        print(
            f"provider latency {args.latency * 1000:.0f} ms, {args.rows} rows a point, one model call a row, "
            f"--rpm {args.rpm or 'none'}; Ray CPUs {ray_cpus} (runner actors: min(workers, CPUs))"
        )
        print(f"{'engine':<6} {'workers':>7} | {'rows/s':>7} {'ideal':>7} {'ratio':>6} | {'start-up s':>10}")
        for engine_name in args.engines:
            for workers in args.workers:
                rate, startup = measure(engine_name, loaded, work, args.rows, workers, args.rpm)
                ideal = ideal_rate(args.rows, workers, args.latency, args.rpm)
                print(
                    f"{engine_name:<6} {workers:>7} | {rate:>7.2f} {ideal:>7.2f} {rate / ideal:>6.2f} | "
                    f"{startup:>10.1f}",
                    flush=True,
                )
    finally:
        if "ray" in args.engines:
            import ray

            ray.shutdown()
        fake.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
