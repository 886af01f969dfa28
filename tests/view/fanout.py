"""A recorded fan-out of N workers as a trace file (content on), made in-process with the scripted model.

Shared by the view's tests and ``benchmarks/bench_view.py``.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import teamrun
from teamrun.observe.trace_file import TraceWriter
from teamrun.testing import ScriptedModel, tool_calls

TEAM = """\
version: 1
name: fan-out
supervisor: lead
defaults: {{model: offline}}
agents:
  lead:
    description: Splits the work.
    delegates_to: [worker]
    budget: {{max_steps: 4, max_delegations: {n}}}
    delegation: {{parallel: true, max_concurrency: {n}}}
  worker:
    description: Does one item.
"""


def record_fan_out(folder: Path, workers: int) -> Path:
    """Run a supervisor handing ``workers`` items to ``worker`` in one turn; returns the trace file's path."""
    team_file = folder / f"fan-out-{workers}.yaml"
    team_file.write_text(textwrap.dedent(TEAM.format(n=workers)), encoding="utf-8")
    calls = [("ask_worker", {"task": f"item {i}"}) for i in range(workers)]
    model = ScriptedModel(
        {"lead": [tool_calls(*calls), f"{workers} items done"], "worker": [f"item {i} done" for i in range(workers)]}
    )
    trace = folder / f"fan-out-{workers}.jsonl"
    with TraceWriter(trace, content=True) as writer:
        team = teamrun.load_team(team_file, chat_model=writer.capture(model))
        result = team.run_sync("do the items", subscribers=[writer])
    assert result.status == "done", result.error
    return trace
