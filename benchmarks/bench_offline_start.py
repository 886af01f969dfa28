#!/usr/bin/env python
"""How long the README's first command takes, offline, from start to exit.

    python benchmarks/bench_offline_start.py                      # this tree next to 4fb950b
    python benchmarks/bench_offline_start.py --baseline-ref HEAD~3 --repeat 9

It times, as fresh subprocesses (median of ``--repeat`` runs, wall clock):

* ``python -c pass`` — the interpreter alone, the floor;
* ``python -c "import litellm"`` — what an offline run would pay if it imported LiteLLM;
* ``teamrun execute teams/research-report.yaml --input ...`` with this tree's code;
* the same command with the code (and team files) of ``--baseline-ref``, unpacked
  with ``git archive REF runner teams schemas`` into a temporary folder — by default the
  commit before the offline model stopped being a LiteLLM provider.

The offline model needs no LiteLLM, so the run should cost a small multiple of
``python -c pass``, not the seconds LiteLLM's import takes. Prints ratios; asserts nothing.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DEFAULT_BASELINE = "4fb950b"
TASK = "Compare Rust and Go for command-line tools"


def timed(argv: list[str], *, repeat: int, env: dict[str, str], cwd: Path) -> float:
    """Median wall seconds of ``argv`` (one untimed warm-up run first, for the file cache)."""
    times: list[float] = []
    for index in range(repeat + 1):
        started = time.perf_counter()
        done = subprocess.run(argv, env=env, cwd=cwd, capture_output=True, text=True, timeout=300)
        elapsed = time.perf_counter() - started
        if done.returncode != 0:
            raise SystemExit(f"{' '.join(argv)} exited {done.returncode}:\n{done.stderr[-2000:]}")
        if index:
            times.append(elapsed)
    return statistics.median(times)


def execute_argv(root: Path) -> list[str]:
    team = root / "teams" / "research-report.yaml"
    return [sys.executable, "-m", "teamrun.cli", "execute", str(team), "--input", TASK, "--progress", "none"]


def unpack(ref: str, into: Path) -> Path:
    """``runner/``, ``teams/`` and ``schemas/`` of ``ref``, extracted under ``into``."""
    archive = subprocess.run(
        ["git", "archive", ref, "runner", "teams", "schemas"], cwd=REPO, capture_output=True, check=False
    )
    if archive.returncode != 0:
        raise SystemExit(f"git archive {ref} failed: {archive.stderr.decode(errors='replace').strip()}")
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive.stdout, check=True)
    return into


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3, help="timed runs per command (median shown)")
    parser.add_argument(
        "--baseline-ref",
        default=DEFAULT_BASELINE,
        help=f"git commit to compare with (default {DEFAULT_BASELINE}); '' to skip",
    )
    args = parser.parse_args()

    base_env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    base_env.pop("PYTHONPATH", None)
    here_env = {**base_env, "PYTHONPATH": str(REPO / "runner")}
    rows: list[tuple[str, float]] = []
    rows.append(("python -c pass", timed([sys.executable, "-c", "pass"], repeat=args.repeat, env=base_env, cwd=REPO)))
    rows.append(
        (
            "python -c 'import litellm'",
            timed([sys.executable, "-c", "import litellm"], repeat=args.repeat, env=base_env, cwd=REPO),
        )
    )
    rows.append(("teamrun execute (this tree)", timed(execute_argv(REPO), repeat=args.repeat, env=here_env, cwd=REPO)))
    if args.baseline_ref:
        with tempfile.TemporaryDirectory(prefix="teamrun-baseline-") as tmp:
            root = unpack(args.baseline_ref, Path(tmp))
            env = {**base_env, "PYTHONPATH": str(root / "runner")}
            rows.append(
                (
                    f"teamrun execute ({args.baseline_ref})",
                    timed(execute_argv(root), repeat=args.repeat, env=env, cwd=root),
                )
            )

    floor = rows[0][1]
    now = rows[2][1]
    print(
        f"`teamrun execute teams/research-report.yaml --input {TASK!r}` (offline), "
        f"median of {args.repeat} runs, wall time\n"
    )
    print(f"{'command':<34} {'seconds':>8} {'x python -c pass':>17} {'x this tree':>12}")
    for label, seconds in rows:
        print(f"{label:<34} {seconds:8.3f} {seconds / floor:17.1f} {seconds / now:12.2f}")
    if args.baseline_ref:
        print(f"\nthis tree is {rows[3][1] / now:.1f}x faster than {args.baseline_ref} on this command")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
