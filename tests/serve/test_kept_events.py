"""Issue 26: a served run's events are kept in the store, so a later server shows its timeline.

A real `teamrun serve --store` process runs a three-worker fan-out (offline model, `--trace-content`)
and is stopped; a new process on the same store answers ``GET /v1/runs/{id}/events`` with the same
events (masked: a secret of the input never reaches the store in clear), and its page opens the run
from the run list with three overlapping worker bars. A run that suspends waiting for people and is
continued by another process keeps both parts. On SQLite and on PostgreSQL.
"""

from __future__ import annotations

import itertools
import json
import signal
import zlib
from pathlib import Path
from typing import Any

import httpx
import pytest
import sqlalchemy as sa
from playwright.sync_api import expect

from teamrun.store import open_store
from tests.cli_processes import child_env, serving
from tests.fakeserver import FakeOpenAI, hang
from tests.people.test_suspend_fan_out import ANSWERS, write_team
from tests.people.test_suspend_fan_out import serve as script_people
from tests.serve.conftest import TOKEN, solo_team, until_run
from tests.serve.sse import sse_events
from tests.serve.test_threads import AUTH, served
from tests.view.conftest import OpenPage, open_page
from tests.waiting import wait_until

__all__ = ["open_page"]

SECRET = "hunter2-kept-events-secret"

FAN_OUT = """\
version: 1
name: fan-out
supervisor: lead
defaults: {model: offline}
limits: {max_depth: 1}
tools:
  pause:
    description: Takes a moment.
    command: ["sleep", "0.3"]
agents:
  lead:
    description: Splits the work.
    delegates_to: [alpha, beta, gamma]
    delegation: {parallel: true, max_concurrency: 3}
  alpha: {description: Does a., tools: [pause]}
  beta: {description: Does b., tools: [pause]}
  gamma: {description: Does c., tools: [pause]}
"""


def _fan_out(tmp_path: Path) -> Path:
    path = tmp_path / "fan-out.yaml"
    path.write_text(FAN_OUT, encoding="utf-8")
    return path


def _events(client: httpx.Client, run_id: str, *, after: int | None = None) -> list[tuple[str, Any]]:
    headers = {"Last-Event-ID": str(after)} if after is not None else {}
    with client.stream("GET", f"/v1/runs/{run_id}/events", headers=headers) as response:
        assert response.status_code == 200, response.read()
        return list(sse_events(response.iter_lines()))


def _shape(events: list[tuple[str, Any]]) -> list[tuple[str, str | None, str | None]]:
    return [(name, data.get("span_id"), data.get("parent_span_id")) for name, data in events if name != "result"]


def _stored_bodies(store_url: str) -> list[str]:
    with open_store(store_url) as store, store.engine.connect() as conn:
        rows = conn.execute(sa.text("SELECT body FROM run_events")).scalars().all()
    return [zlib.decompress(bytes(body)).decode() for body in rows]


