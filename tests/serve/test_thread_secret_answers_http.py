"""`GET /v1/threads/{id}` masks a `secret: true` person's answer as `teamrun threads show` does (attack report a42,
D6: the HTTP read gave the thread's messages as the model reads them, the secret in clear)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import httpx
import pytest

import teamrun
from teamrun.cli import main
from teamrun.store import open_store
from tests.cli_processes import child_env, teamrun_argv
from tests.threads.test_thread_secret_answers import SECRET, TEAM


def test_the_served_thread_masks_a_secret_answer(
    serve: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    team = tmp_path / "sec.yaml"
    team.write_text(TEAM, encoding="utf-8")
    store = str(tmp_path / "c.db")
    chat = subprocess.run(
        teamrun_argv("chat", str(team), "--store", store, "--thread", "st", "--progress", "none"),
        input="need token\n",
        capture_output=True,
        text=True,
        env=child_env(),
        timeout=300,
    )
    assert "q1" in chat.stderr, chat.stderr
    assert main(["runs", "list", "--store", store, "--json"]) == 0
    run_id = json.loads(capsys.readouterr().out)[0]["run_id"]
    assert main(["answer", run_id, "q1", SECRET, "--store", store, "--progress", "none"]) == 0
    assert any(SECRET in str(m.content) for m in open_store(store).threads.messages("st"))  # the model's history

    served = serve([teamrun.load_team(team, store=open_store(store))], store=open_store(store))
    with httpx.Client(base_url=served.url, timeout=60) as client:
        thread = client.get("/v1/threads/st")

    assert thread.status_code == 200, thread.text
    assert SECRET not in thread.text
    assert "***" in thread.text
