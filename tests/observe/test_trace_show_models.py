"""``teamrun trace show --calls`` says which model answered a call a fallback answered, why, and the call's cached
input tokens (issue 45), as the run view does."""

from __future__ import annotations

from pathlib import Path

import pytest

from teamrun.cli import main
from tests.observe.handmade import line, write_trace

WHY = "openai/backup after openai/primary failed: server error (HTTP 500)"


def test_trace_show_calls_names_the_answering_model_the_fallback_and_cached_tokens(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lead = ["lead"]
    fell = {"input_tokens": 120, "output_tokens": 3, "total_tokens": 123, "cached_tokens": 96}
    plain = {"input_tokens": 40, "output_tokens": 10, "total_tokens": 50}
    both = {"input_tokens": 160, "output_tokens": 13, "total_tokens": 173, "cached_tokens": 96}
    trace = write_trace(
        tmp_path / "run.jsonl",
        [
            line("run_start", 0.0, span="s1", team="t"),
            line("agent_start", 0.0, span="s2", parent="s1", path=lead, model="openai/primary"),
            line("llm_start", 1.0, span="c1", parent="s2", path=lead, model="openai/primary"),
            line(
                "llm_end",
                2.0,
                span="c1",
                parent="s2",
                path=lead,
                status="ok",
                usage=fell,
                model="openai/backup",
                fallback=WHY,
            ),
            line("llm_start", 3.0, span="c2", parent="s2", path=lead, model="openai/primary"),
            line("llm_end", 4.0, span="c2", parent="s2", path=lead, status="ok", usage=plain, model="openai/primary"),
            line("agent_end", 4.0, span="s2", parent="s1", path=lead, status="ok", usage=both),
            line("run_end", 4.0, span="s1", status="done", usage=both),
        ],
    )
    assert main(["trace", "show", str(trace), "--calls"]) == 0
    shown = [c.strip(" │├└─") for c in capsys.readouterr().out.splitlines()]
    calls = [c for c in shown if c.split()[1:2] == ["llm"]]
    assert len(calls) == 2
    assert calls[0].startswith("✓ llm openai/backup  ok  1.00s  123 tok (96 cached)")
    assert calls[0].endswith(f"  fallback: {WHY}")
    assert calls[1].startswith("✓ llm openai/primary  ok  1.00s  50 tok  ")
    assert "fallback" not in calls[1] and "cached" not in calls[1]
