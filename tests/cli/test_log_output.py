"""What `teamrun execute` prints on stderr under the global log options: `--log-format json`, `-q`, retries."""

from __future__ import annotations

import json
import os
import re
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
import structlog

from teamrun.cli import main
from tests.fakeserver import FakeOpenAI, http_error, text, tool_calls

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

OFFLINE_TEAM = """\
    version: 1
    name: log-team
    supervisor: lead
    defaults: {model: offline}
    agents:
      lead: {description: Leads., delegates_to: [alpha]}
      alpha: {description: Looks things up.}
    """

RETRY_TEAM = """\
    version: 1
    name: backoff-team
    defaults: {{api_base: "{url}", request_timeout_s: 10}}
    supervisor: lead
    agents:
      lead: {{model: openai/lead, delegates_to: [alpha], num_retries: 0}}
      alpha: {{model: openai/alpha, description: Retries once., num_retries: 1}}
    """


@pytest.fixture(autouse=True)
def restore_structlog() -> Iterator[None]:
    """CLI runs configure structlog for the (captured) stderr; put it back after."""
    saved = structlog.get_config()
    try:
        yield
    finally:
        structlog.configure(**saved)


@pytest.fixture
def offline_team(tmp_path: Path) -> Path:
    path = tmp_path / "team.yaml"
    path.write_text(textwrap.dedent(OFFLINE_TEAM), encoding="utf-8")
    return path


@pytest.fixture
def retry_team(tmp_path: Path, fake_openai: FakeOpenAI) -> Path:
    fake_openai.script("lead", [tool_calls(("ask_alpha", {"task": "a"})), text("lead answer")])
    fake_openai.script("alpha", [http_error(429, retry_after=0), text("alpha answer")])
    path = tmp_path / "retry.yaml"
    path.write_text(textwrap.dedent(RETRY_TEAM.format(url=fake_openai.url)), encoding="utf-8")
    return path


def test_json_log_format_prints_one_json_line_per_event(offline_team: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["--log-format", "json", "execute", str(offline_team), "-i", "go"])

    out, err = capsys.readouterr()
    assert code == 0 and out.strip()
    lines = [json.loads(line) for line in err.splitlines()]  # every stderr line is JSON
    assert lines and all(isinstance(line.get("event"), str) for line in lines)
    assert lines[0]["event"] == "run_starting" and lines[0]["message"].startswith("starting ")
    lines = lines[1:]  # the rest are the run's events
    kinds = [line["event"] for line in lines]
    assert kinds[0] == "run_start" and kinds[-1] == "run_end"
    assert {"agent_start", "agent_end", "delegation_start", "delegation_end", "llm_start", "llm_end"} <= set(kinds)
    run_ids = {line["run_id"] for line in lines}
    assert len(run_ids) == 1
    (worker,) = [line for line in lines if line["event"] == "agent_start" and line["agent"] == "alpha"]
    assert worker["agent_path"] == "lead/alpha"
    (delegation,) = [line for line in lines if line["event"] == "delegation_start"]
    assert worker["parent_span_id"] == delegation["span_id"]
    assert all("task" not in line and "input" not in line for line in lines), "no content in logs"


def test_json_log_format_reports_a_failed_run_as_json_too(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "budget.yaml"
    path.write_text(textwrap.dedent(OFFLINE_TEAM) + "limits: {max_total_tokens: 1}\n", encoding="utf-8")

    code = main(["--log-format", "json", "execute", str(path), "-i", "go"])

    _, err = capsys.readouterr()
    assert code == 3
    lines = [json.loads(line) for line in err.splitlines()]
    (note,) = [line for line in lines if line["event"] == "run_not_done"]
    assert note["status"] == "budget_exhausted" and note["level"] == "error"


def test_quiet_prints_no_progress_lines(offline_team: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["-q", "execute", str(offline_team), "-i", "go"])

    out, err = capsys.readouterr()
    assert code == 0 and out.strip()
    assert err == ""


def test_quiet_still_shows_progress_asked_for_by_name(offline_team: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["-q", "execute", str(offline_team), "-i", "go", "--progress", "plain"]) == 0

    assert "lead: started (offline)" in capsys.readouterr().err


def test_one_retry_is_one_line(retry_team: Path, fake_openai: FakeOpenAI, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["execute", str(retry_team), "-i", "go", "--progress", "plain"])

    out, err = capsys.readouterr()
    assert code == 0 and out == "lead answer\n"
    mentions = [line for line in err.splitlines() if re.search("retry", line, re.IGNORECASE)]
    assert len(mentions) == 1, err
    assert "alpha: model call retry 1 after" in mentions[0] and "429" in mentions[0]
    fake_openai.assert_complete()


def test_one_retry_is_one_json_line(
    retry_team: Path, fake_openai: FakeOpenAI, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["--log-format", "json", "execute", str(retry_team), "-i", "go"])

    _, err = capsys.readouterr()
    assert code == 0
    lines = [json.loads(line) for line in err.splitlines()]
    retries = [line for line in lines if "retry" in line["event"]]
    assert len(retries) == 1, retries
    (retry,) = retries
    assert retry["event"] == "llm_retry" and retry["level"] == "warning"
    assert retry["attempt"] == 1 and retry["status_code"] == 429 and retry["agent"] == "alpha"
    (llm_start,) = [line for line in lines if line["event"] == "llm_start" and line["span_id"] == retry["span_id"]]
    assert llm_start["agent"] == "alpha"  # the retry belongs to the model call's span


@pytest.mark.parametrize(
    ("argv", "event", "message"),
    [
        (["execute"], "usage_error", "Missing argument 'TEAM_FILE'."),  # click's own usage error
        (["bogus"], "usage_error", "No such command 'bogus'."),  # before the group's options took effect
        (["execute", "/no/such/team.yaml", "-i", "go"], "config_error", "/no/such/team.yaml:1:1: error: no such file"),
        (["threads", "show", "nope", "--store", "STORE"], "usage_error", "no thread 'nope': there is no store at "),
    ],
)
def test_json_log_format_says_errors_as_json_lines(
    argv: list[str], event: str, message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = [str(tmp_path / "t.db") if a == "STORE" else a for a in argv]
    for form in (["--log-format", "json"], ["--log-format=json"]):
        code = main([*form, *argv])

        out, err = capsys.readouterr()
        assert (code, out) == (2, "")
        (line,) = [json.loads(text_) for text_ in err.splitlines()]  # nothing but one JSON line
        assert (line["event"], line["level"], line["exit_code"]) == (event, "error", 2)
        assert line["message"].startswith(message)
    assert main(argv) == 2  # without the option: text as before
    assert not capsys.readouterr().err.startswith("{")