def test_a_served_runs_events_outlive_the_server(
    tmp_path: Path, store_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SEARCH_API_KEY", SECRET)  # a secret-named variable: its value is masked everywhere
    team = _fan_out(tmp_path)
    with (
        served(str(team), "--store", store_url, "--trace-content") as url,
        httpx.Client(base_url=url, headers=AUTH, timeout=120) as client,
    ):
        run_id = client.post("/v1/runs", json={"team": "fan-out", "input": f"do a, b and c with {SECRET}"}).json()["id"]
        before = _events(client, run_id)
        held = client.get(f"/v1/runs/{run_id}").json()
    assert held["status"] == "done" and before[-1][0] == "result"
    kinds = [name for name, _ in before]
    assert kinds[0] == "run_start" and "llm_io" in kinds and kinds.count("agent_start") == 4

    with (
        served(str(team), "--store", store_url) as url,
        httpx.Client(base_url=url, headers=AUTH, timeout=120) as client,
    ):
        record = client.get(f"/v1/runs/{run_id}").json()
        after = _events(client, run_id)
        resumed = _events(client, run_id, after=9)  # a reader that had events 0..9
        listed = client.get("/v1/runs").json()["data"]
        unknown = client.get("/v1/runs/run_nosuchrun/events")

    assert record["source"] == "store" and record["events"] is True
    assert _shape(after) == _shape(before)  # kinds, span ids, parents, order
    assert after[:-1] == before[:-1]  # and every event as the first server sent it
    assert resumed[:-1] == before[10:-1]
    result = after[-1]
    assert result[0] == "result" and result[1]["id"] == run_id and result[1]["status"] == "done"
    assert result[1]["final_text"] == record["final_text"] and result[1]["source"] == "store"
    assert "Findings from 3 result(s)" in record["final_text"] and "Findings from 3 result(s)" in held["final_text"]
    assert [(r["id"], r["source"], r["events"]) for r in listed] == [(run_id, "store", True)]
    assert unknown.status_code == 404 and unknown.json()["error"]["code"] == "run_not_found"

    assert "***" in before[0][1]["data"]["input"]
    [body] = _stored_bodies(store_url)
    assert SECRET not in body and SECRET not in json.dumps(after) and '"kind":"llm_io"' in body
    assert "do a, b and c with ***" in body  # the input, in run_start and in the model calls' messages


def test_a_run_that_waits_for_people_keeps_its_events_across_restarts(
    tmp_path: Path, store_url: str, monkeypatch: pytest.MonkeyPatch, fake_openai: FakeOpenAI
) -> None:
    monkeypatch.setenv("TEAMRUN_TEST_KEY", "sk-test-people")
    script_people(fake_openai)
    team = write_team(tmp_path, fake_openai.url)
    with (
        served(str(team), "--store", store_url) as url,
        httpx.Client(base_url=url, headers=AUTH, timeout=120) as client,
    ):
        run_id = client.post("/v1/runs", json={"team": "ask-fan", "input": "go"}).json()["id"]
        suspended = _events(client, run_id)  # until it ends waiting
    assert suspended[-1][1]["status"] == "waiting"

    with (
        served(str(team), "--store", store_url) as url,
        httpx.Client(base_url=url, headers=AUTH, timeout=120) as client,
    ):
        assert _events(client, run_id)[:-1] == suspended[:-1]  # a waiting run the server does not hold
        items = {item["agent"]: item for item in client.get("/v1/pending").json()["data"]}
        for worker in ("w2", "w3", "w1"):  # continued here three times: the same handle, the same part
            value: Any = json.loads(ANSWERS[worker]) if worker == "w3" else ANSWERS[worker]
            said = client.post(f"/v1/runs/{run_id}/pending/{items[worker]['id']}", json={"answer": value})
            assert said.status_code == 200, said.text
            status = until_run(client, run_id, lambda r: r["status"] != "running", "the answer taken")["status"]
            assert status == ("done" if worker == "w1" else "waiting")
        continued = _events(client, run_id)  # held here: what the first process ran, then this one's
        tail = _events(client, run_id, after=len(suspended))  # from the 3rd event this process ran
    assert continued[: len(suspended) - 1] == suspended[:-1]
    assert continued[-1][1]["status"] == "done" and tail[:-1] == continued[len(suspended) + 1 : -1]
    assert [name for name, _ in continued].count("run_continued") == 2

    with (
        served(str(team), "--store", store_url) as url,
        httpx.Client(base_url=url, headers=AUTH, timeout=120) as client,
    ):
        kept = _events(client, run_id)
    assert kept[:-1] == continued[:-1]  # both processes' parts, in order
    ends = [data["data"]["status"] for name, data in kept if name == "run_end"]
    assert ends == ["waiting", "waiting", "waiting", "done"]
    assert kept[-1][1]["status"] == "done" and kept[-1][1]["events"] is True


def test_the_page_opens_a_stored_run_with_three_overlapping_worker_bars(tmp_path: Path, open_page: OpenPage) -> None:
    store = f"sqlite:///{tmp_path / 'teamrun.db'}"
    team = _fan_out(tmp_path)
    with (
        served(str(team), "--store", store) as url,
        httpx.Client(base_url=url, headers=AUTH, timeout=120) as client,
    ):
        run_id = client.post("/v1/runs", json={"team": "fan-out", "input": "do a, b and c"}).json()["id"]
        assert _events(client, run_id)[-1][1]["status"] == "done"

    with served(str(team), "--store", store) as url:
        opened = open_page(url + "/")
        page = opened.page
        page.wait_for_load_state("networkidle")
        opened.problems.clear()  # before the token: 401s
        page.fill("#token", AUTH["Authorization"].removeprefix("Bearer "))
        page.dispatch_event("#token", "change")
        row = page.locator(f"#runs-list .run-row[data-run={run_id}]")
        expect(row.locator(".status-word")).to_have_text("done")
        row.click()
        view = page.locator("#run-view")
        expect(page.locator("#run-view-note")).to_contain_text("from the store")
        expect(view.locator(".tv-title .tv-status")).to_have_text("done")
        expect(view.locator(".tv-row[data-agent]")).to_have_count(4)
        boxes, spans = {}, {}
        for worker in ("alpha", "beta", "gamma"):
            bar = view.locator(f".tv-row[data-agent={worker}] .tv-bar.tv-agent")
            box = bar.bounding_box()
            assert box is not None and box["width"] > 20
            boxes[worker] = (box["x"], box["x"] + box["width"])
            spans[worker] = (float(bar.get_attribute("data-start") or 0), float(bar.get_attribute("data-end") or 0))
        expect(view.locator(".tv-row[data-agent=alpha] .tv-bar.tv-tool")).to_have_count(1)
        problems = list(opened.problems)
    for a, b in itertools.combinations(boxes, 2):  # each pair of worker bars shares pixels and time
        assert max(boxes[a][0], boxes[b][0]) < min(boxes[a][1], boxes[b][1]), (a, b, boxes)
        assert max(spans[a][0], spans[b][0]) < min(spans[a][1], spans[b][1]), (a, b, spans)
    assert problems == [], "\n".join(problems)


@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGKILL], ids=["sigterm", "sigkill"])
def test_a_run_stopped_mid_run_keeps_its_events_on_sigterm_and_none_when_killed(
    tmp_path: Path, fake_openai: FakeOpenAI, stop: signal.Signals
) -> None:
    fake_openai.script("lead", [hang(300)])
    team = solo_team(tmp_path, model="openai/lead", api_base=fake_openai.url)
    store = f"sqlite:///{tmp_path / 'teamrun.db'}"
    with serving(str(team), "--store", store, env=child_env(TEAMRUN_API_TOKENS=TOKEN)) as server:
        answer = httpx.post(server.url + "/v1/runs", headers=AUTH, json={"team": "solo", "input": "hang on"})
        run_id = answer.json()["id"]
        wait_until(lambda: fake_openai.requests("lead"), "the run waiting on the provider")
        server.process.send_signal(stop)
        server.process.wait(timeout=120)

    with served(str(team), "--store", store) as url, httpx.Client(base_url=url, headers=AUTH, timeout=120) as client:
        record = client.get(f"/v1/runs/{run_id}").json()
        events = client.get(f"/v1/runs/{run_id}/events")
    if stop == signal.SIGTERM:
        assert record["status"] == "cancelled" and record["events"] is True
        kept = list(sse_events(events.text.splitlines()))
        assert [name for name, _ in kept][:2] == ["run_start", "agent_start"]
        assert kept[-2][0] == "run_end" and kept[-2][1]["data"]["status"] == "cancelled"
    else:  # its events were only in the killed process's memory
        assert record["status"] == "interrupted" and record["events"] is False
        assert events.status_code == 404 and events.json()["error"]["code"] == "events_not_kept"
