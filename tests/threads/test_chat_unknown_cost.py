"""`teamrun chat` says a model without a price once, in the turn's summary (attack report a42, D13): with
stderr not a terminal it said it twice, an `llm_cost_unknown` log line and the summary (`execute` says it
once already)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.fakeserver import FakeOpenAI, text


def test_chat_with_plain_progress_says_an_unknown_cost_once(tmp_path: Path, fake_openai: FakeOpenAI) -> None:
    fake_openai.script("chat_unpriced_9c2e", [text("hello back")])
    team = tmp_path / "team.yaml"
    team.write_text(
        "version: 1\nname: unpriced\nsupervisor: clerk\n"
        f"defaults: {{api_base: '{fake_openai.url}', api_key_env: TEAMRUN_TEST_KEY, num_retries: 0}}\n"
        "agents:\n  clerk: {model: openai/chat_unpriced_9c2e}\n",
        encoding="utf-8",
    )
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "TEAMRUN_TEST_KEY": "sk-test-not-used-000000"}
    env.pop("TEAMRUN_STORE", None)

    store = ["--store", str(tmp_path / "c.db")]
    chat = subprocess.run(
        [
            sys.executable,
            "-c",
            "from teamrun.cli import main; main()",
            "chat",
            str(team),
            *store,
            "--progress",
            "plain",
        ],
        input="hello\n",
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )

    assert chat.returncode == 0, chat.stderr
    assert "hello back" in chat.stdout
    assert "llm_cost_unknown" not in chat.stderr, chat.stderr
    said = [line for line in chat.stderr.splitlines() if "cost unknown" in line]
    assert len(said) == 1 and "openai/chat_unpriced_9c2e" in said[0], chat.stderr
