#!/usr/bin/env python
"""The research report as a supervisor team and as a workspace team, against the local fake provider.

    python benchmarks/bench_workspace.py                       # 4 and 8 subjects, 3 runs each, 50 ms per call
    python benchmarks/bench_workspace.py --subjects 4,8,16 --runs 5 --latency 0.1

Three designs of one job, each with N subjects, run in this process through ``teamrun.load_team`` against
:class:`tests.fakeserver.FakeOpenAI`:

- ``supervisor``: ``teams/research-report.yaml`` as it is: the lead asks one researcher per subject in
  one turn, each researcher's findings come back into the lead's conversation, then the lead asks the
  writer with result references (the findings reach the writer verbatim, not retyped).
- ``workspace``: ``teams/shared-findings.yaml``'s shape: the lead writes the brief to the workspace, asks
  one researcher per subject, each researcher appends its findings to the ``findings`` entry and answers
  one line, then the writer reads the brief and the findings from the workspace. The lead sees the
  workspace's index, never the findings. (The file's skeptic is left out and its researcher gets the same
  ``notes`` tool as the supervisor team's, so both designs do the same research.)
- ``answer_to``: the workspace team with the researchers' answers written to ``findings`` by declaration
  (``answer_to: findings``, no tool call): a researcher answers as the supervisor team's does, the lead reads
  a one-line receipt, the writer reads the findings from the workspace; no brief (the lead's tasks carry the
  question, as the supervisor's do), and only the writer reads the entries.

The files get the same lead budget (``max_delegations``: N + 1) so 8 subjects fit; nothing else changes.
One stateless handler per design plays every agent from the request alone: a researcher calls ``notes``
once, then reports its findings (supervisor) or appends them to ``findings`` and says how many
(workspace): the same findings either way, the lines ``notes`` printed padded with numbered claims to
``--finding-chars`` characters (default 1,200: the research-report researcher's "under 200 words"). The
writer answers ``Report: `` and the first 300 characters of the findings it was given. The fake provider counts
tokens from the text it receives and sends (characters / 4), so the token figures follow the prompts each
design builds.

Printed, per N and design: the lead's prompt tokens, the run's total tokens, model calls and wall time
(medians of the runs, alternating designs so load hits all alike), and each as a ratio to the supervisor
design measured in the same run. Nothing here asserts a timing.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "runner"))
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from tests.fakeserver import FakeOpenAI, Reply, text, tool_calls  # noqa: E402

DESIGNS = ("supervisor", "workspace", "answer_to")
SUBJECTS = ["Rust", "Go", "Zig", "Nim", "Odin", "Crystal", "Elixir", "Kotlin", "Swift", "Dart", "Julia", "OCaml"]
MEASURES = ("lead_prompt", "tokens", "calls", "wall_s")
AGENTS = ("lead", "researcher", "writer")
Handler = Callable[[dict[str, Any]], Reply]


# -- the team files -----------------------------------------------------------------------------------------


def _load(name: str) -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load((REPO / "teams" / name).read_text(encoding="utf-8"))
    return data


def team_files(directory: Path, subjects: int) -> dict[str, Path]:
    """Both designs as team files in ``directory``, with a lead budget that fits ``subjects`` researchers."""
    supervisor = _load("research-report.yaml")
    notes = dict(supervisor["tools"]["notes"], cwd=str(REPO / "teams" / "samples"))
    supervisor["tools"]["notes"] = notes
    workspace = _load("shared-findings.yaml")
    agents = workspace["agents"]
    del agents["skeptic"]
    agents["lead"]["delegates_to"] = ["researcher", "writer"]
    agents["researcher"]["tools"] = ["notes"]
    workspace["workspace"]["entries"]["findings"]["write"] = ["researcher"]
    workspace["tools"] = {"notes": notes}
    declared = answer_to_file(workspace)
    for data in (supervisor, workspace, declared):
        data["agents"]["lead"]["budget"]["max_delegations"] = subjects + 1
    paths = {}
    for design, data in zip(DESIGNS, (supervisor, workspace, declared), strict=True):
        paths[design] = directory / f"{design}-{subjects}.yaml"
        paths[design].write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return paths


def answer_to_file(workspace: dict[str, Any]) -> dict[str, Any]:
    """The workspace design with the researchers' answers written to ``findings`` by declaration (``answer_to``):
    a researcher has no workspace tool (it answers as the supervisor team's does, the answer goes to the entry,
    the lead reads a receipt), the lead asks the researchers with the question (no brief), the writer reads the
    findings from the workspace."""
    data = copy.deepcopy(workspace)
    entries = data["workspace"]["entries"]
    del entries["brief"]
    entries["findings"].update(schema={"type": "array", "items": {"type": "string"}}, write=[], read=["writer"])
    entries["sections"]["read"] = ["writer"]
    data["agents"]["researcher"]["answer_to"] = "findings"
    return data


# -- the fake agents -------------------------------------------------------------------------------------------


def _tools(request: dict[str, Any]) -> set[str]:
    return {t["function"]["name"] for t in request.get("tools") or []}


def _results(request: dict[str, Any]) -> list[str]:
    return [m["content"] for m in request["messages"] if m["role"] == "tool"]


def _called(request: dict[str, Any]) -> list[str]:
    """The tools the agent has called so far in this conversation, in order."""
    return [
        call["function"]["name"]
        for m in request["messages"]
        if m["role"] == "assistant"
        for call in m.get("tool_calls") or []
    ]


def _task(request: dict[str, Any]) -> str:
    return next(m["content"] for m in request["messages"] if m["role"] == "user")


def _ask_researchers(request: dict[str, Any], subjects: list[str]) -> Reply:
    return tool_calls(*(("ask_researcher", {"task": f"Research {s} for: {_task(request)}"}) for s in subjects))


def supervisor_handler(subjects: list[str], chars: int) -> Handler:
    """``research-report.yaml``'s agents (as in ``bench_workflow.py``)."""

    def answer(request: dict[str, Any]) -> Reply:
        tools, results = _tools(request), _results(request)
        if "ask_researcher" in tools:  # the lead
            if not results:
                return _ask_researchers(request, subjects)
            found = [json.loads(r) for r in results]
            refs = [f["ref"] for f in found if isinstance(f, dict) and f.get("ref") and f.get("agent") == "researcher"]
            writer = [f for f in found if isinstance(f, dict) and f.get("agent") == "writer"]
            if writer:
                return text(writer[-1]["response"])
            return tool_calls(
                ("ask_writer", {"task": "Write the report from the findings.", "context_from_refs": refs})
            )
        if "notes" in tools:  # a researcher
            if not results:
                return tool_calls(("notes", {"subject": _task(request).split()[1]}))
            subject = _task(request).split()[1]
            return text(f"Findings on {subject}:\n" + _report(findings(results[-1], subject, chars)))
        return text("Report: " + _task(request)[:300])  # the writer

    return answer


