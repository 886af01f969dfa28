"""Ctrl-C during a fan-out: every running worker stops, finished work is still reported."""

from __future__ import annotations

import json
import signal
import subprocess
from typing import Any

from tests.cli_processes import child_env, running, teamrun_argv
from tests.fakeserver import FakeOpenAI, hang, text, tool_calls
from tests.waiting import wait_until


def test_sigint_mid_fan_out_exits_130_with_the_finished_sibling(fake_openai: FakeOpenAI, write_team: Any) -> None:
    fake_openai.script("lead", [tool_calls(("ask_quick", {"task": "q"}), ("ask_slow", {"task": "s"}))])
    fake_openai.script("quick", [text("quick answer")])
    fake_openai.script("slow", [hang(600)])  # the server stops waiting when the test ends
    path = write_team("""\
        supervisor: lead
        agents:
          lead: {model: openai/lead, delegates_to: [quick, slow]}
          quick: {model: openai/quick, description: Answers at once.}
          slow: {model: openai/slow, description: Takes forever.}
        """)
    argv = teamrun_argv("execute", str(path), "-i", "go", "--json", "--progress", "plain")
    with running(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=child_env()) as process:
        # Interrupt once the quick worker's answer has reached the run (its progress line says so)
        # while the slow worker's request is open at the server.
        assert process.stderr is not None
        seen: list[str] = []
        for line in process.stderr:  # ends at EOF if the run ends first
            seen.append(line)
            if "lead \N{SINGLE RIGHT-POINTING ANGLE QUOTATION MARK} quick: ok" in line:
                break
        else:
            raise AssertionError("the quick worker never finished:\n" + "".join(seen))
        wait_until(lambda: fake_openai.requests("slow"), "the slow worker's call at the server", alive=process)
        process.send_signal(signal.SIGINT)
        out, rest = process.communicate(timeout=120)  # a hang guard only
        err = "".join(seen) + rest

    assert process.returncode == 130, err
    (slow,) = fake_openai.requests("slow")
    assert slow.end == 0.0, "the run ended while the slow worker's request was still open: cancelled, not waited for"
    result = json.loads(out)
    assert result["status"] == "cancelled"
    by_agent = {d["agent"]: d for d in result["delegations"]}
    assert by_agent["quick"]["status"] == "ok" and by_agent["quick"]["response"] == "quick answer"
    assert by_agent["slow"]["status"] == "cancelled"
    assert "quick answer" in result["final_text"]
    assert "Traceback" not in err
