"""benchmarks/bench_replicas.py keeps running: tiny sizes, one round, replicas and one server only."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_replicas.py"


def test_the_replicas_benchmark_runs_and_prints_the_ratio(
    postgres_server: str, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = importlib.util.spec_from_file_location("bench_replicas", BENCH)
    assert spec is not None and spec.loader is not None
    bench = importlib.util.module_from_spec(spec)
    sys.modules["bench_replicas"] = bench
    try:
        spec.loader.exec_module(bench)
        argv = ["--clients", "2", "--rounds", "1", "--size", "1", "--idle", "0", "--no-controls"]
        assert bench.main([*argv, "--postgres", postgres_server]) == 0
    finally:
        sys.modules.pop("bench_replicas", None)
    out = capsys.readouterr().out
    rows = [line.split("|") for line in out.splitlines() if line.startswith("      2 ")]
    assert [row[0].split(maxsplit=1)[1].strip() for row in rows] == ["one server", "2 replicas"]
    assert rows[0][1].split()[1] == "1.00x"  # each ratio is to one server's figure of the same run
    assert float(rows[1][1].split()[0]) > 0 and float(rows[1][3]) > 0  # the replicas served and spent CPU
    assert "uptime at the start:" in out and "uptime at the end:" in out
