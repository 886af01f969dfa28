"""How fast is ``teamrun validate``, next to ``check-jsonschema`` on the same files?

Plain script, no pytest:  python benchmarks/bench_validate.py [--files 500] [--repeat 5]

It writes 500 varied, valid team files (about 60 lines each) to a temporary
folder, then times, as subprocesses and taking the median of a few runs:

* ``teamrun validate one.yaml`` and ``teamrun validate`` on all 500 files;
* ``check-jsonschema --schemafile schemas/team.schema.json`` on the same;
* ``teamrun validate one.yaml`` next to ``python -c "import yaml, jsonschema,
  pydantic, jinja2, click"`` (the libraries it needs), in turn, pair by pair.

teamrun does more than check-jsonschema (YAML positions, duplicate keys,
interpolation, cross-references, cycles, templates, regexes, embedded
schemas), so the ratio says what that costs. Targets: one file under 0.5 s of
wall time, and on 500 files a ratio teamrun / check-jsonschema of at most 1.0;
one file at most 1.5 x the import of its libraries (median of pairwise ratios).
Reports ratios; it asserts nothing.
"""

from __future__ import annotations

import argparse
import os
import random
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SCHEMA = REPO / "schemas" / "team.schema.json"
ONE_FILE_TARGET_S = 0.5

WORDS = [
    "market",
    "pricing",
    "battery",
    "cloud",
    "rust",
    "python",
    "europe",
    "supply",
    "chain",
    "energy",
    "policy",
    "climate",
    "retail",
    "logistics",
    "security",
    "privacy",
    "latency",
    "storage",
    "compiler",
    "kernel",
    "vaccine",
    "budget",
]
MODELS = [
    "offline",
    "openai/gpt-4o-mini",
    "anthropic/claude-3-5-haiku-latest",
    "ollama/llama3.1",
    "${TEAMRUN_MODEL:-offline}",
]
ROLES = ["researcher", "analyst", "writer", "critic", "planner", "coder", "reviewer", "summarizer", "scout", "editor"]


def _sentence(rng: random.Random, words: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(words)).capitalize() + "."


def team_file(rng: random.Random, index: int) -> str:
    """One realistic, valid team file (about 60 lines)."""
    workers = rng.sample(ROLES, rng.randint(2, 4))
    tools = rng.sample(["search", "notes", "grep", "fetch", "calc"], rng.randint(1, 3))
    lines = [
        "# yaml-language-server: $schema=../schemas/team.schema.json",
        "version: 1",
        f"name: team-{index}",
        f"description: {_sentence(rng, 8)}",
        "supervisor: lead",
        "defaults:",
        f"  model: {rng.choice(MODELS)}",
        f"  temperature: {rng.choice([0, 0.2, 0.7])}",
        "  num_retries: 3",
        "limits:",
        f"  max_total_tokens: {rng.randint(50, 400) * 1000}",
        f"  max_cost_usd: {rng.choice([0.5, 1.0, 2.5])}",
        f"  max_depth: {rng.randint(2, 3)}",
        f"  timeout_s: {rng.choice([120, 300, 600])}",
        "vars:",
        f"  topic: {rng.choice(WORDS)}",
        f"  audience: {rng.choice(['engineers', 'managers', 'students'])}",
        "agents:",
        "  lead:",
        f"    description: {_sentence(rng, 7)}",
        "    instructions: |",
        "      You lead a team researching {{ vars.topic }} for {{ vars.audience }}.",
        "      Today is {{ today }}. Delegate independent questions in parallel.",
        f"    delegates_to: [{', '.join(workers)}]",
        f"    budget: {{max_steps: {rng.randint(5, 12)}, max_delegations: {rng.randint(4, 10)}}}",
        "    delegation:",
        f"      tool: {rng.choice(['per_agent', 'delegate_task'])}",
        f"      max_concurrency: {rng.randint(2, 6)}",
        '      message_filter: {last: 6, drop_matching: ["secret", "^\\\\s*$"], exclude_roles: [tool]}',
        "      hooks:",
        "        on_start:",
        f"          - when: \"agent == '{workers[0]}'\"",
        "            append_prompt: Cite your sources.",
        "        on_complete:",
        '          - when: "not success"',
        '            result_text: "{{ agent }} failed; try another approach."',
        "        on_iteration:",
        '          - when: "iteration >= 6"',
        "            feedback: Wrap up with what you have.",
    ]
    for role in workers:
        lines += [
            f"  {role}:",
            f"    description: {_sentence(rng, 6)}",
            f"    instructions: Work only on your task about {{{{ vars.topic }}}}. {_sentence(rng, 5)}",
            f"    tools: [{', '.join(rng.sample(tools, rng.randint(1, len(tools))))}]",
            f"    budget: {{max_steps: {rng.randint(3, 8)}, max_tool_calls: {rng.randint(2, 8)}}}",
        ]
    lines.append("    output_schema: {type: object, required: [answer], properties: {answer: {type: string}}}")
    lines.append("tools:")
    for tool in tools:
        if tool in ("search", "fetch"):
            lines += [f"  {tool}:", f"    description: {_sentence(rng, 5)}", f"    python: team_tools.web:{tool}"]
        else:
            lines += [
                f"  {tool}:",
                f"    description: {_sentence(rng, 5)}",
                f'    command: ["{tool}", "--query", "{{{{ query }}}}", "{{{{ limit }}}}"]',
                "    parameters:",
                "      query: {type: string, description: What to look for.}",
                "      limit: {type: integer, minimum: 1, default: 10}",
                f"    timeout_s: {rng.choice([5, 10, 30])}",
            ]
    return "\n".join(lines) + "\n"


