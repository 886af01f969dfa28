"""The Python API in one page: load a team, run it, inspect the result.

Runs on the built-in offline model (no key, no network):

    python examples/api_basic.py
    python examples/api_basic.py "Compare SQLite and DuckDB for analytics"

Drop ``model="offline"`` (or pass e.g. ``model="openai/gpt-4o-mini"``) to use
the models the team file names.
"""

from __future__ import annotations

import asyncio
import logging
import sys
from collections import Counter
from pathlib import Path

import structlog

import teamrun
from teamrun.events import Event

TEAM_FILE = Path(__file__).resolve().parent.parent / "teams" / "research-report.yaml"


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    task = args[0] if args else "Compare Rust and Go for command-line tools"
    # teamrun logs through structlog. The CLI configures it; in your own program
    # you do (unconfigured structlog prints every level, debug included, to stdout).
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))

    # 1. Load: the file is validated first; every problem comes at once.
    try:
        team = teamrun.load_team(TEAM_FILE, model="offline", vars={})
    except teamrun.ConfigError as exc:
        print(exc, file=sys.stderr)  # `file:line:col: error: message` lines
        return 2

    # 2. Run. run_sync() for scripts; `await team.run(...)` inside async code.
    #    Subscribers receive every event (agent/llm/tool/delegation start and end...).
    seen: Counter[str] = Counter()

    def count(event: Event) -> None:
        seen[event.kind] += 1

    result = asyncio.run(team.run(task, subscribers=[count]))

    # 3. Inspect. A result always comes back, even when the run failed or ran
    #    out of budget: check `status` (done | failed | budget_exhausted | cancelled).
    print(f"status:   {result.status}" + (f" (stopped by {result.stopped_by})" if result.stopped_by else ""))
    print(f"usage:    {result.usage.total_tokens} tokens in {result.usage.requests} model calls, ${result.cost:.4f}")
    print(f"events:   {dict(sorted(seen.items()))}")
    for name, spend in result.agents.items():
        print(
            f"agent:    {name}: {spend.invocations} run(s), {spend.tool_calls} tool call(s), "
            f"{spend.usage.total_tokens} tokens"
        )
    for delegation in result.delegations:  # in the order they finished
        print(f"delegated: {' > '.join(delegation.agent_path)} [{delegation.status}] ref={delegation.ref}")
    for warning in result.warnings:
        print(f"warning:  {warning}")
    print()
    print(result.final_text)

    # The whole result as plain data (what `teamrun execute --json` prints).
    assert result.as_dict()["status"] == result.status
    return 0 if result.status == "done" else 1


if __name__ == "__main__":
    raise SystemExit(main())
