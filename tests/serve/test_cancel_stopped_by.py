"""A run cancelled by request says it was cancelled (the attacker's D5): its result and its ``run_end`` event
said ``stopped_by: "interrupted"`` — the word for a run whose process died — beside ``status: cancelled`` and
``cancel_reason: "cancelled by request"``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx

import teamrun
from tests.serve.conftest import GatedModel, solo_team
from tests.serve.sse import sse_events


def test_a_run_cancelled_by_request_is_stopped_by_cancelled_not_interrupted(serve: Any, tmp_path: Path) -> None:
    server = serve([teamrun.load_team(solo_team(tmp_path), chat_model=GatedModel())])
    with httpx.Client(base_url=server.url, timeout=60) as client:
        run_id = client.post("/v1/runs", json={"team": "solo", "input": "wait"}).json()["id"]
        with client.stream("GET", f"/v1/runs/{run_id}/events") as response:
            seen = []
            for name, data in sse_events(response.iter_lines()):
                seen.append((name, data))
                if name == "llm_start":  # the model call is in flight: cancel now
                    assert client.post(f"/v1/runs/{run_id}/cancel").status_code == 202
        record = client.get(f"/v1/runs/{run_id}").json()

    [run_end] = [data["data"] for name, data in seen if name == "run_end"]
    assert record["status"] == "cancelled" and record["cancel_reason"] == "cancelled by request"
    assert record["result"]["stopped_by"] == "cancelled"
    assert run_end["status"] == "cancelled" and run_end["stopped_by"] == "cancelled"
    assert "interrupted" not in record["result"]["final_text"]