def teamrun_command() -> list[str]:
    script = Path(sys.executable).with_name("teamrun")
    return [str(script)] if script.exists() else [sys.executable, "-m", "teamrun.cli"]


def check_jsonschema_command() -> list[str] | None:
    script = Path(sys.executable).with_name("check-jsonschema")
    if script.exists():
        return [str(script)]
    found = shutil.which("check-jsonschema")
    return [found] if found else None


@dataclass(frozen=True)
class Timing:
    wall: float
    """Median wall-clock seconds."""
    cpu: float
    """Median user + system CPU seconds of the child (steadier on a busy machine)."""


def timed(argv: list[str], repeat: int, env: dict[str, str], expect: int = 0) -> Timing:
    """Median times of running ``argv`` ``repeat`` times (after one warm-up run)."""
    walls, cpus = [], []
    for attempt in range(repeat + 1):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        done = subprocess.run(argv, cwd=REPO, env=env, capture_output=True, text=True, check=False)
        elapsed = time.perf_counter() - start
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        if done.returncode != expect:
            raise SystemExit(f"{argv[:3]}... exited {done.returncode}:\n{done.stdout[-2000:]}{done.stderr[-2000:]}")
        if attempt:  # the first run warms the OS file cache and the bytecode cache
            walls.append(elapsed)
            cpus.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
    return Timing(statistics.median(walls), statistics.median(cpus))


LIBRARIES = "import yaml, jsonschema, pydantic, jinja2, click"
IMPORT_RATIO_TARGET = 1.5


