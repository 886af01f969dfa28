"""Issue 44: `teamrun chat --resource ID` with piped input (as tests/threads/test_chat_cli.py pipes it), on the
offline model and teams/support-desk.yaml: a fact saved in one chat thread is recalled in a second thread of the
same resource (`/new` in the same session), and never in another resource's chat.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

from tests.cli_processes import child_env, teamrun, teamrun_argv

REPO = Path(__file__).resolve().parents[2]
DESK = REPO / "teams" / "support-desk.yaml"
TOLD = "Please send my invoices by email as PDF"
ASKED = "How will you send my next invoice?"


def _chat(store: Path, resource: str, thread: str, lines: str) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        teamrun_argv("chat", str(DESK), "--store", str(store), "--resource", resource, "--thread", thread),
        input=lines,
        capture_output=True,
        text=True,
        env=child_env(),
        timeout=600,  # a hang guard
    )
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr and "turn failed" not in done.stderr, done.stderr
    return done


def _answers(store: Path, thread: str) -> list[str]:
    shown = teamrun("threads", "show", thread, "--store", str(store), "--json")
    assert shown.returncode == 0, shown.stderr
    thread_: dict[str, Any] = json.loads(shown.stdout)
    return [str(m["content"]) for m in thread_["messages"] if m["role"] == "assistant"]


def test_a_fact_saved_in_one_chat_thread_is_recalled_in_the_next_thread_of_the_resource_only(tmp_path: Path) -> None:
    store = tmp_path / "teamrun.db"
    said = _chat(store, "customer-42", "c-1", f"{TOLD}\n/new\n{ASKED}\n")
    new_thread = next(line for line in said.stderr.splitlines() if line.startswith("new thread "))
    second = new_thread.removeprefix("new thread ").strip()
    told, asked = _answers(store, "c-1"), _answers(store, second)
    assert len(told) == 1 and told[0].startswith(f"[offline simulation] Task: {TOLD}\n")
    assert len(asked) == 1 and asked[0].startswith(f"[offline simulation] Task: {ASKED}\n")
    assert "Earlier in this conversation" not in asked[0]  # another thread: it knows only what memory recalled
    assert f"- memory-1 (remembered): {TOLD}" in asked[0].splitlines()
    assert said.stdout == f"desk: {told[0]}\ndesk: {asked[0]}\n"  # what the user read
    listed = teamrun("memory", "list", "--resource", "customer-42", "--store", str(store), "--json")
    assert listed.returncode == 0, listed.stderr
    saved = {m["fact"]: m["thread_id"] for m in json.loads(listed.stdout)}
    assert saved[TOLD] == "c-1"  # kept with the thread that saved it

    other = _chat(store, "customer-7", "c-3", f"{ASKED}\n")
    (answer,) = _answers(store, "c-3")
    assert TOLD not in other.stdout and "(remembered)" not in answer
    assert answer.startswith(f"[offline simulation] Task: {ASKED}\n")
