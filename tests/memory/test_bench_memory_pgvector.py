"""benchmarks/bench_memory.py --pgvector keeps running: tiny sizes, on the tests' pgvector server, each size ranked
in SQL and then in process on the same database."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_memory.py"


def test_the_memory_benchmark_measures_pgvector_against_in_process_scoring(
    pgvector_server: str, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = importlib.util.spec_from_file_location("bench_memory_pgvector", BENCH)
    assert spec is not None and spec.loader is not None
    bench = importlib.util.module_from_spec(spec)
    sys.modules["bench_memory_pgvector"] = bench
    try:
        spec.loader.exec_module(bench)
        argv = ["--resources", "2", "--facts", "20", "--threads", "4", "--questions", "8", "--searches", "3"]
        assert bench.main([*argv, "--latency-sizes", "300", "--postgres", pgvector_server, "--pgvector"]) == 0
    finally:
        sys.modules.pop("bench_memory_pgvector", None)
    out = capsys.readouterr().out
    assert "PostgreSQL vectors scored by: pgvector" in out
    assert "PostgreSQL pgvector recall latency at     300 memories: p50" in out
    assert "PostgreSQL numpy recall latency at     300 memories: p50" in out
