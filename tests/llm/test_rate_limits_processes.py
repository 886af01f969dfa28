"""Issue 45's done-when for the rate limit, through a real ``teamrun serve`` process: with ``--rpm 60`` and 100
served runs in flight against a fake provider that answers 429 above 60 requests in any minute, no request is
answered 429 and every run ends ``done``.

Real time: the limit paces the 100 requests one a second (after a burst of three), so the test takes about 100 s.
tests/llm/test_rate_limits.py checks the same on a virtual clock, in process, with the waits' events and metrics.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx

from tests.cli_processes import child_env, serving
from tests.fakeserver import FakeOpenAI, text
from tests.serve.conftest import TOKEN

AUTH = {"Authorization": f"Bearer {TOKEN}"}
RUNS = 100
RPM = 60


def _team(tmp_path: Path, provider: FakeOpenAI) -> Path:
    """One agent, one model call a run; no retries, so a 429 would fail its run too."""
    path = tmp_path / "limited.yaml"
    path.write_text(
        "\n".join(
            [
                "version: 1",
                "name: limited",
                "supervisor: solo",
                "agents:",
                "  solo:",
                "    instructions: Answer in one line.",
                "    model: openai/limited",
                f"    api_base: {provider.url}",
                "    api_key_env: TEAMRUN_TEST_KEY",
                "    num_retries: 0",
                "",
            ]
        ),
        encoding="utf-8",
    )
    return path


def test_100_served_runs_at_rpm_60_against_a_provider_limited_to_60_a_minute_get_no_429_and_all_end_done(
    tmp_path: Path, fake_openai: FakeOpenAI
) -> None:
    provider = fake_openai
    provider.refuse_above(RPM, window_s=60.0)
    provider.handler("limited", lambda request: text(f"answered: {request['messages'][-1]['content']}"))
    env = child_env(TEAMRUN_API_TOKENS=TOKEN, TEAMRUN_TEST_KEY="sk-test-rate-limit")
    with (
        serving(
            str(_team(tmp_path, provider)), "--rpm", str(RPM), "--max-concurrent-runs", str(RUNS), env=env
        ) as server,
        httpx.Client(
            base_url=server.url,
            headers=AUTH,
            timeout=600,
            limits=httpx.Limits(max_connections=2 * RUNS, max_keepalive_connections=2 * RUNS),
        ) as client,
    ):

        def start(i: int) -> str:
            response = client.post("/v1/runs", json={"team": "limited", "input": f"question {i}"})
            assert response.status_code == 201, response.text
            run_id: str = response.json()["id"]
            return run_id

        def finish(run_id: str) -> dict[str, Any]:
            client.get(f"/v1/runs/{run_id}/events")  # until the run is over
            record: dict[str, Any] = client.get(f"/v1/runs/{run_id}").json()
            return record

        with ThreadPoolExecutor(RUNS) as pool:
            run_ids = list(pool.map(start, range(RUNS)))  # all in flight at once: none waits for another's end
            records = list(pool.map(finish, run_ids))

    refused = [r for r in provider.requests() if r.status == 429]
    assert refused == [], f"{len(refused)} of {len(provider.requests())} requests were answered 429"
    assert [r["status"] for r in records] == ["done"] * RUNS, [r for r in records if r["status"] != "done"][:3]
    assert sorted(r["result"]["final_text"] for r in records) == sorted(f"answered: question {i}" for i in range(RUNS))
    assert len(provider.requests("limited")) == RUNS
