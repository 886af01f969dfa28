"""Ctrl-C during a fan-out: every running worker stops, finished work is still reported."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from typing import Any

from tests.fakeserver import FakeOpenAI, hang, text, tool_calls


def test_sigint_mid_fan_out_exits_130_with_the_finished_sibling(llm_server: FakeOpenAI, write_team: Any) -> None:
    llm_server.script("lead", [tool_calls(("ask_quick", {"task": "q"}), ("ask_slow", {"task": "s"}))])
    llm_server.script("quick", [text("quick answer")])
    llm_server.script("slow", [hang(60)])
    path = write_team("""\
        supervisor: lead
        agents:
          lead: {model: openai/lead, delegates_to: [quick, slow]}
          quick: {model: openai/quick, description: Answers at once.}
          slow: {model: openai/slow, description: Takes forever.}
        """)
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    process = subprocess.Popen(
        [sys.executable, "-c", "from teamrun.cli import main; main()", "execute", str(path), "-i", "go", "--json"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
    )
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            quick_done = any(r.model == "quick" and r.end for r in llm_server.requests())
            if quick_done and llm_server.requests("slow"):
                break
            time.sleep(0.05)
        else:
            raise AssertionError("the fan-out never started")
        time.sleep(0.3)  # let the quick worker's result land in the client
        started = time.monotonic()
        process.send_signal(signal.SIGINT)
        out, err = process.communicate(timeout=30)
    finally:
        process.kill()

    assert process.returncode == 130, err
    assert time.monotonic() - started < 10, "the hanging worker was cancelled, not waited for"
    result = json.loads(out)
    assert result["status"] == "cancelled"
    by_agent = {d["agent"]: d for d in result["delegations"]}
    assert by_agent["quick"]["status"] == "ok" and by_agent["quick"]["response"] == "quick answer"
    assert by_agent["slow"]["status"] == "cancelled"
    assert "quick answer" in result["final_text"]
    assert "Traceback" not in err
