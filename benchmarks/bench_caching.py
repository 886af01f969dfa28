#!/usr/bin/env python
"""Prompt caching: the input cost of a 10-turn supervisor run with ``cache: auto`` next to ``cache: off``.

    python benchmarks/bench_caching.py                  # 10 lead turns, instructions of ~2,000 tokens
    python benchmarks/bench_caching.py --turns 20 --instructions 8000

The provider is tests/fake_anthropic.py: a local server speaking Anthropic's Messages API that caches what a
request marks with ``cache_control`` breakpoints (reads the longest marked prefix it saw before, writes the rest
up to the last mark), as Anthropic does, and reports ``cache_read_input_tokens`` /
``cache_creation_input_tokens``. teamrun reaches it through LiteLLM as ``anthropic/claude-haiku-4-5``, so the
cost is LiteLLM's price table's (input $1/M tokens, cache reads a tenth, cache writes 1.25x). The team: a lead
with long instructions and two workers; the lead delegates ``--turns - 1`` times, one worker a turn, then
answers. Both runs get the same answers. The same again with tasks: each delegation names a ``task_id``, so the
lead's task ledger changes every turn (teamrun sends it after the conversation, as the runner's context, so it
does not end the cached prefix).

Reported for each: input tokens (uncached, read, written) and input cost of each run, their ratio (target: auto
<= 0.5x off), the run's whole cost as teamrun charged it, and whether the lead's prompt prefix (tools, system,
messages; the marks and the trailing context left out) of each turn is a byte prefix of the next turn's. The fake
caches any length (Anthropic caches from 1,024-4,096 tokens up, by model). Asserts nothing; ``--check`` exits 1
on a missed target.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import sys
import tempfile
import textwrap
from pathlib import Path
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
for _name in ("NO_PROXY", "no_proxy"):  # loopback traffic never goes through a proxy
    os.environ[_name] = ",".join(filter(None, [os.environ.get(_name), "127.0.0.1", "localhost"]))
os.environ["BENCH_ANTHROPIC_KEY"] = "sk-ant-bench-0123456789"

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO / "runner"), str(REPO)]

import teamrun  # noqa: E402
from teamrun.llm.adapter import import_litellm  # noqa: E402
from teamrun.llm.caching import RUNNER_CONTEXT_HEADER  # noqa: E402
from tests.fake_anthropic import FakeAnthropic  # noqa: E402
from tests.fakeserver import Reply, text, tool_calls  # noqa: E402

MODEL = "claude-haiku-4-5"


def team_file(folder: Path, url: str, cache: str, instructions_tokens: int) -> Path:
    rules = " ".join(
        f"Rule {i}: check every claim against its source and say which source you used."
        for i in range(max(1, instructions_tokens * 4 // 80))
    )
    path = folder / f"team-{cache}.yaml"
    path.write_text(
        textwrap.dedent(f"""\
            version: 1
            name: cached
            supervisor: lead
            defaults:
              model: anthropic/{MODEL}
              api_base: {url}
              api_key_env: BENCH_ANTHROPIC_KEY
              num_retries: 0
              cache: '{cache}'
            agents:
              lead:
                description: Leads a research team.
                instructions: {json.dumps("You lead a research team. " + rules)}
                delegates_to: [researcher, writer]
              researcher:
                description: Finds facts.
                instructions: Find facts and cite them.
              writer:
                description: Writes prose.
                instructions: Write clear prose.
            """),
        encoding="utf-8",
    )
    return path


def script(turns: int, *, tasks: bool = False) -> list[Reply]:
    """The provider's answers in call order: each lead turn delegates, the worker answers; then the lead ends.
    ``tasks``: each delegation is a named task (the lead's task ledger changes every turn)."""
    replies: list[Reply] = []
    for i in range(turns - 1):
        worker = ("researcher", "writer")[i % 2]
        arguments = {"task": f"part {i} of the report: cover topic {i} in detail"}
        if tasks:
            arguments["task_id"] = f"part-{i}"
        replies += [
            tool_calls((f"ask_{worker}", arguments)),
            text(f"Part {i}: " + "a finding with its source. " * 20),
        ]
    return [*replies, text("The report, assembled from every part.")]


def canonical_prefix(body: dict[str, Any]) -> str:
    """The request as cached: tools, system, messages in Anthropic's order, without the marks, as JSON minus its
    closing bracket (so an earlier turn's is a byte prefix of a later one's when nothing before moved); the
    runner's trailing context (the task ledger: the last text block of the last message) is not the prefix."""

    def unmarked(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: unmarked(v) for k, v in value.items() if k != "cache_control"}
        if isinstance(value, list):
            return [unmarked(v) for v in value]
        return value

    messages = unmarked(body["messages"])
    content = messages[-1].get("content") if messages else None
    if isinstance(content, list) and content and str(content[-1].get("text", "")).startswith(RUNNER_CONTEXT_HEADER):
        messages[-1] = {**messages[-1], "content": content[:-1]}
    return json.dumps([unmarked(body.get("tools")), unmarked(body.get("system")), *messages])[:-1]


def price(usages: list[dict[str, int]]) -> dict[str, float]:
    info = import_litellm().model_cost[MODEL]
    base = info["input_cost_per_token"]
    read = info.get("cache_read_input_token_cost", base)
    write = info.get("cache_creation_input_token_cost", base)
    sums = {
        k: sum(u[k] for u in usages) for k in ("input_tokens", "cache_read_input_tokens", "cache_creation_input_tokens")
    }
    cost = sums["input_tokens"] * base + sums["cache_read_input_tokens"] * read
    cost += sums["cache_creation_input_tokens"] * write
    return {**{k: float(v) for k, v in sums.items()}, "input_cost": cost}


def one_run(folder: Path, cache: str, turns: int, instructions_tokens: int, *, tasks: bool) -> dict[str, Any]:
    with FakeAnthropic() as server:
        server.script(MODEL, script(turns, tasks=tasks))
        result = teamrun.load_team(team_file(folder, server.url, cache, instructions_tokens)).run_sync(
            "Write the report."
        )
        assert result.status == "done", result.error
        assert not server.violations, server.violations
        lead = [b for b in server.bodies if "You lead a research team" in json.dumps(b.get("system"))]
        ledger = sum("## Your tasks" in json.dumps(b["messages"][-1]) for b in lead)
        prefixes = [canonical_prefix(b) for b in lead]
        stable = all(after.startswith(before) for before, after in itertools.pairwise(prefixes))
        return {
            **price(server.usages),
            "run_cost": result.cost,
            "lead_turns": len(lead),
            "stable": stable,
            "ledger_turns": ledger,
        }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=10, help="the lead's turns (default 10)")
    parser.add_argument("--instructions", type=int, default=2000, help="the lead's instructions, in tokens")
    parser.add_argument("--check", action="store_true", help="exit 1 when a target is missed")
    args = parser.parse_args()
    met = True
    for tasks in (False, True):
        with tempfile.TemporaryDirectory() as folder:
            runs = {
                cache: one_run(Path(folder), cache, args.turns, args.instructions, tasks=tasks)
                for cache in ("off", "auto")
            }
        what = "with a task ledger that changes every turn" if tasks else "without tasks"
        print(f"{args.turns}-turn supervisor run {what}, lead instructions ~{args.instructions} tokens, {MODEL}")
        heads = f"{'uncached':>9} {'read':>9} {'written':>9} {'input $':>10} {'run $':>10}"
        print(f"{'cache':6} {heads}  lead turns  with ledger  prefix stable")
        for cache, run in runs.items():
            print(
                f"{cache:6} {run['input_tokens']:9.0f} {run['cache_read_input_tokens']:9.0f} "
                f"{run['cache_creation_input_tokens']:9.0f} {run['input_cost']:10.6f} {run['run_cost']:10.6f}  "
                f"{run['lead_turns']:10d}  {run['ledger_turns']:11d}  {run['stable']}"
            )
        ratio = runs["auto"]["input_cost"] / runs["off"]["input_cost"]
        whole = runs["auto"]["run_cost"] / runs["off"]["run_cost"]
        print(f"input cost, auto / off: {ratio:.3f}  (target <= 0.5)   whole run as charged: {whole:.3f}\n")
        met = met and ratio <= 0.5 and runs["auto"]["stable"] and runs["off"]["stable"]
    return 1 if args.check and not met else 0


if __name__ == "__main__":
    sys.exit(main())
