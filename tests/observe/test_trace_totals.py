"""`trace show`'s run line has the totals, also for a trace cut short: the run line of a run that never ended
adds up what its agents used (issue 42 item 23)."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

import pytest

from teamrun.cli import main

TEAMS = Path(__file__).resolve().parents[2] / "teams"


def test_the_run_line_of_a_cut_trace_adds_up_its_agents(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    shutil.copy(TEAMS / "research-report.yaml", tmp_path)
    shutil.copytree(TEAMS / "samples", tmp_path / "samples")
    whole = tmp_path / "whole.jsonl"
    team = str(tmp_path / "research-report.yaml")
    assert main(["execute", team, "-i", "Compare Rust and Go", "--progress", "none", "--trace", str(whole)]) == 0
    lines = whole.read_text(encoding="utf-8").splitlines()
    last_agent_end = max(i for i, line in enumerate(lines) if json.loads(line)["kind"] == "agent_end")
    cut = tmp_path / "cut.jsonl"  # killed as the supervisor ends: every worker ended, the lead and the run never did
    cut.write_text("\n".join(lines[:last_agent_end]) + "\n", encoding="utf-8")
    capsys.readouterr()
    assert main(["trace", "show", str(whole)]) == 0
    whole_run = capsys.readouterr().out.splitlines()[0]

    assert main(["trace", "show", str(cut)]) == 0
    shown = capsys.readouterr().out.splitlines()
    assert "unfinished" in shown[0], shown
    assert _spent(shown[0]) == _spent(whole_run) != "0 tok  $0.0000", shown  # every model call is in the cut trace

    assert main(["trace", "show", str(cut), "--format", "json"]) == 0
    (run,) = json.loads(capsys.readouterr().out)["runs"]
    assert run["usage"]["total_tokens"] == sum(_agent_usage(run)) > 0


def _spent(line: str) -> str:
    found = re.search(r"  (\S+ tok  \$\S+)", line)
    assert found, line
    return found[1]


def _agent_usage(node: dict[str, Any]) -> list[int]:
    own = [node["usage"].get("total_tokens", 0)] if node["kind"] == "agent" else []
    return own + [tokens for child in node["children"] for tokens in _agent_usage(child)]
