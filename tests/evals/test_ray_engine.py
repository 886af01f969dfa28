"""`teamrun batch|eval --engine ray` on a local Ray: the same bytes as the local engine, resumable after a kill.

One Ray (2 CPUs, no dashboard) is started for the whole module, with a fake
``litellm`` first on its workers' path: a worker running the offline model must
never import LiteLLM, and if one does its rows fail and the comparisons with the
local engine break.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

from teamrun.cli import main

REPO = Path(__file__).resolve().parents[2]
TEAM = str(REPO / "teams" / "research-report.yaml")
SUBJECTS = ["Rust", "Go", "Zig", "Python", "OCaml", "Elixir", "Kotlin", "Swift"]
NO_LITELLM = Path(__file__).resolve().parent / "ray_worker_path"


@pytest.fixture(scope="module")
def ray_address() -> Iterator[str]:
    try:
        import ray
    except ImportError:
        pytest.fail("the --engine ray tests need Ray: it is in the test extra (pip install -e '.[test]')")
    saved = os.environ.get("PYTHONPATH")
    # the Ray processes inherit this environment: the workers find this tree's teamrun, and no LiteLLM
    os.environ["PYTHONPATH"] = os.pathsep.join(
        [str(NO_LITELLM), str(REPO / "runner"), str(REPO), *([saved] if saved else [])]
    )
    try:
        _start_ray(
            ray,
            num_cpus=2,
            include_dashboard=False,
            log_to_driver=False,
            logging_level=logging.WARNING,
            object_store_memory=100 * 1024 * 1024,
        )  # the smallest store Ray takes: rows are small
    finally:
        if saved is None:
            del os.environ["PYTHONPATH"]
        else:
            os.environ["PYTHONPATH"] = saved
    try:
        yield str(ray.get_runtime_context().gcs_address)
    finally:
        ray.shutdown()


RAY_START_ATTEMPTS = 3


def _start_ray(ray: Any, **options: Any) -> None:
    """``ray.init``, started again when Ray's own start-up wait runs out.

    Ray gives its raylet a fixed 30 s to register with the GCS (``raylet_start_wait_time_s`` in
    ray/_private/node.py, not configurable), which a 2-core machine busy with other work exceeds: then
    the processes that attempt started are stopped and Ray is started again. Any other failure, or
    the last attempt's, fails the tests.
    """
    me = psutil.Process()
    for attempt in range(1, RAY_START_ATTEMPTS + 1):
        before = {child.pid for child in me.children(recursive=True)}
        try:
            ray.init(**options)
            return
        except Exception as error:
            if "timed out during startup" not in str(error) or attempt == RAY_START_ATTEMPTS:
                raise
        ray.shutdown()
        started = [child for child in me.children(recursive=True) if child.pid not in before]
        for child in started:
            with contextlib.suppress(psutil.Error):
                child.kill()
        psutil.wait_procs(started, timeout=60)


@pytest.fixture(scope="module", autouse=True)
def patient_team(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """The research team with its grep tool's 10 s time-out at 600 s (a hang guard only), as ``TEAM``.

    The tests compare a batch's bytes on Ray with the local engine's: on a loaded 2-core machine a grep
    on a Ray worker once took longer than 10 s, and that row said "timed out" where the local one said
    what grep found.
    """
    text = Path(TEAM).read_text(encoding="utf-8")
    for line, patient in [
        ("    cwd: samples ", f"    cwd: {REPO / 'teams' / 'samples'} "),
        ("    timeout_s: 10\n", "    timeout_s: 600\n"),
    ]:
        assert text.count(line) == 1, line
        text = text.replace(line, patient)
    path = tmp_path_factory.mktemp("team") / "research-report.yaml"
    path.write_text(text, encoding="utf-8")
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(sys.modules[__name__], "TEAM", str(path))
        yield


def _inputs(tmp_path: Path, count: int) -> Path:
    path = tmp_path / "inputs.jsonl"
    rows = [
        {"id": f"r{i:03d}", "input": f"Compare {SUBJECTS[i % 8]} and {SUBJECTS[(i + 3) % 8]} ({i})", "vars": {"n": i}}
        for i in range(count)
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def _batch(inputs: Path, out: Path, *options: str) -> int:
    return main(["batch", TEAM, str(inputs), "-o", str(out), *options])


def test_a_200_row_batch_gives_the_same_bytes_on_ray_as_locally(
    ray_address: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    inputs = _inputs(tmp_path, 200)
    local, on_ray = tmp_path / "local.jsonl", tmp_path / "ray.jsonl"
    assert _batch(inputs, local, "--workers", "8", "--progress", "none") == 0
    capsys.readouterr()

    # limits far above what the batch uses: every model call still goes through the shared limiter actor
    code = _batch(inputs, on_ray, "--workers", "8", "--engine", "ray", "--rpm", "100000", "--tpm", "100000000")

    assert code == 0
    err = capsys.readouterr().err
    assert "batch: 1/200 rows done, 0 failed, $0.0000, ETA" in err
    assert "batch: 200/200 rows done, 0 failed" in err and "200 row(s) run, 0 already in" in err
    assert on_ray.read_bytes() == local.read_bytes()
    rows = [json.loads(line) for line in on_ray.read_text(encoding="utf-8").splitlines()]
    assert [r["id"] for r in rows] == [f"r{i:03d}" for i in range(200)]
    assert {r["status"] for r in rows} == {"done"}


def test_row_and_total_budgets_stop_a_ray_batch_as_they_stop_a_local_one(
    ray_address: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    inputs = _inputs(tmp_path, 5)
    ends = {}
    for engine in ("local", "ray"):
        (tmp_path / engine).mkdir()
        monkeypatch.chdir(tmp_path / engine)  # the summary names the output: the same relative path for both engines
        capped, stopped = Path("capped.jsonl"), Path("stopped.jsonl")
        assert _batch(inputs, capped, "--row-max-tokens", "500", "--progress", "none", "--engine", engine) == 1
        # offline runs cost $0, so a $0 total budget is spent by the first row: the others never start
        assert (
            _batch(inputs, stopped, "--max-cost", "0", "--workers", "1", "--progress", "none", "--engine", engine) == 3
        )
        summaries = [line for line in capsys.readouterr().err.splitlines() if line.startswith("batch:")]
        ends[engine] = (capped.read_bytes(), stopped.read_bytes(), "\n".join(summaries))

    assert ends["ray"] == ends["local"]
    capped_rows = [json.loads(line) for line in ends["ray"][0].decode().splitlines()]
    assert {r["status"] for r in capped_rows} == {"budget_exhausted"}
    assert capped_rows[0]["stopped_by"].startswith("row.max_tokens (500)")
    assert [json.loads(line)["id"] for line in ends["ray"][1].decode().splitlines()] == ["r000"]
    assert "stopped by --max-cost (0.0) with 4 row(s) left (rerun to continue)" in ends["ray"][2]


def test_a_killed_ray_batch_rerun_completes_only_the_missing_rows(
    ray_address: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    inputs = _inputs(tmp_path, 12)
    reference = tmp_path / "reference.jsonl"
    assert _batch(inputs, reference, "--progress", "none") == 0
    out = tmp_path / "results.jsonl"
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(REPO / "runner"), str(REPO)]),
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
    }
    command = [
        sys.executable,
        "-m",
        "teamrun.cli",
        "batch",
        TEAM,
        str(inputs),
        "-o",
        str(out),
        "--progress",
        "none",
        "--engine",
        "ray",
        "--ray-address",
        ray_address,
        "--workers",
        "2",
        "--rpm",
        "24",
    ]
    # 6 model requests per row and --rpm 24 for both workers (two runner actors) together: 24 requests pass,
    # then every worker waits a minute for the window. A limiter per worker would let about twice as many through.
    process = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 180  # a hang guard only
        while (not out.exists() or len(out.read_text().splitlines()) < 2) and time.monotonic() < deadline:
            assert process.poll() is None, process.stderr.read() if process.stderr else ""
            time.sleep(0.05)
        time.sleep(3)  # time for rows past the shared limit to show up, were there any
        assert process.poll() is None
    finally:
        process.kill()  # SIGKILL: no clean-up of any kind
        process.wait()
        if process.stderr:
            process.stderr.close()
    written = len(out.read_text().splitlines())
    # rows are appended as they finish; 24 requests finish 2 to 4 rows (two rows may be part-way through)
    assert 2 <= written <= 4

    capsys.readouterr()

    assert _batch(inputs, out, "--progress", "none", "--engine", "ray") == 0  # the rerun, on the same Ray

    assert f"{12 - written} row(s) run, {written} already in" in capsys.readouterr().err
    assert out.read_bytes() == reference.read_bytes()


def _timeless(report: dict[str, Any]) -> dict[str, Any]:
    """An eval's JSON report without its timings (duration_s, each case's latency_s)."""
    out = {k: v for k, v in report.items() if k != "duration_s"}
    out["cases"] = [{k: v for k, v in case.items() if k != "latency_s"} for case in report["cases"]]
    return out


def test_an_eval_gives_the_same_report_on_ray_offline_and_replayed(
    ray_address: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cases = tmp_path / "cases.yaml"
    cases.write_text(
        textwrap.dedent("""\
        version: 1
        defaults:
          checks:
            - regex: "(?i)offline simulation"
        cases:
          - name: rust-go
            input: Compare Rust and Go
            checks: [{contains: rust, ignore_case: true}]
          - name: wants-cobol
            input: Compare Zig and Swift
            checks: [{contains: COBOL}]
          - name: too-few-tokens
            input: Compare OCaml and Elixir
            max_tokens: 300
          - name: json-answer
            input: Compare Kotlin and Python
            checks: [{json_schema: {type: object}}]
        """),
        encoding="utf-8",
    )
    cassette = tmp_path / "eval.cassette.jsonl"
    reports = {}
    runs = {
        "local": ["--record", str(cassette)],
        "ray": ["--engine", "ray"],
        "ray-replay": ["--engine", "ray", "--replay", str(cassette)],
    }
    for name, options in runs.items():
        out = tmp_path / f"{name}.json"
        code = main(
            [
                "eval",
                TEAM,
                str(cases),
                "--format",
                "json",
                "-o",
                str(out),
                "--concurrency",
                "3",
                "--progress",
                "none",
                *options,
            ]
        )
        assert code == 1, capsys.readouterr().err  # two of the four cases fail
        reports[name] = json.loads(out.read_text(encoding="utf-8"))

    local = _timeless(reports["local"])
    assert _timeless(reports["ray"]) == local
    assert _timeless(reports["ray-replay"]) == local
    assert [(c["name"], c["passed"]) for c in local["cases"]] == [
        ("rust-go", True),
        ("wants-cobol", False),
        ("too-few-tokens", False),
        ("json-answer", False),
    ]
    assert local["cases"][2]["stopped_by"].startswith("cases[2].max_tokens (300)")
