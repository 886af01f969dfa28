"""`teamrun threads show` masks a `secret: true` person's answer as `teamrun runs show` does (attack report a42,
D6): the chat turn asked, was answered later with `teamrun answer`, and the thread's answer quotes the secret."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from teamrun.cli import main
from teamrun.store import open_store
from tests.cli_processes import child_env, teamrun_argv

TEAM = """version: 1
name: sec
supervisor: desk
defaults: {model: offline}
agents:
  desk: {tools: [ask_token], budget: {max_steps: 3}}
tools:
  ask_token: {person: {secret: true}}
"""
SECRET = "tok-SuperSecret-42"


def test_threads_show_masks_a_secret_answer_the_thread_quotes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
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
    run_id = json.loads(
        subprocess.run(
            teamrun_argv("runs", "list", "--store", store, "--json"),
            capture_output=True,
            text=True,
            env=child_env(),
            timeout=300,
        ).stdout
    )[0]["run_id"]
    assert main(["answer", run_id, "q1", SECRET, "--store", store, "--progress", "none"]) == 0
    capsys.readouterr()
    assert any(SECRET in str(m.content) for m in open_store(store).threads.messages("st"))  # the model's history

    assert main(["threads", "show", "st", "--store", store]) == 0
    shown = capsys.readouterr().out
    assert main(["threads", "show", "st", "--store", store, "--json"]) == 0
    as_json = capsys.readouterr().out
    assert main(["runs", "show", run_id, "--store", store]) == 0
    run = capsys.readouterr().out

    assert SECRET not in run and "ask_token: ***" in run
    assert SECRET not in shown and "ask_token: ***" in shown
    assert SECRET not in as_json
