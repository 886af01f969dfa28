"""`GET /metrics`, read with Prometheus' own parser."""

from __future__ import annotations

from typing import Any

import httpx
from prometheus_client.parser import text_string_to_metric_families

import teamrun
from tests.serve.conftest import REPO, TOKEN

AUTH = {"Authorization": f"Bearer {TOKEN}"}


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def test_metrics_count_runs_tokens_cost_and_latency_by_team_and_agent(serve: Any) -> None:
    team = teamrun.load_team(REPO / "teams" / "research-report.yaml", model="offline")
    server = serve([team], tokens=frozenset({TOKEN}))
    with httpx.Client(base_url=server.url, headers=AUTH, timeout=60) as client:
        reply = client.post(
            "/v1/chat/completions",
            json={"model": "research-report", "messages": [{"role": "user", "content": "Compare"}]},
        )
        run = client.get(f"/v1/runs/{reply.headers['x-teamrun-run-id']}").json()["result"]
        scraped = client.get("/metrics")
        refused = httpx.get(server.url + "/metrics")

    assert scraped.status_code == 200 and refused.status_code == 401
    found = samples(scraped.text)
    team_label = ("team", "research-report")
    assert found[("teamrun_runs_total", (("status", "done"), team_label))] == 1
    assert found[("teamrun_runs_active", (team_label,))] == 0
    assert found[("teamrun_run_duration_seconds_count", (team_label,))] == 1
    for agent, spend in run["agents"].items():
        labels = (("agent", agent), ("direction", "input"), team_label)
        assert found[("teamrun_tokens_total", labels)] == spend["usage"]["input_tokens"] > 0
        assert found[("teamrun_agent_duration_seconds_count", (("agent", agent), team_label))] == spend["invocations"]