def paired_ratio(argv: list[str], baseline: list[str], repeat: int, env: dict[str, str]) -> tuple[float, float]:
    """Median CPU and wall ratios of ``argv`` over ``baseline``, run in turn (A B A B ...) after a warm-up:
    pairing keeps the ratio meaningful while a shared machine's speed drifts."""
    cpu, wall = [], []
    for attempt in range(repeat + 1):
        mine, theirs = timed(argv, 1, env), timed(baseline, 1, env)
        if attempt:
            cpu.append(mine.cpu / theirs.cpu)
            wall.append(mine.wall / theirs.wall)
    return statistics.median(cpu), statistics.median(wall)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=500)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--seed", type=int, default=20241)
    args = parser.parse_args()

    rng = random.Random(args.seed)
    teamrun = teamrun_command()
    reference = check_jsonschema_command()
    with tempfile.TemporaryDirectory(prefix="teamrun-bench-") as tmp:
        folder = Path(tmp) / "teams"
        folder.mkdir()
        paths = []
        for index in range(args.files):
            path = folder / f"team_{index:03d}.yaml"
            path.write_text(team_file(rng, index))
            paths.append(str(path))
        lines = statistics.mean(Path(p).read_text().count("\n") for p in paths)
        one = paths[0]
        # As installed, Python finds compiled bytecode for every module. A development
        # checkout run with PYTHONDONTWRITEBYTECODE=1 compiles teamrun's sources on every
        # start instead, so give both tools a bytecode cache of their own.
        cached = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        cached["PYTHONPYCACHEPREFIX"] = str(Path(tmp) / "pycache")
        uncached = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
        uncached.pop("PYTHONPYCACHEPREFIX", None)
        print(f"{args.files} team files, {lines:.0f} lines on average; median of {args.repeat} runs")
        print(f"teamrun:          {' '.join(teamrun)}")
        print(f"check-jsonschema: {' '.join(reference) if reference else '(not installed)'}")
        print()

        ours = [
            timed([*teamrun, "validate", one], args.repeat, cached),
            timed([*teamrun, "validate", *paths], args.repeat, cached),
        ]
        nan = Timing(float("nan"), float("nan"))
        theirs = [nan, nan]
        if reference:
            base = [*reference, "--schemafile", str(SCHEMA)]
            theirs = [timed([*base, one], args.repeat, cached), timed([*base, *paths], args.repeat, cached)]
        source_only = timed([*teamrun, "validate", one], args.repeat, uncached)
        import_cpu, import_wall = paired_ratio(
            [*teamrun, "validate", one], [sys.executable, "-c", LIBRARIES], max(args.repeat, 9), cached
        )

    print(f"{'':<10} {'teamrun':>16} {'check-jsonschema':>17} {'ratio':>12}")
    print(f"{'':<10} {'wall':>7} {'cpu':>8} {'wall':>8} {'cpu':>8} {'wall':>6} {'cpu':>5}")
    for label, mine, other in zip(["1 file", f"{args.files} files"], ours, theirs, strict=True):
        print(
            f"{label:<10} {mine.wall:>6.3f}s {mine.cpu:>7.3f}s {other.wall:>7.3f}s {other.cpu:>7.3f}s "
            f"{mine.wall / other.wall:>6.2f} {mine.cpu / other.cpu:>5.2f}"
        )
    print()
    one_ok = ours[0].wall < ONE_FILE_TARGET_S
    many_ratio = ours[1].wall / theirs[1].wall
    print(f"target: 1 file under {ONE_FILE_TARGET_S} s wall ............... {'met' if one_ok else 'MISSED'}")
    print(f"target: {args.files} files, ratio <= 1.0 (wall) ........ {'met' if many_ratio <= 1.0 else 'MISSED'}")
    print(
        f"throughput: {args.files / ours[1].wall:.0f} files/s teamrun, "
        f"{args.files / theirs[1].wall:.0f} files/s check-jsonschema"
    )
    print(
        f"1 file / importing its libraries ({LIBRARIES}): {import_cpu:.2f}x cpu, {import_wall:.2f}x wall "
        f"(median of pairwise ratios; target <= {IMPORT_RATIO_TARGET}) ... "
        f"{'met' if import_cpu <= IMPORT_RATIO_TARGET else 'MISSED'}"
    )
    print(
        "1 file with no bytecode cache (PYTHONDONTWRITEBYTECODE=1, a dev checkout compiling "
        f"teamrun at every start): {source_only.wall:.3f}s wall, {source_only.cpu:.3f}s cpu"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
