"""The OpenAI-compatible endpoint, driven by the official `openai` client."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import openai
import pytest

import teamrun
from tests.fakeserver import FakeOpenAI, text, tool_calls
from tests.serve.conftest import REPO, TOKEN, solo_team

RESEARCH = REPO / "teams" / "research-report.yaml"
TASK = "Compare Rust and Go for command-line tools"


def client(server: Any, token: str | None = TOKEN) -> openai.OpenAI:
    return openai.OpenAI(base_url=server.url + "/v1", api_key=token or "none", max_retries=0, timeout=60)


def test_non_streaming_completion_is_the_teams_answer_offline(serve: Any) -> None:
    team = teamrun.load_team(RESEARCH, model="offline")
    expected = team.run_sync(TASK).final_text
    server = serve([team], tokens=frozenset({TOKEN}))

    reply = client(server).chat.completions.create(
        model="research-report", messages=[{"role": "system", "content": "be brief"}, {"role": "user", "content": TASK}]
    )

    assert reply.choices[0].message.content == expected and expected
    assert reply.choices[0].finish_reason == "stop"
    assert reply.model == "research-report"
    assert reply.usage is not None and reply.usage.total_tokens > 0


def test_streaming_completion_joins_to_the_teams_answer_offline(serve: Any) -> None:
    team = teamrun.load_team(RESEARCH, model="offline")
    expected = team.run_sync(TASK).final_text
    server = serve([team], tokens=frozenset({TOKEN}))

    stream = client(server).chat.completions.create(
        model="research-report",
        messages=[{"role": "user", "content": TASK}],
        stream=True,
        stream_options={"include_usage": True},
    )
    chunks = list(stream)

    content = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert content == expected
    pieces = [c for c in chunks if c.choices and c.choices[0].delta.content]
    assert len(pieces) > 1, "the answer arrives in several chunks"
    assert [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason] == ["stop"]
    assert chunks[-1].usage is not None and chunks[-1].usage.total_tokens > 0


def test_models_lists_every_served_team(serve: Any, tmp_path: Path) -> None:
    teams = [teamrun.load_team(RESEARCH, model="offline"), teamrun.load_team(solo_team(tmp_path))]
    server = serve(teams, tokens=frozenset({TOKEN}))

    assert sorted(m.id for m in client(server).models.list()) == ["research-report", "solo"]


def fake_team(tmp_path: Path, fake: FakeOpenAI) -> Path:
    path = tmp_path / "fake.yaml"
    path.write_text(
        f"""\
version: 1
name: fake-team
supervisor: lead
defaults:
  api_base: {fake.url}
agents:
  lead:
    model: openai/lead
    description: Delegates.
    delegates_to: [worker]
  worker:
    model: openai/worker
    description: Finds facts.
""",
        encoding="utf-8",
    )
    return path


@pytest.mark.parametrize("stream", [False, True])
def test_a_team_on_the_fake_provider_answers_through_the_endpoint(
    serve: Any, tmp_path: Path, fake_openai: FakeOpenAI, stream: bool
) -> None:
    fake_openai.script(
        "lead",
        [tool_calls(("ask_worker", {"task": "find the facts"})), text("Final: the worker found the facts, cited.")],
    )
    fake_openai.script("worker", [text("facts: A is faster")])
    server = serve([teamrun.load_team(fake_team(tmp_path, fake_openai))], tokens=frozenset({TOKEN}))

    messages: Any = [{"role": "user", "content": "Compare A and B"}]
    if stream:
        chunks = list(client(server).chat.completions.create(model="fake-team", messages=messages, stream=True))
        content = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    else:
        content = (
            client(server).chat.completions.create(model="fake-team", messages=messages).choices[0].message.content
            or ""
        )

    assert content == "Final: the worker found the facts, cited."
    fake_openai.assert_complete()
    worker_request = fake_openai.requests("worker")[0]
    assert "find the facts" in str(worker_request.request["messages"])


def test_no_token_or_a_wrong_one_is_401(serve: Any, tmp_path: Path) -> None:
    server = serve([teamrun.load_team(solo_team(tmp_path))], tokens=frozenset({TOKEN}))
    messages: Any = [{"role": "user", "content": "hi"}]

    with pytest.raises(openai.AuthenticationError) as missing:
        client(server, token=None).chat.completions.create(model="solo", messages=messages)
    with pytest.raises(openai.AuthenticationError):
        client(server, token="wrong-token-0123456789").models.list()

    assert missing.value.status_code == 401
    assert missing.value.response.headers["www-authenticate"] == "Bearer"


def test_an_unknown_team_is_404_listing_the_teams(serve: Any, tmp_path: Path) -> None:
    teams = [teamrun.load_team(solo_team(tmp_path)), teamrun.load_team(solo_team(tmp_path, name="other"))]
    server = serve(teams, tokens=frozenset({TOKEN}))

    with pytest.raises(openai.NotFoundError) as raised:
        client(server).chat.completions.create(model="nope", messages=[{"role": "user", "content": "hi"}])

    assert "team 'nope' is not served here; teams: other, solo" in str(raised.value)
    assert "Traceback" not in raised.value.response.text