def findings(notes: str, subject: str, chars: int) -> list[dict[str, str]]:
    """A researcher's findings on ``subject``: each line ``notes`` printed (``path:line:text``), then numbered
    filler claims until the claims hold ``chars`` characters (a researcher's report of about 200 words)."""
    found = []
    for line in notes.splitlines():
        source, _, rest = line.partition(":")
        claim = rest.partition(":")[2].strip()
        if claim and sum(len(f["claim"]) for f in found) < chars:
            found.append({"claim": claim[:200], "source": source[:100]})
    while sum(len(f["claim"]) for f in found) < chars:
        n = len(found) + 1
        claim = f"{subject} point {n}: measured behaviour, costs and limits as the notes describe them"
        found.append({"claim": claim, "source": f"notes/{subject.lower()}-{n}.md"})
    return found


def _report(found: list[dict[str, str]]) -> str:
    return "\n".join(f"- {f['claim']} ({f['source']})" for f in found)


def workspace_handler(subjects: list[str], chars: int) -> Handler:
    """``shared-findings.yaml``'s agents, the skeptic left out."""

    def answer(request: dict[str, Any]) -> Reply:
        tools, results, called = _tools(request), _results(request), _called(request)
        if "workspace_write_brief" in tools:  # the lead
            if not called:
                brief = f"{_task(request)}. Cover: " + ", ".join(subjects)
                return tool_calls(("workspace_write_brief", {"value": brief, "version": 0}))
            if "ask_researcher" not in called:
                return _ask_researchers(request, subjects)
            if "ask_writer" not in called:
                return tool_calls(("ask_writer", {"task": "Write the report from the brief and the findings."}))
            return text(json.loads(results[-1])["response"] if results[-1].startswith("{") else results[-1])
        if "notes" in tools:  # a researcher
            subject = _task(request).split()[1]
            if not called:
                return tool_calls(("notes", {"subject": subject}))
            if "workspace_write_findings" not in called:
                items = findings(results[-1], subject, chars)
                return tool_calls(("workspace_write_findings", {"items": items}))
            added = len(findings(results[-2], subject, chars))
            return text(f"Added {added} findings on {subject}.")
        if not called:  # the writer
            return tool_calls(("workspace_read", {"entry": "brief"}), ("workspace_read", {"entry": "findings"}))
        return text("Report: " + _report(json.loads(results[-1])["value"])[:300])

    return answer


