"""Issue 44: teams/support-desk.yaml as its header and docs/memory.md show it, on the offline model (no key, no
network): `teamrun execute --resource` twice, two processes on one store. The second run recalls what the first
saved, and the user sees it — in the progress lines and in the desk's answer; another customer's run does not.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.cli_processes import teamrun

REPO = Path(__file__).resolve().parents[2]
DESK = REPO / "teams" / "support-desk.yaml"
TOLD = "Please send my invoices by email as PDF"
ASKED = "How will you send my next invoice?"


def _execute(store: Path, resource: str, task: str) -> tuple[dict[str, Any], list[str]]:
    """`teamrun execute teams/support-desk.yaml` in its own process: its --json result and its progress lines."""
    done = teamrun(
        "execute", str(DESK), "--resource", resource, "-i", task, "--store", str(store), "--json", "--progress", "plain"
    )
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr and "warning" not in done.stderr, done.stderr
    result: dict[str, Any] = json.loads(done.stdout)
    assert result["status"] == "done", result
    return result, done.stderr.splitlines()


def _said(lines: list[str], what: str) -> list[str]:
    """The progress lines that say ``what`` (without their elapsed-time prefix)."""
    return [line.split("] ", 1)[-1] for line in lines if what in line]


def test_the_support_desk_recalls_in_a_second_run_what_the_first_saved_for_the_customer(tmp_path: Path) -> None:
    store = tmp_path / "teamrun.db"
    first, progress = _execute(store, "customer-42", TOLD)
    assert first["final_text"].startswith(f"[offline simulation] Task: {TOLD}\n")
    assert _said(progress, "recalled")[0] == "desk: recalled no facts about customer-42"  # before it saved
    assert _said(progress, "memory_save") == ["desk: tool memory_save ok"]
    assert [d["task"] for d in first["delegations"]] == [TOLD]  # billing was asked the customer's question
    listed = teamrun("memory", "list", "--resource", "customer-42", "--store", str(store), "--json")
    assert listed.returncode == 0, listed.stderr
    assert [m["fact"] for m in json.loads(listed.stdout)] == [TOLD]

    second, progress = _execute(store, "customer-42", ASKED)
    answer = second["final_text"]
    assert answer.startswith(f"[offline simulation] Task: {ASKED}\n")
    assert f"- memory-1 (remembered): {TOLD}" in answer.splitlines()  # the desk answered with what it recalled
    recalled = _said(progress, "recalled")
    assert len(recalled) == 1 and recalled[0].startswith("desk: recalled 1 fact(s), best ")
    assert recalled[0].endswith(" about customer-42")
    assert _said(progress, "memory_save") == []  # a question: nothing new to remember

    other, progress = _execute(store, "customer-7", ASKED)
    assert TOLD not in other["final_text"] and "(remembered)" not in other["final_text"]
    assert _said(progress, "recalled") == ["desk: recalled no facts about customer-7"]
