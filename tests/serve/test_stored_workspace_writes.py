"""A run the CLI journaled with --store (first run and `teamrun resume` alike) is served from the store with its
writes, read from its journal: `GET /v1/runs/{id}/workspace` listed `writes: []` for it (they came only from the
events a server keeps)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest

import teamrun
from teamrun.cli import main
from teamrun.store import open_store
from tests.fakeserver import FakeOpenAI, text, tool_calls

TEAM = """\
version: 1
name: stored-ws
supervisor: lead
defaults: {api_key_env: TEAMRUN_TEST_KEY, num_retries: 0}
workspace:
  entries:
    notes: {schema: {type: array, items: {type: string}}, merge: append, write: [lead]}
    count: {schema: {type: integer}, merge: sum, write: [lead]}
agents:
  lead: {model: openai/lead}
"""


def test_a_cli_run_s_stored_workspace_lists_every_write(
    serve: Any,
    tmp_path: Path,
    fake_openai: FakeOpenAI,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.delenv("TEAMRUN_STORE", raising=False)
    team = tmp_path / "team.yaml"
    team.write_text(TEAM, encoding="utf-8")
    db = tmp_path / "runs.db"
    fake_openai.script(
        "lead",
        [
            tool_calls(("workspace_write_notes", {"items": ["first"]})),
            tool_calls(("workspace_write_count", {"value": 2}), ("workspace_write_notes", {"items": [7]})),
            text("done"),
        ],
    )
    argv = ["execute", str(team), "-i", "go", "--store", str(db), "--json", "--progress", "none"]
    assert main(argv) == 0
    run_id = json.loads(capsys.readouterr().out)["run_id"]

    store = open_store(db)
    server = serve([teamrun.load_team(team, store=store)], store=store)
    with httpx.Client(base_url=server.url, timeout=60) as client:
        answer = client.get(f"/v1/runs/{run_id}/workspace").json()
        later = client.get(f"/v1/runs/{run_id}/workspace", params={"since": 1}).json()

    assert answer["source"] == "store" and answer["version"] == 2
    assert answer["entries"]["notes"]["value"] == ["first"] and answer["entries"]["count"]["value"] == 2
    writes = [(w["entry"], w["status"], w["reason"], w["version_after"], w["writer"]) for w in answer["writes"]]
    assert writes == [
        ("notes", "applied", None, 1, "lead"),
        ("count", "applied", None, 2, "lead"),
        ("notes", "refused", "schema", 1, "lead"),
    ]
    assert [w["workspace_version"] for w in answer["writes"]] == [0, 1, 2]
    assert [w["entry"] for w in later["writes"]] == ["count", "notes"]
