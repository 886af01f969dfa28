"""Attack a44m item 4 (issue 44): a recall of earlier threads' messages is reported as what it is.

The progress line said ``recalled nothing about R`` when the prompt quoted earlier threads' messages (it spoke of
the facts alone, and said nothing of the messages). It now says ``recalled no facts`` and, on a line of its own,
``recalled N earlier message(s) of other threads``. (The run view's labels: tests/view/test_memory_view.py.)
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from tests.cli_processes import teamrun

TEAM = """\
version: 1
name: desk
supervisor: support
defaults: {model: offline}
agents:
  support: {instructions: Help the customer.}
memory:
  embedding: {model: offline}
  recall:
    support: {min_score: 0.0, messages: {top_k: 5, min_score: 0.0}}
"""


def _execute(team: Path, store: Path, thread: str, task: str, *extra: str) -> list[str]:
    done = teamrun(
        "execute", str(team), "-i", task, "--resource", "cust-R", "--thread", thread, "--store", str(store),
        "--progress", "plain", *extra,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return [line.split("] ", 1)[-1] for line in done.stderr.splitlines()]


def test_the_progress_line_counts_the_earlier_messages_a_recall_quoted(tmp_path: Path) -> None:
    team, store, trace = tmp_path / "desk.yaml", tmp_path / "teamrun.db", tmp_path / "run.jsonl"
    team.write_text(TEAM, encoding="utf-8")
    first = _execute(team, store, "t1", "My parcel to Lisbon arrived damaged, order 7731")
    second = _execute(team, store, "t2", "Lisbon parcel order 7731", "--trace", str(trace))

    assert "support: recalled no facts about cust-R" in first
    assert not any("earlier message" in line for line in first)  # nothing indexed yet: no line of it
    events = [json.loads(raw) for raw in trace.read_text(encoding="utf-8").splitlines()]
    [quoted] = [e["data"] for e in events if e.get("kind") == "memory_recall" and e["data"]["how"] == "messages"]
    assert len(quoted["ids"]) == 2  # the first thread's user message and answer
    best = max(quoted["scores"])
    assert "support: recalled no facts about cust-R" in second
    assert f"support: recalled 2 earlier message(s) of other threads, best {best:.2f}" in second, second
    assert not any(re.search(r"recalled nothing", line) for line in first + second)
