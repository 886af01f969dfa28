"""`teamrun serve` loads LiteLLM and does its first-call set-up for the served teams' models at start-up, before
it accepts a request, so a first request's model call does not pay them (issue 33.13)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx

from teamrun.engine.team import load_team
from tests.fakeserver import FakeOpenAI, text

REPO = Path(__file__).resolve().parents[2]


def test_the_served_team_s_model_is_ready_before_the_first_request(
    fake_openai: FakeOpenAI, serve: Any, tmp_path: Path
) -> None:
    path = tmp_path / "team.yaml"
    path.write_text(
        "version: 1\nname: solo-team\nsupervisor: solo\nagents:\n"
        f"  solo: {{model: openai/solo, api_base: '{fake_openai.url}'}}\n",
        encoding="utf-8",
    )
    team = load_team(path)
    router = team.model_router
    assert router is not None and not router.uses_litellm

    server = serve([team])

    assert router.uses_litellm  # built at start-up, not by the first request
    assert router.litellm_model().warmed == {"openai/solo"}
    assert fake_openai.requests() == []  # warmed without a request
    fake_openai.script("solo", [text("fine")])
    reply = httpx.post(
        f"{server.url}/v1/chat/completions",
        json={"model": "solo-team", "messages": [{"role": "user", "content": "hi"}]},
        timeout=60,
    )
    assert reply.status_code == 200, reply.text
    assert reply.json()["choices"][0]["message"]["content"] == "fine"
    fake_openai.assert_complete()


def test_an_offline_team_loads_no_litellm_at_start_up(serve: Any) -> None:
    team = load_team(REPO / "teams" / "research-report.yaml", model="offline")

    serve([team])

    assert team.model_router is not None and not team.model_router.uses_litellm