def answer_to_handler(subjects: list[str], chars: int) -> Handler:
    """The ``answer_to`` design's agents: researchers answer as the supervisor team's do."""
    relay = supervisor_handler(subjects, chars)

    def answer(request: dict[str, Any]) -> Reply:
        tools, results, called = _tools(request), _results(request), _called(request)
        if "ask_researcher" in tools:  # the lead
            if "ask_researcher" not in called:
                return _ask_researchers(request, subjects)
            if "ask_writer" not in called:
                return tool_calls(("ask_writer", {"task": "Write the report from the findings."}))
            return text(json.loads(results[-1])["response"])
        if "notes" in tools:  # a researcher: its answer goes to `findings`
            return relay(request)
        if not called:  # the writer
            return tool_calls(("workspace_read", {"entry": "findings"}))
        return text("Report: " + "\n".join(json.loads(results[-1])["value"])[:300])

    return answer


# -- running ---------------------------------------------------------------------------------------------------


def run_once(path: Path, server: FakeOpenAI, question: str) -> dict[str, float]:
    import teamrun

    team = teamrun.load_team(path, model="openai/bench")
    before = len(server.requests())
    start = time.perf_counter()
    result = team.run_sync(question)
    wall = time.perf_counter() - start
    assert result.status == "done", (path.name, result.status, result.error, result.stopped_by)
    if result.workspace is not None:  # the findings reached the workspace, by a tool or by declaration
        assert result.workspace["entries"]["findings"]["value"], (path.name, "no findings")
    return {
        "lead_prompt": result.agents["lead"].usage.input_tokens,
        "tokens": result.usage.total_tokens,
        "calls": len(server.requests()) - before,
        "wall_s": wall,
        **{agent: result.agents[agent].usage.total_tokens for agent in AGENTS},
    }


def measure(server: FakeOpenAI, directory: Path, count: int, runs: int, chars: int) -> dict[str, dict[str, float]]:
    """The medians of ``runs`` runs of each design with ``count`` subjects."""
    subjects = SUBJECTS[:count]
    question = f"Compare {', '.join(subjects)} for command-line tools"
    paths = team_files(directory, count)
    handlers = {
        "supervisor": supervisor_handler(subjects, chars),
        "workspace": workspace_handler(subjects, chars),
        "answer_to": answer_to_handler(subjects, chars),
    }
    samples: dict[str, list[dict[str, float]]] = {design: [] for design in DESIGNS}

    def once(design: str) -> dict[str, float]:
        server.handler("bench", handlers[design])
        return run_once(paths[design], server, question)

    for design in DESIGNS:  # warm-up: imports, LiteLLM's first call
        once(design)
    for _ in range(runs):
        for design in DESIGNS:
            samples[design].append(once(design))
    return {
        design: {key: statistics.median(s[key] for s in runs_) for key in (*MEASURES, *AGENTS)}
        for design, runs_ in samples.items()
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--subjects", default="4,8", help=f"comma-separated counts, at most {len(SUBJECTS)}")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--latency", type=float, default=0.05, help="seconds the fake takes per model call")
    parser.add_argument("--finding-chars", type=int, default=1200, help="characters of findings per subject")
    args = parser.parse_args(argv)
    counts = [int(c) for c in args.subjects.split(",")]
    if any(not 1 <= c <= len(SUBJECTS) for c in counts):
        parser.error(f"--subjects: each count between 1 and {len(SUBJECTS)}")
    os.environ["OPENAI_API_KEY"] = "sk-bench-workspace"
    os.environ["NO_PROXY"] = os.environ["no_proxy"] = "127.0.0.1,localhost"
    print(
        f"research report: supervisor team vs workspace team, {args.runs} runs each, fake provider latency "
        f"{args.latency * 1000:.0f} ms per call, {args.finding_chars} characters of findings per subject (medians)"
    )
    header = f"{'':<22}{'lead prompt':>12}{'tokens':>10}{'calls':>8}{'wall s':>9}"
    with FakeOpenAI(latency=args.latency) as server, tempfile.TemporaryDirectory() as tmp:
        os.environ["TEAMRUN_API_BASE"] = server.url
        for count in counts:
            medians = measure(server, Path(tmp), count, args.runs, args.finding_chars)
            print(f"\n{count} subjects\n{header}")
            for design, f in medians.items():
                print(f"{design:<22}{f['lead_prompt']:>12.0f}{f['tokens']:>10.0f}{f['calls']:>8.0f}{f['wall_s']:>9.3f}")
            sup = medians["supervisor"]
            for design in DESIGNS[1:]:
                ratios = [medians[design][key] / sup[key] if sup[key] else float("nan") for key in MEASURES]
                cells = "".join(f"{r:>{w}.2f}" for r, w in zip(ratios, (12, 10, 8, 9), strict=True))
                print(f"{design + ' / supervisor':<22}{cells}")
            for design, f in medians.items():
                shares = ", ".join(f"{agent} {f[agent]:.0f}" for agent in AGENTS)
                print(f"  {design} tokens by agent: {shares}")


if __name__ == "__main__":
    main()
