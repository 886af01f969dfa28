"""The default progress on stderr masks the run's secrets as the trace does: a refusal of the argument boundary
names an argument's key, and a model may send a secret as one (`data.<secret>`)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from teamrun.cli import main
from tests.fakeserver import FakeOpenAI, text, tool_calls

SECRET = "tok-abcdef1234567890XYZsecret"
TEAM = """\
version: 1
name: sec
supervisor: lead
defaults: {api_key_env: TEAMRUN_TEST_KEY, num_retries: 0}
workspace:
  entries:
    notes: {schema: {type: array}, merge: append, write: [lead]}
agents:
  lead: {model: openai/lead, instructions: "Token ${MY_TOKEN}"}
"""


def test_a_secret_an_argument_refusal_names_is_masked_on_the_console_as_in_the_trace(
    tmp_path: Path,
    fake_openai: FakeOpenAI,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("MY_TOKEN", SECRET)
    team = tmp_path / "team.yaml"
    team.write_text(TEAM, encoding="utf-8")
    refused = tool_calls(("workspace_write_notes", '{"items": [1], "' + SECRET + '": 1e999}'))
    fake_openai.script("lead", [refused, text("done")])
    trace = tmp_path / "trace.jsonl"

    code = main(["execute", str(team), "-i", "go", "--progress", "plain", "--trace", str(trace)])

    err = capsys.readouterr().err
    assert code == 0, err
    fake_openai.assert_complete()
    traced = [json.loads(line) for line in trace.read_text(encoding="utf-8").splitlines()]
    refusal = next(r for r in traced if r.get("kind") == "tool_end" and r["data"].get("status") == "error")
    assert "arguments refused" in refusal["data"]["error"] and SECRET not in json.dumps(traced)  # the trace masks
    assert "arguments refused (number)" in err and SECRET not in err  # the line is there, with the key masked
