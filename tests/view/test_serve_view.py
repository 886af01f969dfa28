"""`teamrun serve`'s page: the run list (server and store, filtered) and the run view, live, in headless Chromium."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
from playwright.sync_api import Page, expect

import teamrun
from teamrun.store import open_store
from teamrun.testing import ScriptedModel
from tests.serve.conftest import REPO, TOKEN, GatedModel, _loopback_without_proxy, serve, solo_team
from tests.view.conftest import OpenPage
from tests.view.test_trace_view import HOSTILE

__all__ = ["_loopback_without_proxy", "serve"]

AUTH = {"Authorization": f"Bearer {TOKEN}"}


def _research() -> teamrun.Team:
    return teamrun.load_team(REPO / "teams" / "research-report.yaml", model="offline")


def _finished_run(url: str, body: dict[str, Any]) -> str:
    with httpx.Client(base_url=url, headers=AUTH, timeout=60) as client:
        run_id = str(client.post("/v1/runs", json=body).json()["id"])
        assert "event: result" in client.get(f"/v1/runs/{run_id}/events").text  # read until the run is over
    return run_id


def _signed_in(open_page: OpenPage, url: str) -> tuple[Page, list[str]]:
    """The page with the token given; its console problems from then on (before, the server answers 401)."""
    opened = open_page(url + "/")
    opened.page.wait_for_load_state("networkidle")
    assert all("401 (Unauthorized)" in problem for problem in opened.problems), opened.problems
    opened.problems.clear()
    opened.page.fill("#token", TOKEN)
    opened.page.dispatch_event("#token", "change")
    expect(opened.page.locator("#team option")).not_to_have_count(0)  # the token took effect
    return opened.page, opened.problems


def test_the_page_lists_past_runs_filters_them_and_opens_each_in_the_view_live(
    serve: Any, tmp_path: Path, open_page: OpenPage
) -> None:
    store = open_store(tmp_path / "teamrun.db")
    earlier = serve([_research()], store=store, tokens=frozenset({TOKEN}))
    threaded = _finished_run(earlier.url, {"team": "research-report", "input": "Compare Rust and Go", "thread": "t-1"})
    alone = _finished_run(earlier.url, {"team": "research-report", "input": "Compare Zig and C"})
    earlier.stop()  # from now on these runs are known from the store only
    gated = GatedModel("the **gated** answer")
    now = serve(
        [_research(), teamrun.load_team(solo_team(tmp_path, name="gated"), chat_model=gated)],
        store=store,
        tokens=frozenset({TOKEN}),
    )
    running = httpx.post(now.url + "/v1/runs", headers=AUTH, json={"team": "gated", "input": "wait"}).json()["id"]

    page, problems = _signed_in(open_page, now.url)
    rows = page.locator("#runs-list .run-row")
    expect(rows).to_have_count(3)
    assert [r.get_attribute("data-run") for r in rows.all()] == [running, alone, threaded]  # newest first
    expect(page.locator(f"#runs-list .run-row[data-run={running}] .status-word")).to_have_text("running")
    expect(page.locator(f"#runs-list .run-row[data-run={threaded}]")).to_contain_text("t-1")
    expect(page.locator(f"#runs-list .run-row[data-run={threaded}]")).to_contain_text("research-report")

    page.fill("#runs-thread", "t-1")
    page.click("#runs-refresh")
    expect(rows).to_have_count(1)
    expect(rows.first).to_have_attribute("data-run", threaded)
    page.fill("#runs-thread", "")
    page.select_option("#runs-status", "running")
    expect(rows).to_have_count(1)
    expect(rows.first).to_have_attribute("data-run", running)

    rows.first.click()  # the running run opens live
    view = page.locator("#run-view")
    expect(view.locator(".tv-title .tv-status")).to_have_text("running")
    expect(view.locator(".tv-row[data-agent=lead] .tv-bar.tv-llm")).to_have_attribute("data-status", "running")
    gated.gate.set()
    expect(view.locator(".tv-title .tv-status")).to_have_text("done", timeout=20_000)
    expect(view.locator("#tv-answer strong")).to_have_text("gated")
    expect(view.locator(".tv-row[data-agent=lead] .tv-bar.tv-llm")).to_have_attribute("data-status", "ok")

    page.select_option("#runs-status", "done")
    expect(rows).to_have_count(3)
    page.locator(f"#runs-list .run-row[data-run={alone}]").click()  # a run of an earlier server: its outcome
    expect(page.locator("#run-id")).to_have_text(alone)
    expect(view.locator(".tv-title .tv-status")).to_have_text("done")
    expect(view.locator("#tv-answer")).to_contain_text("Compare Zig and C")
    expect(page.locator("#run-view-note")).to_contain_text("from the store")
    assert problems == [], "\n".join(problems)


def test_the_run_list_api_filters_and_needs_the_token(serve: Any, tmp_path: Path) -> None:
    store = open_store(tmp_path / "teamrun.db")
    server = serve([_research()], store=store, tokens=frozenset({TOKEN}))
    first = _finished_run(server.url, {"team": "research-report", "input": "one", "thread": "t-1"})
    second = _finished_run(server.url, {"team": "research-report", "input": "two"})

    listed = httpx.get(server.url + "/v1/runs", headers=AUTH).json()["data"]
    by_thread = httpx.get(server.url + "/v1/runs", params={"thread": "t-1"}, headers=AUTH).json()["data"]
    failed = httpx.get(server.url + "/v1/runs", params={"status": "failed"}, headers=AUTH).json()["data"]
    refused = httpx.get(server.url + "/v1/runs")
    bad = httpx.get(server.url + "/v1/runs", params={"status": "exploded"}, headers=AUTH)

    assert [r["id"] for r in listed] == [second, first]
    assert {r["status"] for r in listed} == {"done"} and all(r["tokens"] > 0 for r in listed)
    assert [r["id"] for r in by_thread] == [first] and by_thread[0]["thread"] == "t-1"
    assert failed == []
    assert refused.status_code == 401
    assert bad.status_code == 422 and "status" in bad.json()["error"]["message"]


def test_an_answer_with_script_and_img_onerror_renders_inert_on_the_page(
    serve: Any, tmp_path: Path, open_page: OpenPage
) -> None:
    team = teamrun.load_team(solo_team(tmp_path, name="hostile"), chat_model=ScriptedModel({"lead": [HOSTILE]}))
    server = serve([team], tokens=frozenset({TOKEN}))

    page, problems = _signed_in(open_page, server.url)
    expect(page.locator("#team option")).to_have_text(["hostile"])
    page.fill("#input", "<img src=z onerror=\"window.__pwned='input'\">")
    page.click("#run")

    expect(page.locator("#status")).to_have_text("done", timeout=30_000)
    for answer in (page.locator("#run-view #tv-answer"),):
        expect(answer.locator("strong")).to_have_text("Done.")
        expect(answer).to_contain_text("<script>window.__pwned = 'script'</script>")
        expect(answer).to_contain_text("<img src=x onerror=")
    expect(page.locator("#run-view .tv-input")).to_contain_text("<img src=z onerror=")
    assert page.locator("#run-view script, #run-view img, #chat script, #chat img").count() == 0
    assert page.evaluate("window.__pwned") is None
    assert problems == [], "\n".join(problems)


def test_with_trace_content_the_served_view_shows_a_model_calls_messages_masked(
    serve: Any, tmp_path: Path, open_page: OpenPage
) -> None:
    from teamrun.observe.trace_file import ContentCapture

    team = teamrun.load_team(REPO / "teams" / "research-report.yaml", model="offline", wrap_model=ContentCapture)
    server = serve([team], tokens=frozenset({TOKEN}), content=True)
    plain = serve([_research()], tokens=frozenset({TOKEN}))

    page, problems = _signed_in(open_page, server.url)
    page.fill("#input", f"Compare Rust and Go (my token is {TOKEN})")
    page.click("#run")
    expect(page.locator("#status")).to_have_text("done", timeout=30_000)
    view = page.locator("#run-view")
    expect(view.locator(".tv-title .tv-status")).to_have_text("done")
    view.locator(".tv-row[data-agent=lead] .tv-bar.tv-llm").first.click()

    messages = view.locator("#tv-details .tv-messages > li")
    expect(messages.last).to_contain_text("Compare Rust and Go (my token is ***)")
    expect(messages.first).to_contain_text("You coordinate a small research team")
    assert TOKEN not in page.locator("#run-view").inner_text()
    assert problems == [], "\n".join(problems)

    page, _ = _signed_in(open_page, plain.url)  # without it: the view says how to get them
    page.fill("#input", "Compare Rust and Go")
    page.click("#run")
    expect(page.locator("#run-view .tv-title .tv-status")).to_have_text("done", timeout=30_000)
    page.locator("#run-view .tv-row[data-agent=lead] .tv-bar.tv-llm").first.click()
    expect(page.locator("#tv-details .tv-empty")).to_contain_text("Messages were not captured")


def test_serve_trace_content_flag_keeps_model_call_messages(monkeypatch: Any, restore_structlog: None) -> None:
    from teamrun.cli import main
    from teamrun.events import Event

    served: list[Any] = []
    monkeypatch.setattr("teamrun.serve.server.serve_app", lambda app, **options: served.append(app))

    assert main(["serve", str(REPO / "teams" / "research-report.yaml"), "--model", "offline", "--trace-content"]) == 0

    (app,) = served
    assert app.state.registry.content is True
    kinds: list[str] = []
    team = app.state.teams["research-report"].team

    def keep(event: Event) -> None:
        kinds.append(event.kind)

    assert team.run_sync("Compare Rust and Go", subscribers=[keep]).status == "done"
    assert "llm_io" in kinds


def test_a_link_to_a_run_opens_its_view(serve: Any, open_page: OpenPage) -> None:
    server = serve([_research()])  # loopback, no token
    run_id = _finished_run(server.url, {"team": "research-report", "input": "Compare Rust and Go"})

    opened = open_page(f"{server.url}/#run={run_id}")

    expect(opened.page.locator("#run-id")).to_have_text(run_id)
    expect(opened.page.locator("#run-view .tv-row[data-agent=researcher]")).to_have_count(1)
    opened.page.locator(f"#runs-list .run-row[data-run={run_id}]").click()
    assert opened.page.url.endswith(f"/#run={run_id}")
    assert opened.problems == []


def test_an_unknown_view_file_is_a_404_that_says_what_was_not_found(serve: Any) -> None:
    server = serve([_research()])

    missing = httpx.get(server.url + "/view/nope.js")
    found = httpx.get(server.url + "/view/view.js")

    assert missing.status_code == 404
    error = missing.json()["error"]
    assert error["code"] == "not_found"
    assert error["message"] == "no file 'nope.js' in the run view; its files: markdown.js, model.js, view.css, view.js"
    assert found.status_code == 200 and "TeamrunView" in found.text


def test_a_run_followed_live_ticks_between_events(serve: Any, tmp_path: Path, open_page: OpenPage) -> None:
    gated = GatedModel("done at last")
    server = serve([teamrun.load_team(solo_team(tmp_path, name="gated"), chat_model=gated)])  # loopback, no token
    run_id = httpx.post(server.url + "/v1/runs", json={"team": "gated", "input": "wait"}).json()["id"]
    opened = open_page(f"{server.url}/#run={run_id}")
    page = opened.page
    view = page.locator("#run-view")
    call = view.locator(".tv-row[data-agent=lead] .tv-bar.tv-llm")
    expect(call).to_have_attribute("data-status", "running")  # the model call waits on the gate: no events
    clock = view.locator(".tv-summary .tv-fact", has_text="wall time").locator("b")
    events, before = view.get_attribute("data-events"), clock.inner_text()
    drawn = call.evaluate("e => [parseFloat(e.style.width), parseFloat(e.dataset.end)]")  # % of the track, s

    expect(clock).not_to_have_text(before)  # the clock moves on (a polling wait) ...
    page.wait_for_function(  # ... and so does the open call's bar (its width as drawn: a float, never rounded)
        "([e, w, end]) => parseFloat(e.style.width) > w && parseFloat(e.dataset.end) > end",
        arg=[call.element_handle(), *drawn],
    )
    assert view.get_attribute("data-events") == events  # with no new event: the live view ticks by itself
    gated.gate.set()
    expect(view.locator(".tv-title .tv-status")).to_have_text("done")
    expect(call).to_have_attribute("data-status", "ok")
    ended = clock.inner_text()
    page.wait_for_timeout(600)  # a few ticks' time: once the run ended, nothing moves
    assert clock.inner_text() == ended
    assert opened.problems == []
