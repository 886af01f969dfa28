"""Secrets never reach a trace, a cassette or a log line, content or not."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import teamrun
from teamrun.cli import main
from teamrun.secrets import Redactor
from tests.fakeserver import TEST_KEY, FakeOpenAI, text, tool_calls
from tests.observe.conftest import TeamWriter

SECRET = "sk-test-SECRET"
TEAM = """\
supervisor: lead
agents:
  lead: {model: openai/lead, delegates_to: [echo], instructions: "Service token: ${SERVICE_TOKEN}"}
  echo: {model: openai/echo, description: Repeats what it is told.}
"""


def _script(fake_openai: FakeOpenAI, leak: str) -> None:
    fake_openai.script("lead", [tool_calls(("ask_echo", {"task": f"repeat {leak}"})), text(f"done; it said {leak}")])
    fake_openai.script("echo", [text(f"you said {leak}")])


def test_cassette_trace_and_logs_hold_no_api_key(
    fake_openai: FakeOpenAI,
    write_team: TeamWriter,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    restore_structlog: None,
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    monkeypatch.setenv("SERVICE_TOKEN", "tok-interpolated-123")
    _script(fake_openai, SECRET)
    team = write_team(TEAM, key_env="OPENAI_API_KEY")
    trace_file, cassette = tmp_path / "run.jsonl", tmp_path / "run.cassette.jsonl"

    code = main(
        [
            "-v",
            "--log-format",
            "json",
            "execute",
            str(team),
            "-i",
            f"my key is {SECRET}",
            "--progress",
            "plain",
            "--trace",
            str(trace_file),
            "--trace-content",
            "--record",
            str(cassette),
        ]
    )

    _, err = capsys.readouterr()
    assert code == 0, err
    assert all(r.headers.get("authorization") == f"Bearer {SECRET}" for r in fake_openai.requests())  # it was in play
    assert "tok-interpolated-123" in fake_openai.requests("lead")[0].request["messages"][0]["content"]
    trace_text, cassette_text = trace_file.read_text(), cassette.read_text()
    for written in (trace_text, cassette_text, err):
        assert SECRET not in written
        assert "tok-interpolated-123" not in written
    assert "my key is ***" in trace_text  # content is there, masked
    assert "you said ***" in cassette_text
    assert "Authorization" not in cassette_text and "api_key" not in cassette_text


def test_api_recording_masks_the_team_files_secret_values(
    fake_openai: FakeOpenAI, write_team: TeamWriter, tmp_path: Path
) -> None:
    token = "tok-only-in-environ-42"
    _script(fake_openai, token)
    cassette = tmp_path / "api.cassette.jsonl"
    env = {"SERVICE_TOKEN": token, "TEAMRUN_TEST_KEY": TEST_KEY}

    result = teamrun.load_team(write_team(TEAM), environ=env, record=cassette).run_sync("go")

    assert result.status == "done" and token in result.final_text  # the answer is the caller's own
    assert token not in cassette.read_text()


def test_redactor_masks_nested_values_and_ignores_short_settings() -> None:
    redactor = Redactor(["hunter2-long"], environ={"MY_API_KEY": "abc123xyz", "DEBUG_TOKEN": "1", "HOME": "/root"})
    masked = redactor.value(
        {
            "a": ["x abc123xyz y", {"hunter2-long": "ok"}],
            "n": 3,
            "flag": "1",
            "home": "/root",
            "bearer": "Bearer abcdefghijklmnop",
        }
    )
    assert masked == {"a": ["x *** y", {"***": "ok"}], "n": 3, "flag": "1", "home": "/root", "bearer": "***"}


@pytest.mark.parametrize(
    "secret",
    ["hunter2-long", 'quote"inside', "back\\slash1", "tab\there1", "pässwörd-1", "sk-proj-abcdefghijklmnopqrstuv"],
)
@pytest.mark.parametrize("ensure_ascii", [True, False])
def test_redactor_dumps_writes_what_masking_then_dumping_writes(secret: str, ensure_ascii: bool) -> None:
    redactor = Redactor([secret], environ={})
    values = [
        {"plain": "nothing to hide", "n": 1.5, "none": None, "list": ["a", 2, True]},
        {"inside": f"x {secret} y", "nested": [{"deep": secret}]},
        {secret: "a key holding it", "t": ("tuple", secret)},
        {"shape": "Bearer abcdefghijklmnop", "key": "use sk-abcdefghijklmnopqrstuvwx"},
        {"near": "k- and Bearer alone", "unicode": "é ✓ \u2028"},
    ]
    for value in values:
        written = redactor.dumps(value, ensure_ascii=ensure_ascii)
        assert written == json.dumps(redactor.value(value), ensure_ascii=ensure_ascii)
        assert not any(secret in text for text in _strings(json.loads(written)))


def _strings(value: object) -> list[str]:
    """Every string of parsed JSON, keys included."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [text for key, item in value.items() for text in [key, *_strings(item)]]
    if isinstance(value, list):
        return [text for item in value for text in _strings(item)]
    return []
