"""A chat turn that waited for a person continues as itself when it is answered later (issue 42, item 1).

`printf 'ONCE please\\nPLAIN question\\n/exit\\n' | teamrun chat ask.yaml --store c.db --thread t2`: the first turn
asks a person and suspends, the chat goes on with the second; `teamrun answer RUN q1 blue` then continued the first
turn with the second one in its history, so its finished first call no longer matched the journal and was paid
again, and the thread filed it after "PLAIN question" as if it had been asked last.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.fakeserver import FakeOpenAI, Reply, text, tool_calls


def _team(tmp_path: Path, url: str) -> Path:
    path = tmp_path / "ask.yaml"
    path.write_text(
        f"""version: 1
name: ask
supervisor: clerk
defaults: {{api_base: '{url}', api_key_env: TEAMRUN_TEST_KEY, num_retries: 0}}
tools:
  ask_person: {{person: {{}}}}
agents:
  clerk: {{model: openai/clerk, tools: [ask_person]}}
""",
        encoding="utf-8",
    )
    return path


def _clerk(request: dict[str, Any]) -> Reply:
    """Asks a person for "ONCE please", answers plainly otherwise; says the person's answer once it has it."""
    messages = request["messages"]
    last_user = next(m["content"] for m in reversed(messages) if m["role"] == "user")
    if messages[-1]["role"] == "tool":
        return text(f"the person said {messages[-1]['content']}")
    if "ONCE please" in last_user:
        return tool_calls(("ask_person", {"question": "Which colour?"}))
    return text("a plain answer")


def _teamrun(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    env.pop("TEAMRUN_STORE", None)
    return subprocess.run(
        [sys.executable, "-c", "from teamrun.cli import main; main()", *args],
        input=stdin,
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )


def test_a_suspended_chat_turn_answered_later_continues_as_itself(tmp_path: Path, fake_openai: FakeOpenAI) -> None:
    fake_openai.handler("clerk", _clerk)
    team = _team(tmp_path, fake_openai.url)
    store = str(tmp_path / "c.db")

    chat = _teamrun(
        "chat",
        str(team),
        "--store",
        store,
        "--thread",
        "t2",
        "--progress",
        "none",
        stdin="ONCE please\nPLAIN question\n/exit\n",
    )
    assert chat.returncode == 0, chat.stderr
    assert "a plain answer" in chat.stdout  # the chat went on after the first turn suspended
    runs = json.loads(_teamrun("runs", "list", "--store", store, "--json").stdout)
    [waiting] = [run for run in runs if run["status"] == "waiting"]
    asked = len(fake_openai.requests("clerk"))
    assert asked == 2  # the first turn's question, the second turn

    answered = _teamrun("answer", waiting["run_id"], "q1", "blue", "--store", store, "--progress", "none")

    assert answered.returncode == 0, answered.stderr
    assert "the person said blue" in answered.stdout
    requests = fake_openai.requests("clerk")
    assert len(requests) == asked + 1, [r.request["messages"] for r in requests]  # only the call after the answer
    resumed = requests[-1].request["messages"]
    assert "PLAIN question" not in json.dumps(resumed)  # its own history, as when it was asked
    assert [m["role"] for m in resumed][1:] == ["user", "assistant", "tool"]

    shown = json.loads(_teamrun("threads", "show", "t2", "--store", store, "--json").stdout)
    users = [m["content"] for m in shown["messages"] if m["role"] == "user"]
    assert users[0] == "PLAIN question"  # the second turn was filed first: it ended first
    assert users[1].startswith("ONCE please") and "asked before turn 1" in users[1], users  # and said so
