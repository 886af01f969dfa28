"""What a team's model requests carry and how their failures read, through ``load_team(...).run_sync``
against the local fake server (LiteLLM's real HTTP path)."""

from __future__ import annotations

import asyncio
import textwrap
from pathlib import Path
from typing import Any

import pytest

import teamrun
from teamrun.defaults import DEFAULT_MAX_TOKENS, DEFAULT_NUM_RETRIES
from teamrun.errors import UsageError
from teamrun.events import Event
from tests.fakeserver import FakeOpenAI, hang, http_error, text


def team_file(
    tmp_path: Path, server: FakeOpenAI, defaults: str = "", agent: str = "", model: str = "openai/solo"
) -> Path:
    """A one-agent team on ``server``; ``defaults`` / ``agent`` add YAML lines to those mappings."""
    body = textwrap.dedent("""\
        version: 1
        name: one
        supervisor: solo
        defaults:
          api_base: {url}
        {defaults}
        agents:
          solo:
            model: {model}
        {agent}
        """)
    indent = "  "
    text_ = body.format(
        url=server.url,
        model=model,
        defaults=textwrap.indent(textwrap.dedent(defaults), indent).rstrip(),
        agent=textwrap.indent(textwrap.dedent(agent), indent * 2).rstrip(),
    )
    path = tmp_path / "team.yaml"
    path.write_text(text_, encoding="utf-8")
    return path


def run(path: Path) -> tuple[teamrun.RunResult, list[Event]]:
    events: list[Event] = []
    result = teamrun.load_team(path).run_sync("Compare two phones.", subscribers=[events.append])
    return result, events


# -- issue 11.3: request timeout, retried ----------------------------------------------------
def test_a_hanging_request_times_out_and_is_retried(tmp_path: Path, fake_openai: FakeOpenAI) -> None:
    fake_openai.script("solo", [hang(60), text("after the hang")])

    result, events = run(team_file(tmp_path, fake_openai, "request_timeout_s: 0.5\nnum_retries: 1"))

    assert result.status == "done" and result.final_text == "after the hang"
    first, second = fake_openai.requests("solo")
    assert first.end == 0.0 or second.start < first.end, "the retry went out while the first request still hung"
    retries = [e for e in events if e.kind == "llm_retry"]
    assert len(retries) == 1
    assert retries[0].status_code is None  # a client-side timeout, not the server's 504
    fake_openai.assert_complete()


def test_without_request_timeout_s_the_default_timeout_applies(
    tmp_path: Path, fake_openai: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("teamrun.llm.adapter.DEFAULT_REQUEST_TIMEOUT_S", 0.5)  # not 120 s in a test
    fake_openai.script("solo", [hang(60), text("after the hang")])

    result, events = run(team_file(tmp_path, fake_openai))

    assert result.status == "done" and result.final_text == "after the hang"
    first, second = fake_openai.requests("solo")
    assert first.end == 0.0 or second.start < first.end
    (retry,) = [e for e in events if e.kind == "llm_retry"]
    assert retry.status_code is None
    assert retry.max_attempts == DEFAULT_NUM_RETRIES + 1  # the team set no num_retries


# -- issue 11.5: max_tokens per call ---------------------------------------------------------
@pytest.mark.parametrize(
    ("defaults", "agent", "expected"),
    [
        ("", "", DEFAULT_MAX_TOKENS),
        ("max_tokens: 55", "", 55),
        ("max_tokens: 55", "max_tokens: 77", 77),
        ("", "model_params: {max_tokens: 33}", 33),
    ],
    ids=["default", "from-defaults", "agent-wins", "model-params"],
)
def test_every_request_carries_max_tokens(
    tmp_path: Path, fake_openai: FakeOpenAI, defaults: str, agent: str, expected: int
) -> None:
    fake_openai.script("solo", [text("fine")])

    result, _ = run(team_file(tmp_path, fake_openai, defaults, agent))

    assert result.status == "done"
    assert fake_openai.requests("solo")[0].request["max_tokens"] == expected


# -- issue 11.8: context window overflow -----------------------------------------------------
OVERFLOW = (
    "This model's maximum context length is 8192 tokens. However, your messages resulted in "
    "9000 tokens. Please reduce the length of the messages."
)


def test_context_overflow_names_agent_tokens_window_and_the_fix(tmp_path: Path, fake_openai: FakeOpenAI) -> None:
    fake_openai.script("solo", [http_error(400, message=OVERFLOW, code="context_length_exceeded")])

    result, _ = run(team_file(tmp_path, fake_openai, "num_retries: 2"))

    assert result.status == "failed"
    error = result.error or ""
    assert "agent 'solo'" in error
    assert "9,000 tokens were sent" in error and "context window is 8,192 tokens" in error
    assert "message_filter" in error and "max_tokens" in error
    assert len(fake_openai.requests("solo")) == 1, "an overflow is not retried"


def test_context_overflow_without_numbers_estimates_them(tmp_path: Path, fake_openai: FakeOpenAI) -> None:
    """The provider gives no figures: tokens are counted with LiteLLM, the window comes from its table."""
    fake_openai.script("gpt-4o-mini", [http_error(400, message="Input too long.", code="context_length_exceeded")])

    result, _ = run(team_file(tmp_path, fake_openai, model="openai/gpt-4o-mini"))

    error = result.error or ""
    assert result.status == "failed"
    assert "agent 'solo'" in error
    assert "about " in error and " tokens were sent" in error
    assert "context window is 128,000 tokens" in error
    assert "Provider said: Input too long." in error


# -- issue 11.9: what the provider said ------------------------------------------------------
def test_a_multi_line_provider_message_is_kept_and_secrets_masked(tmp_path: Path, fake_openai: FakeOpenAI) -> None:
    secret = "sk-proj-abcdefghijklmnop0123"
    message = (
        "1 validation error:\n"
        "  {'type': 'missing', 'loc': ('body', 'messages', 0, 'content'), 'msg': 'Field required'}\n"
        f"  request used key {secret}"
    )
    fake_openai.script("solo", [http_error(422, message=message)])

    result, _ = run(team_file(tmp_path, fake_openai))

    error = result.error or ""
    assert "HTTP 422" in error
    assert "Provider said: 1 validation error:" in error
    assert "'msg': 'Field required'" in error
    assert secret not in error and "***" in error


# -- issue 11.27: run_sync inside an event loop ----------------------------------------------
def test_run_sync_inside_a_running_loop_is_a_usage_error(tmp_path: Path) -> None:
    path = tmp_path / "team.yaml"
    path.write_text("version: 1\nname: t\nsupervisor: solo\nagents:\n  solo: {model: offline}\n", encoding="utf-8")
    team = teamrun.load_team(path)

    async def notebook_cell() -> Any:
        return team.run_sync("hello")

    with pytest.raises(UsageError, match=r"await team\.run"):
        asyncio.run(notebook_cell())

    async def awaited() -> Any:
        return await team.run("hello")

    assert asyncio.run(awaited()).status == "done"
