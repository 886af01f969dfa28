"""The concurrency limit under load, and a SIGTERM'd `teamrun serve` process."""

from __future__ import annotations

import asyncio
import signal
import threading
from pathlib import Path
from typing import Any

import httpx

import teamrun
from tests.cli_processes import child_env, serving
from tests.fakeserver import FakeOpenAI, hang
from tests.serve.conftest import TOKEN, GatedModel, solo_team
from tests.serve.sse import sse_events
from tests.waiting import wait_until, wait_until_async

AUTH = {"Authorization": f"Bearer {TOKEN}"}


def test_100_concurrent_requests_with_20_slots_are_each_answered_200_or_429(serve: Any, tmp_path: Path) -> None:
    model = GatedModel("held answer")
    server = serve(
        [teamrun.load_team(solo_team(tmp_path), chat_model=model)], tokens=frozenset({TOKEN}), max_concurrent_runs=20
    )

    async def main() -> list[httpx.Response]:
        limits = httpx.Limits(max_connections=100, max_keepalive_connections=100)
        async with httpx.AsyncClient(base_url=server.url, headers=AUTH, timeout=120, limits=limits) as client:
            body = {"model": "solo", "messages": [{"role": "user", "content": "hold on"}]}
            tasks = [asyncio.create_task(client.post("/v1/chat/completions", json=body)) for _ in range(100)]
            # every request is accounted for before the held runs may finish: 20 in the model, 80 answered
            accounted = "20 requests in the model, 80 answered"
            await wait_until_async(lambda: model.waiting == 20 and sum(t.done() for t in tasks) == 80, accounted)
            refused = [t.result() for t in tasks if t.done()]
            model.gate.set()
            answers = await asyncio.gather(*tasks)
            assert all(r.status_code == 429 for r in refused)
            return answers

    answers = asyncio.run(asyncio.wait_for(main(), timeout=300))

    codes = [r.status_code for r in answers]
    assert len(codes) == 100 and sorted(set(codes)) == [200, 429]
    assert codes.count(200) == 20 and codes.count(429) == 80
    assert all(
        r.headers["retry-after"] == "1" and r.json()["error"]["code"] == "too_many_runs"
        for r in answers
        if r.status_code == 429
    )
    assert all(r.json()["choices"][0]["message"]["content"] == "held answer" for r in answers if r.status_code == 200)
    assert httpx.get(server.url + "/readyz").json()["active_runs"] == 0
    metrics = httpx.get(server.url + "/metrics", headers=AUTH).text
    assert 'teamrun_requests_rejected_total{reason="busy"} 80.0' in metrics
    assert 'teamrun_runs_total{status="done",team="solo"} 20.0' in metrics


def test_sigterm_cancels_the_runs_in_progress_and_exits_cleanly(tmp_path: Path, fake_openai: FakeOpenAI) -> None:
    fake_openai.script("lead", [hang(300), hang(300)])
    team = solo_team(tmp_path, model="openai/lead", api_base=fake_openai.url)
    with (
        serving(str(team), env=child_env(TEAMRUN_API_TOKENS=TOKEN)) as server,
        httpx.Client(base_url=server.url, headers=AUTH, timeout=120) as client,
    ):
        run_id = client.post("/v1/runs", json={"team": "solo", "input": "hang on"}).json()["id"]
        chat: list[httpx.Response] = []
        chatting = threading.Thread(
            target=lambda: chat.append(
                client.post(
                    "/v1/chat/completions", json={"model": "solo", "messages": [{"role": "user", "content": "hi"}]}
                )
            )
        )
        chatting.start()
        seen: list[tuple[str, Any]] = []
        with client.stream("GET", f"/v1/runs/{run_id}/events") as response:
            for name, data in sse_events(response.iter_lines()):
                seen.append((name, data))
                if name == "llm_start":
                    both = "both runs waiting on the provider"
                    wait_until(lambda: len(fake_openai.requests("lead")) >= 2, both)
                    server.process.send_signal(signal.SIGTERM)
        chatting.join(timeout=120)
        code = server.process.wait(timeout=120)
    assert code == 0
    assert [d["data"]["status"] for n, d in seen if n == "run_end"] == ["cancelled"]
    assert seen[-1][0] == "result"
    assert seen[-1][1]["status"] == "cancelled" and seen[-1][1]["cancel_reason"] == "server shutting down"
    assert chat[0].status_code == 503
    assert chat[0].json()["error"]["code"] == "run_cancelled" and chat[0].json()["error"]["status"] == "cancelled"
