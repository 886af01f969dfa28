"""``workspace: {persist: thread}`` end to end through the CLI, each turn a new ``teamrun`` process (offline model):
a turn of ``execute --thread`` or ``chat`` starts from the workspace the thread's previous turn ended with, the
run's result shows it, kept values the team file now refuses start afresh with a warning, and ``validate``
checks ``persist``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]

TEAM = """\
version: 1
name: thread-ws
supervisor: lead
workspace:
{persist}  entries:
    notes:
      schema: {notes_schema}
      merge: append
      write: [lead]
{count}agents:
  lead: {{description: Keeps notes.}}
"""
COUNT = """\
    count:
      schema: {type: integer}
      merge: sum
      write: [lead]
"""


def write_team(
    directory: Path,
    *,
    persist: str | None = "thread",
    notes_schema: str = "{type: array, items: {type: string}}",
    count: bool = True,
) -> Path:
    path = directory / "team.yaml"
    path.write_text(
        TEAM.format(
            persist=f"  persist: {persist}\n" if persist else "",
            notes_schema=notes_schema,
            count=COUNT if count else "",
        ),
        encoding="utf-8",
    )
    return path


def teamrun(directory: Path, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO / "runner"), "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    env.pop("TEAMRUN_STORE", None)
    env["XDG_DATA_HOME"] = str(directory / "data")
    return subprocess.run(
        [sys.executable, "-m", "teamrun.cli", *args],
        cwd=directory,
        env=env,
        input=stdin if stdin is not None else "",
        capture_output=True,
        text=True,
        timeout=300,
    )


def turn(directory: Path, store: str, message: str, thread: str | None = "t1") -> dict[str, Any]:
    threaded = ["--thread", thread] if thread is not None else []
    done = teamrun(
        directory,
        "execute",
        "team.yaml",
        "-i",
        message,
        "--model",
        "offline",
        "--store",
        store,
        *threaded,
        "--json",
        "--progress",
        "none",
    )
    assert done.returncode == 0, done.stderr
    result: dict[str, Any] = json.loads(done.stdout)
    assert result["status"] == "done", result
    return result


def values(result: dict[str, Any]) -> dict[str, Any]:
    return {name: entry["value"] for name, entry in result["workspace"]["entries"].items()}


def test_each_turn_of_a_thread_starts_from_the_workspace_its_previous_turn_ended_with(
    store_url: str, tmp_path: Path
) -> None:
    write_team(tmp_path)
    first = turn(tmp_path, store_url, "first")
    second = turn(tmp_path, store_url, "second")
    third = turn(tmp_path, store_url, "third")
    other = turn(tmp_path, store_url, "another thread", thread="t2")
    alone = turn(tmp_path, store_url, "no thread", thread=None)

    assert values(first) == {"notes": ["example"], "count": 1}
    assert first["workspace"]["carried_over"] == {"thread": "t1", "version": 0}
    assert values(second) == {"notes": ["example", "example"], "count": 2}
    assert second["workspace"]["carried_over"] == {"thread": "t1", "version": first["workspace"]["version"]}
    assert values(third) == {"notes": ["example"] * 3, "count": 3}
    # the versions go on from the kept ones: every write of a later turn takes a higher number
    assert first["workspace"]["version"] < second["workspace"]["version"] < third["workspace"]["version"]
    assert third["workspace"]["entries"]["notes"]["version"] > second["workspace"]["entries"]["count"]["version"]
    assert third["workspace"]["entries"]["count"]["written_by"] == ["lead"]
    # another thread, and a run of no thread, start from the initial values
    assert values(other) == values(alone) == {"notes": ["example"], "count": 1}
    assert other["workspace"]["carried_over"] == {"thread": "t2", "version": 0}
    assert "carried_over" not in alone["workspace"]
    # the store keeps the thread's workspace with its turns
    shown = teamrun(tmp_path, "threads", "show", "t1", "--store", store_url, "--json")
    assert shown.returncode == 0, shown.stderr
    kept = json.loads(shown.stdout)["meta"]["workspace"]
    assert kept["version"] == third["workspace"]["version"]
    assert {e["entry"]: e["value"] for e in kept["entries"]} == values(third)


def test_persist_run_the_default_starts_every_turn_afresh(store_url: str, tmp_path: Path) -> None:
    write_team(tmp_path, persist=None)
    turn(tmp_path, store_url, "first")
    second = turn(tmp_path, store_url, "second")

    assert values(second) == {"notes": ["example"], "count": 1}
    assert "carried_over" not in second["workspace"]


def test_kept_values_the_team_file_now_refuses_start_afresh_with_a_warning(store_url: str, tmp_path: Path) -> None:
    write_team(tmp_path)
    turn(tmp_path, store_url, "first")
    before = turn(tmp_path, store_url, "second")
    assert values(before)["notes"] == ["example", "example"]
    # the team file changes between turns: at most one note, and no counter any more
    write_team(tmp_path, notes_schema="{type: array, items: {type: string}, maxItems: 1}", count=False)
    after = turn(tmp_path, store_url, "third")

    warnings = after["warnings"]
    assert (
        "workspace: the value of 'notes' kept by thread t1 is refused by the team file now (it does not satisfy "
        "the entry's schema: at the value: fails 'maxItems' (1)); 'notes' starts from its initial value"
    ) in warnings
    assert any("entry 'count' kept by thread t1 is no longer in the team file" in w for w in warnings), warnings
    assert values(after) == {"notes": ["example"]}  # started from [] again, then the turn's own write
    assert after["workspace"]["version"] > before["workspace"]["version"]  # versions still go on
    again = turn(tmp_path, store_url, "fourth")  # the next turn carries the new value: no warning
    assert again["warnings"] == []
    assert again["workspace"]["carried_over"]["version"] == after["workspace"]["version"]


def test_chat_turns_carry_the_workspace_and_show_it_then_execute_continues(store_url: str, tmp_path: Path) -> None:
    write_team(tmp_path)
    chat = teamrun(
        tmp_path,
        "chat",
        "team.yaml",
        "--model",
        "offline",
        "--store",
        store_url,
        "--thread",
        "c1",
        "--progress",
        "none",
        stdin="/workspace\nhello\n/workspace\nagain\n/workspace\n",
    )
    assert chat.returncode == 0, chat.stderr
    shown = chat.stderr
    assert "no turn has written the workspace yet" in shown
    first_at = shown.index("workspace of thread c1, version 2:")
    second_at = shown.index("workspace of thread c1, version 4:")
    assert first_at < second_at
    assert '  notes (version 1, written by lead): ["example"]' in shown[first_at:second_at]
    assert '  notes (version 3, written by lead): ["example", "example"]' in shown[second_at:]
    assert "  count (version 4, written by lead): 2" in shown[second_at:]
    # the second turn's offline lead read what the first turn wrote
    assert '"entry": "notes", "version": 1, "value": ["example"]' in chat.stdout

    continued = turn(tmp_path, store_url, "from execute", thread="c1")
    assert values(continued) == {"notes": ["example"] * 3, "count": 3}
    assert continued["workspace"]["carried_over"] == {"thread": "c1", "version": 4}

    later = teamrun(
        tmp_path,
        "chat",
        "team.yaml",
        "--store",
        store_url,
        "--thread",
        "c1",
        "--progress",
        "none",
        stdin="/workspace\n",
    )
    assert later.returncode == 0, later.stderr
    assert '  notes (version 5, written by lead): ["example", "example", "example"]' in later.stderr


def test_validate_refuses_a_persist_value_it_does_not_know(tmp_path: Path) -> None:
    write_team(tmp_path, persist="forever")
    checked = teamrun(tmp_path, "validate", "team.yaml")

    assert checked.returncode == 2, checked.stdout + checked.stderr
    refusal = 'team.yaml:5:12: error: workspace.persist must be one of "run", "thread", "resource", not "forever"'
    assert refusal in checked.stdout
