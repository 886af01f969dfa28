"""`teamrun batch` end to end: 200 rows offline, resume from a partial output and from a killed process."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from teamrun.cli import main
from teamrun.evals.ratelimit import RateLimiter
from tests.cli_processes import stop_when
from tests.fakeserver import FakeOpenAI, Reply, malformed_body

REPO = Path(__file__).resolve().parents[2]
TEAM = str(REPO / "teams" / "research-report.yaml")
SUBJECTS = ["Rust", "Go", "Zig", "Python", "OCaml", "Elixir", "Kotlin", "Swift"]


def _inputs(tmp_path: Path, count: int) -> Path:
    path = tmp_path / "inputs.jsonl"
    rows = [
        {"id": f"r{i:03d}", "input": f"Compare {SUBJECTS[i % 8]} and {SUBJECTS[(i + 3) % 8]} ({i})"}
        for i in range(count)
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def _reference(tmp_path: Path, inputs: Path) -> bytes:
    out = tmp_path / "reference.jsonl"
    assert main(["batch", TEAM, str(inputs), "-o", str(out), "--workers", "8", "--progress", "none"]) == 0
    return out.read_bytes()


def test_a_200_row_batch_on_the_offline_model(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    inputs = _inputs(tmp_path, 200)
    out = tmp_path / "results.jsonl"

    assert main(["batch", TEAM, str(inputs), "-o", str(out), "--workers", "8"]) == 0

    rows = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert [r["id"] for r in rows] == [f"r{i:03d}" for i in range(200)]  # input order, whatever finished first
    assert {r["status"] for r in rows} == {"done"}
    assert rows[7]["final_text"].startswith("[offline simulation] Task: Compare Swift and Zig (7)")
    err = capsys.readouterr().err
    assert "batch: 200/200 rows done, 0 failed" in err and "200 row(s) run, 0 already in" in err
    # the same inputs give the same bytes, with other concurrency
    assert _reference(tmp_path, inputs) == out.read_bytes()


def test_a_rerun_completes_only_the_rows_missing_from_a_partial_output(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    inputs = _inputs(tmp_path, 60)
    reference = _reference(tmp_path, inputs)
    lines = reference.decode().splitlines(keepends=True)
    partial = [json.loads(line) for line in lines[:20]]
    for row in partial:
        row["final_text"] = "kept from the first run"
    out = tmp_path / "results.jsonl"
    cut = lines[20][: len(lines[20]) // 2]  # killed while writing a line
    out.write_text("".join(json.dumps(r, sort_keys=True) + "\n" for r in partial) + cut, encoding="utf-8")
    capsys.readouterr()

    assert main(["batch", TEAM, str(inputs), "-o", str(out), "--progress", "none"]) == 0

    rows = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert [r["id"] for r in rows] == [f"r{i:03d}" for i in range(60)]
    assert all(r["final_text"] == "kept from the first run" for r in rows[:20])  # not run again
    assert out.read_text().splitlines()[20:] == reference.decode().splitlines()[20:]
    assert "40 row(s) run, 20 already in" in capsys.readouterr().err


def test_a_killed_batch_rerun_completes_only_the_missing_rows(tmp_path: Path) -> None:
    inputs = _inputs(tmp_path, 12)
    reference = _reference(tmp_path, inputs)
    out = tmp_path / "results.jsonl"
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(REPO / "runner"), str(REPO)]),
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
    }
    # 6 model requests per row: --rpm 24 lets 4 rows through, then the batch waits a minute for the window
    command = [
        sys.executable,
        "-m",
        "teamrun.cli",
        "batch",
        TEAM,
        str(inputs),
        "-o",
        str(out),
        "--workers",
        "1",
        "--rpm",
        "24",
        "--progress",
        "none",
    ]

    def rows() -> int:
        return len(out.read_text().splitlines()) if out.exists() else 0

    code = stop_when(command, lambda: rows() >= 4, where=lambda: f"{rows()} rows written", env=env)
    assert code != 0  # killed mid-batch
    first = out.read_text().splitlines()
    assert len(first) == 4

    done = subprocess.run([*command[:-4], "--progress", "none"], env=env, capture_output=True, text=True, timeout=300)

    assert done.returncode == 0, done.stderr
    assert "8 row(s) run, 4 already in" in done.stderr
    assert out.read_bytes() == reference


def test_failing_rows_are_recorded_and_the_batch_goes_on(tmp_path: Path) -> None:
    inputs = _inputs(tmp_path, 5)
    out = tmp_path / "results.jsonl"

    assert main(["batch", TEAM, str(inputs), "-o", str(out), "--row-max-tokens", "500", "--progress", "none"]) == 1

    rows = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert len(rows) == 5 and {r["status"] for r in rows} == {"budget_exhausted"}
    assert rows[0]["stopped_by"].startswith("row.max_tokens (500)")
    # --retry-failed runs them again; without the ceiling they finish
    assert main(["batch", TEAM, str(inputs), "-o", str(out), "--retry-failed", "--progress", "none"]) == 0
    assert {json.loads(line)["status"] for line in out.read_text().splitlines()} == {"done"}


def test_a_bad_inputs_row_is_reported_by_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    inputs = tmp_path / "inputs.jsonl"
    inputs.write_text('{"input": "ok"}\n{"inptu": "x"}\n[1]\n', encoding="utf-8")

    assert main(["batch", TEAM, str(inputs), "-o", str(tmp_path / "out.jsonl")]) == 2
    err = capsys.readouterr().err
    assert f"{inputs}:2:1: error: unknown key 'inptu'" in err
    assert f"{inputs}:3:1: error: a row must be a JSON object" in err
    assert not (tmp_path / "out.jsonl").exists()


def test_the_rate_limiter_holds_requests_and_tokens_to_a_sliding_minute() -> None:
    now = [0.0]
    slept: list[float] = []

    async def sleep(seconds: float) -> None:
        slept.append(seconds)
        now[0] += seconds

    async def scenario() -> list[float]:
        limiter = RateLimiter(rpm=2, tpm=100, clock=lambda: now[0], sleep=sleep)
        starts = []
        for tokens in (10, 10, 10, 95, 1):
            await limiter.acquire()
            starts.append(now[0])
            now[0] += 1
            limiter.spent(tokens)
        return starts

    starts = asyncio.run(scenario())
    # the requests window is a minute and five seconds (llm/ratelimit.py WINDOW_MARGIN_S: the provider's own
    # minute has passed by then): request 3 waits for request 1 to leave it (t=65); request 5 finds 2 requests
    # and 105 tokens in the window and starts when request 3 has left the requests window (t=130; its 10 tokens
    # left the tokens minute at t=125)
    assert starts == [0.0, 1.0, 65.0, 66.0, 130.0]


def test_the_total_budget_stops_starting_rows_and_a_rerun_continues(
    tmp_path: Path, fake_openai: FakeOpenAI, capsys: pytest.CaptureFixture[str]
) -> None:
    from tests.fakeserver import text

    fake_openai.handler("gpt-4o-mini", lambda request: text("an answer"))  # priced in LiteLLM's table
    team = tmp_path / "solo.yaml"
    team.write_text(
        f"version: 1\nname: solo\nsupervisor: solo\nagents:\n"
        f"  solo: {{model: openai/gpt-4o-mini, api_base: '{fake_openai.url}'}}\n",
        encoding="utf-8",
    )
    inputs = _inputs(tmp_path, 5)
    out = tmp_path / "results.jsonl"

    code = main(
        [
            "batch",
            str(team),
            str(inputs),
            "-o",
            str(out),
            "--workers",
            "1",
            "--max-cost",
            "0.0000001",
            "--progress",
            "none",
        ]
    )

    assert code == 3
    assert len(out.read_text().splitlines()) == 1
    assert "stopped by --max-cost (1e-07) with 4 row(s) left" in capsys.readouterr().err
    assert main(["batch", str(team), str(inputs), "-o", str(out), "--progress", "none"]) == 0
    assert [json.loads(line)["id"] for line in out.read_text().splitlines()] == [f"r{i:03d}" for i in range(5)]


def _no_usage_answer(content: str) -> Reply:
    """A chat completion that reports no usage at all."""
    body = {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 0,
        "model": "m",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
    }
    return malformed_body(json.dumps(body))


def test_rows_of_unknown_usage_are_written_and_summed_as_unknown_never_as_0(
    tmp_path: Path, fake_openai: FakeOpenAI, capsys: pytest.CaptureFixture[str]
) -> None:
    """Attack a45b 5: a row whose provider reported no usage is ``usage: null, cost: null, usage_known: false``
    (as ``execute --json`` says), the summary's cost is unknown, and --max-cost is named as a limit that cannot act."""
    fake_openai.script("m", [_no_usage_answer("four"), _no_usage_answer("five")])
    team = tmp_path / "solo.yaml"
    team.write_text(
        "version: 1\nname: solo\nsupervisor: lead\n"
        f"agents:\n  lead: {{model: openai/m, api_base: '{fake_openai.url}', num_retries: 0, instructions: Answer.}}\n",
        encoding="utf-8",
    )
    inputs = tmp_path / "inputs.jsonl"
    inputs.write_text('"a"\n"b"\n', encoding="utf-8")
    out = tmp_path / "out.jsonl"

    code = main(["batch", str(team), str(inputs), "-o", str(out), "--workers", "1", "--max-cost", "0.01"])

    assert code == 0
    rows = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert [(r["final_text"], r["usage"], r["cost"], r["usage_known"]) for r in rows] == [
        ("four", None, None, False),
        ("five", None, None, False),
    ]
    err = capsys.readouterr().err
    assert "2/2 rows done, 0 failed, cost unknown" in err and "$0.0000" not in err
    assert "cost unknown (some rows reported no usage; --max-cost (0.01) could not limit them)" in err
    assert "batch_usage_unknown" in err and "--max-cost (0.01) cannot limit rows whose usage is unknown" in err
