"""Attack a44b item 2: a resumed run keeps its working-memory changes when another run of the resource ended
meanwhile.

Run A loads the resource's working memory, writes to it and is SIGKILLed before its answer; run B of the same
resource loads, writes and ends. Resumed, A loads what it loaded as it first started (its journal), not the
record B left: its changes are measured from that, so they are applied on top of B's, and A's own result shows
them. (Loading the record as it was at the resume made A's workspace B's record: both its changes were lost.)
"""

from __future__ import annotations

import asyncio
import json
import threading
from pathlib import Path
from typing import Any

import pytest

from teamrun.cli import main
from teamrun.engine.team import load_team
from teamrun.store import open_store
from teamrun.store.memory import MemoryStore
from teamrun.testing.scripted import ScriptedModel, tool_call
from tests.cli_processes import listed_run, resume, stop_when, teamrun_argv
from tests.fakeserver import FakeOpenAI, Reply, text, tool_calls

TEAM = """\
version: 1
name: desk
supervisor: support
defaults: {{api_base: '{url}', api_key_env: TEAMRUN_TEST_KEY, num_retries: 0, request_timeout_s: 900}}
agents:
  support:
    model: openai/support
    instructions: Help the customer.
workspace:
  persist: resource
  entries:
    notes: {{schema: {{type: array, items: {{type: string}}}}, merge: append, write: [support]}}
    visits: {{schema: {{type: integer}}, merge: sum, write: [support]}}
    profile: {{schema: {{type: object}}, merge: merge, write: [support]}}
"""


def _kept(store: Path) -> dict[str, Any]:
    with open_store(store) as opened:
        return {name: value for name, (_v, value) in MemoryStore(opened).load_working("cust-A", "desk").items()}


def test_a_run_resumed_after_another_run_of_its_resource_ended_keeps_its_working_memory_changes(
    tmp_path: Path, fake_openai: FakeOpenAI
) -> None:
    server, store, team = fake_openai, tmp_path / "teamrun.db", tmp_path / "desk.yaml"
    team.write_text(TEAM.format(url=server.url))
    with open_store(store) as opened:
        MemoryStore(opened).save_working("cust-A", "desk", "notes", 1, ["seed"])
        MemoryStore(opened).save_working("cust-A", "desk", "visits", 1, 10)
        MemoryStore(opened).save_working("cust-A", "desk", "profile", 1, {"plan": "gold"})

    hanging = threading.Event()
    hanging.set()

    def answer(request: Any) -> Reply:
        if not any(m.get("role") == "tool" for m in request["messages"]):  # the first call: it writes
            return tool_calls(
                ("workspace_write_notes", {"items": ["A"]}),
                ("workspace_write_visits", {"value": 1}),
                ("workspace_write_profile", {"value": {"tone": "A"}, "version": 0}),
            )
        return text("Noted A.", delay=600.0 if hanging.is_set() else None)

    server.handler("support", answer)
    argv = teamrun_argv("execute", str(team), "-i", "note A", "--store", str(store), "--progress", "none")
    stop_when(
        [*argv, "--resource", "cust-A"],
        lambda: len(server.requests("support")) == 2,  # wrote (journaled), asked for its answer
        where=lambda: f"{len(server.requests('support'))} model call(s)",
    )
    killed = listed_run(str(store))
    assert killed["status"] == "interrupted"

    other = ScriptedModel(
        {
            "support": [
                tool_call("workspace_write_notes", items=["B"]),
                tool_call("workspace_write_visits", value=5),
                tool_call("workspace_write_profile", value={"channel": "B"}, version=0),
                "Noted B.",
            ]
        }
    )
    b = asyncio.run(load_team(team, chat_model=other, store=store).run("note B", resource="cust-A"))
    assert b.status == "done"
    assert _kept(store) == {"notes": ["seed", "B"], "visits": 15, "profile": {"plan": "gold", "channel": "B"}}

    hanging.clear()
    resumed = resume(killed["run_id"], str(store), "--yes")
    assert resumed.returncode == 0, resumed.stderr
    result = json.loads(resumed.stdout)
    assert result["status"] == "done" and result["final_text"] == "Noted A."
    own = {name: entry["value"] for name, entry in result["workspace"]["entries"].items()}
    assert own == {"notes": ["seed", "A"], "visits": 11, "profile": {"plan": "gold", "tone": "A"}}
    assert _kept(store) == {
        "notes": ["seed", "B", "A"],
        "visits": 16,
        "profile": {"plan": "gold", "channel": "B", "tone": "A"},
    }


ASKING_TEAM = TEAM.replace(
    "agents:\n  support:\n", "tools:\n  ask_op: {{person: {{}}}}\nagents:\n  support:\n    tools: [ask_op]\n"
)


def test_a_run_answered_after_another_run_of_its_resource_ended_keeps_its_working_memory_changes(
    tmp_path: Path, fake_openai: FakeOpenAI, capsys: pytest.CaptureFixture[str]
) -> None:
    """The same with a run that waited for a person (``teamrun answer`` continues it from its journal)."""
    server, store, team = fake_openai, tmp_path / "teamrun.db", tmp_path / "desk.yaml"
    team.write_text(ASKING_TEAM.format(url=server.url))
    with open_store(store) as opened:
        MemoryStore(opened).save_working("cust-A", "desk", "notes", 1, ["seed"])
        MemoryStore(opened).save_working("cust-A", "desk", "visits", 1, 10)
    server.script(
        "support",
        [
            tool_calls(("workspace_write_notes", {"items": ["A"]}), ("workspace_write_visits", {"value": 1})),
            tool_calls(("ask_op", {"question": "May I?"})),
            text("Noted A."),
        ],
    )
    argv = ["execute", str(team), "-i", "note A", "--store", str(store), "--json", "--progress", "none"]
    assert main([*argv, "--resource", "cust-A", "--detach"]) == 4  # waiting for the operator
    run_id = json.loads(capsys.readouterr().out)["run_id"]

    other = ScriptedModel(
        {
            "support": [
                tool_call("workspace_write_notes", items=["B"]),
                tool_call("workspace_write_visits", value=5),
                "B.",
            ]
        }
    )
    b = asyncio.run(load_team(team, chat_model=other, store=store).run("note B", resource="cust-A"))
    assert b.status == "done"
    assert _kept(store) == {"notes": ["seed", "B"], "visits": 15}

    assert main(["answer", run_id, "q1", "yes", "--store", str(store), "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["status"] == "done" and result["final_text"] == "Noted A."
    assert {name: entry["value"] for name, entry in result["workspace"]["entries"].items()} == {
        "notes": ["seed", "A"],
        "visits": 11,
        "profile": {},
    }
    assert _kept(store) == {"notes": ["seed", "B", "A"], "visits": 16}
    server.assert_complete()
