"""The native runs API: create, read, follow (SSE), cancel; budgets; masking; limits on requests."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest

import teamrun
from tests.serve.conftest import REPO, TOKEN, GatedModel, solo_team
from tests.serve.sse import sse_events

AUTH = {"Authorization": f"Bearer {TOKEN}"}


def http(server: Any) -> httpx.Client:
    return httpx.Client(base_url=server.url, headers=AUTH, timeout=60)


def follow(client: httpx.Client, run_id: str) -> list[tuple[str, Any]]:
    with client.stream("GET", f"/v1/runs/{run_id}/events") as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        return list(sse_events(response.iter_lines()))


def test_a_run_streams_its_typed_events_then_its_result(serve: Any) -> None:
    team = teamrun.load_team(REPO / "teams" / "research-report.yaml", model="offline")
    server = serve([team], tokens=frozenset({TOKEN}))
    with http(server) as client:
        created = client.post("/v1/runs", json={"team": "research-report", "input": "Compare Rust and Go"})
        assert created.status_code == 201, created.text
        run_id = created.json()["id"]
        assert created.headers["location"] == f"/v1/runs/{run_id}"

        events = follow(client, run_id)
        record = client.get(f"/v1/runs/{run_id}").json()

    kinds = [name for name, _ in events]
    assert kinds[0] == "run_start" and kinds[-2:] == ["run_end", "result"]
    assert {"agent_start", "delegation_start", "delegation_end", "llm_end"} <= set(kinds)
    workers = {tuple(data["agent_path"]) for name, data in events if name == "delegation_start"}
    assert all(len(path) == 1 for path in workers), "delegations are the supervisor's"
    assert events[-1][1]["status"] == "done" and events[-1][1]["final_text"]
    assert record["status"] == "done" and record["final_text"] == events[-1][1]["final_text"]
    assert record["result"]["delegations"], "the run record keeps who did what"


def test_a_late_reader_gets_every_event_from_the_start_or_from_last_event_id(serve: Any, tmp_path: Path) -> None:
    server = serve([teamrun.load_team(solo_team(tmp_path))])  # loopback, no tokens: auth off
    with httpx.Client(base_url=server.url, timeout=60) as client:
        run_id = client.post("/v1/runs", json={"team": "solo", "input": "hello"}).json()["id"]
        everything = follow(client, run_id)
        with client.stream("GET", f"/v1/runs/{run_id}/events", headers={"Last-Event-ID": "1"}) as response:
            rest = list(sse_events(response.iter_lines()))

    assert everything[0][0] == "run_start"
    assert rest == everything[2:]


def test_cancel_stops_the_run_and_marks_it_cancelled(serve: Any, tmp_path: Path) -> None:
    model = GatedModel()
    server = serve([teamrun.load_team(solo_team(tmp_path), chat_model=model)], tokens=frozenset({TOKEN}))
    with http(server) as client:
        run_id = client.post("/v1/runs", json={"team": "solo", "input": "wait"}).json()["id"]
        assert client.get(f"/v1/runs/{run_id}").json()["status"] == "running"
        with client.stream("GET", f"/v1/runs/{run_id}/events") as response:
            lines = response.iter_lines()
            seen = []
            for name, data in sse_events(lines):
                seen.append((name, data))
                if name == "llm_start":  # the model call is in flight: cancel now
                    cancelled = client.post(f"/v1/runs/{run_id}/cancel")
                    assert cancelled.status_code == 202
        record = client.get(f"/v1/runs/{run_id}").json()

    assert seen[-1][0] == "result" and seen[-1][1]["status"] == "cancelled"
    assert [d["data"]["status"] for n, d in seen if n == "run_end"] == ["cancelled"]
    assert record["status"] == "cancelled" and record["cancel_reason"] == "cancelled by request"
    assert model.gate.is_set() is False, "the model never answered: the run was stopped, not finished"


def limited_team(tmp_path: Path) -> Path:
    return solo_team(tmp_path, extra="limits:\n  max_total_tokens: 5000\n  timeout_s: 60\n")


def test_budgets_may_lower_the_teams_limits(serve: Any, tmp_path: Path) -> None:
    server = serve([teamrun.load_team(limited_team(tmp_path))])
    with httpx.Client(base_url=server.url, timeout=60) as client:
        run_id = client.post(
            "/v1/runs", json={"team": "solo", "input": "hi", "budgets": {"max_total_tokens": 100, "max_cost_usd": 0.5}}
        ).json()["id"]
        follow(client, run_id)
        record = client.get(f"/v1/runs/{run_id}").json()
        unchanged_id = client.post("/v1/runs", json={"team": "solo", "input": "hi"}).json()["id"]
        follow(client, unchanged_id)
        unchanged = client.get(f"/v1/runs/{unchanged_id}").json()

    assert record["result"]["limits_in_force"]["limits"] == {
        "max_total_tokens": 100,
        "max_cost_usd": 0.5,
        "timeout_s": 60.0,
    }
    assert unchanged["result"]["limits_in_force"]["limits"] == {"max_total_tokens": 5000, "timeout_s": 60.0}


@pytest.mark.parametrize("budgets", [{"max_total_tokens": 5001}, {"timeout_s": 61}])
def test_budgets_higher_than_the_teams_are_422(serve: Any, tmp_path: Path, budgets: dict[str, Any]) -> None:
    server = serve([teamrun.load_team(limited_team(tmp_path))])
    with httpx.Client(base_url=server.url, timeout=60) as client:
        response = client.post("/v1/runs", json={"team": "solo", "input": "hi", "budgets": budgets})

    assert response.status_code == 422
    key = next(iter(budgets))
    assert f"budgets.{key}" in response.json()["error"]["message"]
    assert "may only lower" in response.json()["error"]["message"]


def test_invalid_requests_are_4xx_without_a_traceback(serve: Any, tmp_path: Path) -> None:
    server = serve([teamrun.load_team(solo_team(tmp_path))])
    with httpx.Client(base_url=server.url, timeout=60) as client:
        unknown_budget = client.post("/v1/runs", json={"team": "solo", "input": "x", "budgets": {"max_lols": 1}})
        not_json = client.post("/v1/runs", content=b"{not json", headers={"content-type": "application/json"})
        missing_run = client.get("/v1/runs/run_nope")

    assert unknown_budget.status_code == 422 and "budgets.max_lols" in unknown_budget.text
    assert not_json.status_code == 400 and not_json.json()["error"]["code"] == "invalid_json"  # docs/serve.md
    assert missing_run.status_code == 404 and missing_run.json()["error"]["code"] == "run_not_found"
    for response in (unknown_budget, not_json, missing_run):
        assert "Traceback" not in response.text and 'File "' not in response.text


def test_secrets_are_masked_in_events_records_and_answers(
    serve: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    secret = "hunter2-very-secret-value"
    monkeypatch.setenv("SEARCH_API_KEY", secret)
    server = serve([teamrun.load_team(solo_team(tmp_path))])
    with httpx.Client(base_url=server.url, timeout=60) as client:
        run_id = client.post("/v1/runs", json={"team": "solo", "input": f"use the key {secret} please"}).json()["id"]
        events = follow(client, run_id)
        record = client.get(f"/v1/runs/{run_id}")
        chat = client.post(
            "/v1/chat/completions", json={"model": "solo", "messages": [{"role": "user", "content": f"echo {secret}"}]}
        )

    assert events[0][0] == "run_start" and "***" in events[0][1]["data"]["input"]
    for text in (str(events), record.text, chat.text):
        assert secret not in text


def test_a_body_over_the_limit_is_413(serve: Any, tmp_path: Path) -> None:
    server = serve([teamrun.load_team(solo_team(tmp_path))], max_request_bytes=1000)
    with httpx.Client(base_url=server.url, timeout=60) as client:
        big = client.post("/v1/runs", json={"team": "solo", "input": "x" * 2000})
        chunked = client.post(
            "/v1/runs",
            content=iter([b'{"team": "solo", "input": "', b"y" * 2000, b'"}']),
            headers={"content-type": "application/json"},
        )
        small = client.post("/v1/runs", json={"team": "solo", "input": "x"})

    assert big.status_code == 413 and chunked.status_code == 413
    assert small.status_code == 201


def test_cors_is_off_unless_origins_are_given(serve: Any, tmp_path: Path) -> None:
    preflight = {"Origin": "https://example.org", "Access-Control-Request-Method": "POST"}
    closed = serve([teamrun.load_team(solo_team(tmp_path))])
    opened = serve([teamrun.load_team(solo_team(tmp_path))], cors_origins=["https://example.org"])

    refused = httpx.options(closed.url + "/v1/runs", headers=preflight)
    allowed = httpx.options(opened.url + "/v1/runs", headers=preflight)

    assert "access-control-allow-origin" not in refused.headers
    assert allowed.headers["access-control-allow-origin"] == "https://example.org"


def test_health_and_readiness_need_no_token(serve: Any, tmp_path: Path) -> None:
    server = serve([teamrun.load_team(solo_team(tmp_path))], tokens=frozenset({TOKEN}))

    assert httpx.get(server.url + "/healthz").json() == {"status": "ok"}
    ready = httpx.get(server.url + "/readyz")
    assert ready.status_code == 200 and ready.json()["teams"] == ["solo"]
    assert httpx.get(server.url + "/v1/models").status_code == 401
