#!/usr/bin/env python
"""What a command tool that prints a lot costs teamrun in memory.

    python benchmarks/bench_command_output.py               # 10, 100 and 500 MiB of output
    python benchmarks/bench_command_output.py --mib 50 2000

For each size, a fresh Python process builds a command tool (``max_output_chars``
left at its default, 20,000) whose program writes that many MiB of text to
stdout, calls it once through ``invoke_tool``, and reports how much its peak
resident memory (``ru_maxrss``) grew during the call, next to the output size.
The model sees 20,000 characters and the truncation marker either way; what
grows with the output should be time, not memory. Reports figures; asserts
nothing (tests/tools/test_command_tool.py holds the memory bound).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

RUNNER = Path(__file__).resolve().parents[1] / "runner"

ONE_RUN = textwrap.dedent("""\
    import asyncio, json, resource, sys, time
    from pathlib import Path
    from teamrun.config.models import ToolDef
    from teamrun.tools import build_tools, invoke_tool

    mib = int(sys.argv[1])
    flood = f"import sys; b = b'x' * (1 << 20); [sys.stdout.buffer.write(b) for _ in range({mib})]"

    class Allow:
        async def approve(self, tool, arguments):
            return True

    async def main():
        tools = build_tools({"warm": ToolDef(command=[sys.executable, "-c", "print(1)"]),
                             "flood": ToolDef(command=[sys.executable, "-c", flood])}, base_dir=Path.cwd())
        await invoke_tool(tools["warm"], "{}", approver=Allow())
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        started = time.perf_counter()
        outcome = await invoke_tool(tools["flood"], "{}", approver=Allow())
        took = time.perf_counter() - started
        grew = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
        print(json.dumps({"grew_kib": grew, "seconds": took, "chars_seen": len(outcome.content)}))

    asyncio.run(main())
    """)


def measure(mib: int) -> dict[str, float]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(RUNNER), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run(
        [sys.executable, "-c", ONE_RUN, str(mib)], capture_output=True, text=True, check=True, env=env
    )
    result: dict[str, float] = json.loads(done.stdout.splitlines()[-1])
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mib", type=int, nargs="+", default=[10, 100, 500], help="output sizes in MiB")
    args = parser.parse_args(argv)
    print(f"{'output':>10}  {'peak RSS growth':>16}  {'growth / output':>15}  {'throughput':>12}  model sees")
    for mib in args.mib:
        r = measure(mib)
        grew_mib = r["grew_kib"] / 1024
        print(
            f"{mib:>6} MiB  {grew_mib:>12.1f} MiB  {grew_mib / mib:>15.4f}  {mib / r['seconds']:>8.0f} MiB/s"
            f"  {int(r['chars_seen'])} chars"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
