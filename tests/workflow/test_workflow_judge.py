"""A loop's `until: judge` through the CLI against the fake provider: a judge that cannot judge ends the loop at
once (as an `accept:` judge ends the attempts), and the accept event says `failed`, not `retry`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from teamrun.cli import main
from tests.fakeserver import FakeOpenAI, text
from tests.judged_teams import LOOPED


def test_a_loop_whose_judge_cannot_judge_ends_at_once_with_a_failed_accept(
    fake_openai: FakeOpenAI, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "team.yaml"
    path.write_text(LOOPED, encoding="utf-8")
    trace = tmp_path / "trace.jsonl"
    fake_openai.script("fake", [text("hello"), text("I would rather not grade this.")])

    code = main(["execute", str(path), "--input", "greet", "--trace", str(trace), "--progress", "none"])

    out = capsys.readouterr()
    assert code == 0, out.err
    assert out.out.strip() == "hello"
    assert len(fake_openai.requests("fake")) == 2  # one draft, one judge: no second iteration
    assert "without passing" in out.err and "no score" in out.err
    events = [json.loads(line) for line in trace.read_text(encoding="utf-8").splitlines()]
    accepts = [e["data"]["status"] for e in events if e["kind"] == "accept"]
    assert accepts == ["failed"]
    fake_openai.assert_complete()
