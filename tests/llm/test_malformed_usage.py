"""Usage figures that are not token counts never cost a call its answer (attack a45): LiteLLM used to refuse
such an answer ("Invalid response object" as an HTTP 500, a stream's "unsupported operand"), so the answer was
thrown away and a fallback asked; or it read ``"12"`` as 12 and ``true`` as 1. Now the call's answer is used and
its usage is unknown — never 0, never priced — against the fake OpenAI (plain and streamed) and Anthropic servers.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import teamrun
from teamrun.events import Event, LlmEnd
from tests import fakeserver
from tests.fake_anthropic import FakeAnthropic
from tests.fakeserver import FakeOpenAI, text

BAD = [2.5, "abc", "12", True, -5]


def _solo(tmp_path: Path, model: str, api_base: str, extra: str = "") -> Path:
    path = tmp_path / "solo.yaml"
    path.write_text(
        "version: 1\nname: solo\nsupervisor: solo\n"
        f"defaults: {{model: {model}, api_base: '{api_base}', num_retries: 0{extra}}}\n"
        "agents:\n"
        "  solo:\n"
        "    instructions: Answer.\n"
        "    fallbacks: [{model: offline}]\n",  # asked only if the answer were lost
        encoding="utf-8",
    )
    return path


def _run(path: Path) -> tuple[teamrun.RunResult, list[Event]]:
    events: list[Event] = []
    result = teamrun.load_team(path).run_sync("2+2?", subscribers=[events.append])
    return result, events


def _said_unknown(result: teamrun.RunResult, events: list[Event], answer: str) -> None:
    assert (result.status, result.error, result.final_text) == ("done", None, answer)
    (end,) = [e for e in events if isinstance(e, LlmEnd)]
    assert end.usage_known is False and getattr(end, "fallback", None) is None
    shown = result.as_dict()
    assert shown["usage_known"] is False
    (model,) = shown["models"].values()
    assert model == {"usage": None, "cost": None, "calls": 1, "usage_known": False}


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "streamed"])
@pytest.mark.parametrize("bad", BAD, ids=repr)
def test_an_openai_answer_with_a_malformed_usage_figure_is_used_with_its_usage_unknown(
    tmp_path: Path, fake_openai: FakeOpenAI, monkeypatch: pytest.MonkeyPatch, bad: Any, stream: bool
) -> None:
    counted = fakeserver._usage

    def usage(request: dict[str, Any], reply: fakeserver.Reply) -> dict[str, Any]:
        return {**counted(request, reply), "completion_tokens": bad}

    monkeypatch.setattr(fakeserver, "_usage", usage)
    fake_openai.script("solo", [text("four")])

    result, events = _run(_solo(tmp_path, "openai/solo", fake_openai.url, ", stream: true" if stream else ""))

    _said_unknown(result, events, "four")
    assert len(fake_openai.requests("solo")) == 1


@pytest.fixture
def anthropic(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeAnthropic]:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test")
    with FakeAnthropic() as server:
        yield server


@pytest.mark.outofprocess("the fake Anthropic HTTP server (tests/fake_anthropic.py)")
@pytest.mark.parametrize("figure", ["cache_read_input_tokens", "output_tokens"])
@pytest.mark.parametrize("bad", ["5", 2.5, "x"], ids=repr)
def test_an_anthropic_answer_with_a_malformed_usage_figure_is_used_with_its_usage_unknown(
    tmp_path: Path, anthropic: FakeAnthropic, monkeypatch: pytest.MonkeyPatch, figure: str, bad: Any
) -> None:
    counted = FakeAnthropic._usage

    def usage(self: FakeAnthropic, body: dict[str, Any], reply: fakeserver.Reply) -> dict[str, Any]:
        return {**counted(self, body, reply), figure: bad}

    monkeypatch.setattr(FakeAnthropic, "_usage", usage)
    anthropic.script("claude-haiku-4-5", [text("four")])

    result, events = _run(_solo(tmp_path, "anthropic/claude-haiku-4-5", anthropic.url))

    _said_unknown(result, events, "four")
    assert len(anthropic.bodies) == 1 and not anthropic.violations


def test_whole_counts_are_still_counted(tmp_path: Path, fake_openai: FakeOpenAI) -> None:
    fake_openai.script("solo", [text("four")])

    result, _ = _run(_solo(tmp_path, "openai/solo", fake_openai.url))

    assert result.usage_known and result.usage.output_tokens > 0 and result.usage.input_tokens > 0


@pytest.mark.parametrize(
    ("kind", "message"),
    [
        ("APIConnectionError", "OpenAIException - 1 validation error for Usage\ncompletion_tokens\n  Input should be"),
        ("InternalServerError", "Invalid response object Traceback ... 1 validation error for Usage"),
        ("APIConnectionError", "unsupported operand type(s) for +=: 'int' and 'str'"),
    ],
)
def test_a_usage_litellm_still_cannot_read_is_a_malformed_answer(kind: str, message: str) -> None:
    """Were a reader the guard does not cover to refuse the usage, the failure is the answer's (``malformed``),
    not a server error or a connection failure."""
    from types import SimpleNamespace

    from teamrun.llm import adapter

    litellm = adapter.import_litellm()
    error = getattr(litellm, kind)(message=message, llm_provider="openai", model="solo")

    failure = adapter._classify(litellm, error, SimpleNamespace(secrets=(), model="openai/solo"))  # type: ignore[arg-type]

    assert failure.kind == "malformed"
