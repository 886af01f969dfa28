"""benchmarks/bench_memory.py keeps running: tiny sizes, in process, SQLite only."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_memory.py"


def test_the_memory_benchmark_runs_and_prints_each_figure(capsys: pytest.CaptureFixture[str]) -> None:
    spec = importlib.util.spec_from_file_location("bench_memory", BENCH)
    assert spec is not None and spec.loader is not None
    bench = importlib.util.module_from_spec(spec)
    sys.modules["bench_memory"] = bench
    try:
        spec.loader.exec_module(bench)
        argv = ["--resources", "2", "--facts", "20", "--threads", "4", "--questions", "8"]
        assert bench.main([*argv, "--latency-sizes", "300", "--searches", "5", "--no-postgres"]) == 0
    finally:
        sys.modules.pop("bench_memory", None)
    out = capsys.readouterr().out
    for line in ("recall@5 hybrid", "recall@5 vector", "recall@5 keyword", "full-history replay"):
        assert line in out
    assert "SQLite recall latency at     300 memories: p50" in out
    assert "SQLite p95 at 10,000 memories: not measured" in out and "PostgreSQL: not measured (--no-postgres)" in out
    hybrid = float(out.split("recall@5 hybrid")[1].split()[0])
    assert hybrid >= 0.9  # the tiny corpus too: a ranking or scoping bug shows here


def test_the_corpus_asks_only_for_facts_told_in_an_earlier_thread() -> None:
    spec = importlib.util.spec_from_file_location("bench_memory_corpus", BENCH)
    assert spec is not None and spec.loader is not None
    bench = importlib.util.module_from_spec(spec)
    sys.modules["bench_memory_corpus"] = bench
    try:
        spec.loader.exec_module(bench)
        corpus = bench.generate(3, 40, 5, 30)
    finally:
        sys.modules.pop("bench_memory_corpus", None)
    assert len(corpus.facts) == 120 and len(corpus.questions) == 30
    assert all(thread > fact.thread for fact, thread, _q in corpus.questions)
    assert all(fact.text not in question for fact, _t, question in corpus.questions)
