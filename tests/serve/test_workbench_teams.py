"""The workbench at `/` in headless Chromium: each ready-made team shape picked, run and followed in the view,
then opened from the runs list after a server restart (the store); and GET /v1/teams, GET /v1/threads/{id}."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
from playwright.sync_api import Browser, Page, expect, sync_playwright

import teamrun
from teamrun.serve.teams_api import graph_of
from teamrun.store import open_store
from tests.serve.conftest import REPO, TOKEN
from tests.serve.test_web_page import chromium_path

AUTH = {"Authorization": f"Bearer {TOKEN}"}
TASK = "Compare Rust and Go for command-line tools"
SHAPES = {  # one ready-made team of each shape but people in the loop (test_workbench_people.py)
    "research-report": "supervisor",
    "workflow-chain": "workflow",
    "support-triage": "handoffs",
}
SAID = {
    "supervisor": "How it works: a supervisor delegates to workers.",
    "workflow": "How it works: a workflow of steps.",
    "handoffs": "How it works: agents hand the conversation to each other.",
}


def load(name: str, **options: Any) -> teamrun.Team:
    return teamrun.load_team(REPO / "teams" / f"{name}.yaml", model="offline", **options)


@contextlib.contextmanager
def chromium() -> Iterator[Browser]:
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium_path(), args=["--no-sandbox"])
        try:
            yield browser
        finally:
            browser.close()


def workbench(browser: Browser, url: str, *, width: int = 1280) -> Page:
    """The page at ``url`` with the token typed; the teams are listed once it took effect."""
    page = browser.new_page(viewport={"width": width, "height": 900})
    page.goto(url + "/")
    page.fill("#token", TOKEN)
    page.dispatch_event("#token", "input")
    expect(page.locator("#team option")).not_to_have_count(0, timeout=30_000)
    return page


def run_from_page(page: Page, team: str, text: str) -> str:
    """Picks ``team``, sends ``text`` with Run; returns the new run's id (shown as the selected run)."""
    before = page.locator("#run-id").text_content()
    page.select_option("#team", team)
    page.fill("#input", text)
    page.click("#run")
    expect(page.locator("#run-id")).not_to_have_text(before or "-", timeout=30_000)
    return page.locator("#run-id").text_content() or ""


def words(text: str) -> str:
    return " ".join(text.split())


def test_each_team_shape_runs_from_the_workbench_and_opens_from_the_store_after_a_restart(
    serve: Any, tmp_path: Path
) -> None:
    store = open_store(tmp_path / "teamrun.db")
    expected = {name: load(name).run_sync(TASK) for name in SHAPES}
    first = serve([load(name) for name in SHAPES], store=store, tokens=frozenset({TOKEN}))
    seen: dict[str, dict[str, Any]] = {}
    with chromium() as browser:
        page = workbench(browser, first.url)
        for name in SHAPES:
            page.select_option("#team", name)
            config = load(name).config
            expect(page.locator("#team-description")).to_have_text(config.description or "")
            graph = graph_of(config)
            nodes = page.locator("#team-graph svg .tg-node")
            expect(nodes).to_have_count(len(graph["nodes"]))
            run_id = run_from_page(page, name, TASK)
            expect(page.locator("#status")).to_have_text("done", timeout=60_000)
            view = page.locator("#run-view")
            expect(view.locator(".tv-title .tv-status")).to_have_text("done")
            row = page.locator(f'#runs-list .run-row[data-run="{run_id}"]')
            expect(row.locator(".status-word")).to_have_text("done", timeout=30_000)
            seen[name] = {
                "id": run_id,
                "shape": page.locator("#team-shape").text_content(),
                "labels": sorted(t.text_content() or "" for t in nodes.locator(".tg-label").all()),
                "agents": {r.get_attribute("data-agent") for r in view.locator(".tv-row[data-agent]").all()},
                "answer": words(view.locator("#tv-answer").inner_text()),
                "row": row.inner_text(),
            }
        assert page.locator("#tree, #answer, #delegations").count() == 0  # the old sections are gone: one view
    first.stop()

    again = serve([load(name) for name in SHAPES], store=store, tokens=frozenset({TOKEN}))
    with chromium() as browser:
        page = workbench(browser, again.url)
        rows = page.locator("#runs-list .run-row")
        expect(rows).to_have_count(len(SHAPES), timeout=30_000)
        research = seen["research-report"]["id"]
        page.locator(f'#runs-list .run-row[data-run="{research}"]').click()
        expect(page.locator("#run-id")).to_have_text(research)
        expect(page.locator("#run-view-note")).to_contain_text("from the store")
        expect(page.locator("#run-view .tv-title .tv-status")).to_have_text("done")
        expect(page.locator("#status")).to_have_text("done")
        expect(page.locator("#run-view .tv-row[data-agent]")).to_have_count(3)  # its kept events: lead and 2 workers
        reopened_agents = {r.get_attribute("data-agent") for r in page.locator("#run-view .tv-row[data-agent]").all()}
        reopened_answer = words(page.locator("#run-view #tv-answer").inner_text())

    for name, shape in SHAPES.items():
        result = expected[name]
        assert seen[name]["shape"] == SAID[shape], name
        assert {d.agent for d in result.delegations} <= seen[name]["agents"], (name, seen[name]["agents"])
        assert words(result.final_text.splitlines()[0].removeprefix("- "))[:60] in seen[name]["answer"], name
        assert name in seen[name]["row"] and TASK in seen[name]["row"]
    graph_labels = sorted(n["label"] for n in graph_of(load("research-report").config)["nodes"])
    assert seen["research-report"]["labels"] == graph_labels
    assert reopened_agents == seen["research-report"]["agents"]
    assert reopened_answer == seen["research-report"]["answer"]


def test_the_teams_api_describes_each_team_and_its_graph(serve: Any) -> None:
    teams = [load(name) for name in ("launch-signoff", *SHAPES)]
    server = serve(teams, tokens=frozenset({TOKEN}))

    listed = httpx.get(server.url + "/v1/teams", headers=AUTH).json()["data"]
    refused = httpx.get(server.url + "/v1/teams")
    threads_off = httpx.get(server.url + "/v1/threads/t-1", headers=AUTH)

    by_name = {t["name"]: t for t in listed}
    assert [t["name"] for t in listed] == sorted(t.name for t in teams)
    assert {n: t["shape"] for n, t in by_name.items()} == {"launch-signoff": "supervisor", **SHAPES}
    signoff = by_name["launch-signoff"]
    assert signoff["description"].startswith("Prepares a product launch")
    assert [a["name"] for a in signoff["agents"]] == ["coordinator", "infra", "legal", "comms"]
    nodes = {n["id"]: n for n in signoff["graph"]["nodes"]}
    assert nodes["a_coordinator"] == {
        "id": "a_coordinator",
        "label": "coordinator",
        "details": ["supervisor"],
        "shape": "terminal",
    }
    assert nodes["t_a_infra_ask_operator"]["shape"] == "tool"
    assert {"from": "a_coordinator", "to": "a_legal", "label": "delegates", "style": "solid"} in signoff["graph"][
        "edges"
    ]
    assert signoff["graph"]["mermaid"].startswith("flowchart TD")
    handoffs = by_name["support-triage"]["graph"]["edges"]
    assert {"from": "a_triage", "to": "a_billing", "label": "hands off", "style": "dotted"} in handoffs
    workflow = {n["id"]: n["shape"] for n in by_name["workflow-chain"]["graph"]["nodes"]}
    assert workflow["start"] == "terminal" and workflow["finish"] == "terminal"
    assert refused.status_code == 401
    assert threads_off.status_code == 400 and threads_off.json()["error"]["code"] == "threads_unavailable"


def test_the_thread_api_answers_the_turns_of_a_thread_of_a_team_served_here(serve: Any, tmp_path: Path) -> None:
    store = open_store(tmp_path / "teamrun.db")
    server = serve([load("research-report")], store=store, tokens=frozenset({TOKEN}))
    with httpx.Client(base_url=server.url, headers=AUTH, timeout=60) as client:
        ids = []
        for text in ("Compare Rust and Go", "Which one compiles faster?"):
            run = client.post("/v1/runs", json={"team": "research-report", "input": text, "thread": "conv"}).json()
            assert "event: result" in client.get(f"/v1/runs/{run['id']}/events").text
            ids.append(run["id"])
        thread = client.get("/v1/threads/conv").json()
        unknown = client.get("/v1/threads/nope")
        answers = [client.get(f"/v1/runs/{i}").json()["final_text"] for i in ids]

    assert thread["id"] == "conv" and thread["team"] == "research-report" and thread["turns"] == 2
    assert [m["role"] for m in thread["messages"]] == ["user", "assistant", "user", "assistant"]
    assert [m["content"] for m in thread["messages"][0::2]] == ["Compare Rust and Go", "Which one compiles faster?"]
    assert [m["content"] for m in thread["messages"][1::2]] == answers
    assert [m["run_id"] for m in thread["messages"][0::2]] == ids
    assert unknown.status_code == 404 and unknown.json()["error"]["code"] == "thread_not_found"


def test_the_team_list_waits_for_every_script_of_the_page(serve: Any) -> None:
    """The team list's answer could arrive while graph.js (loaded after app.js) was still on its way: the page said
    "cannot list teams: TeamrunGraph is not defined" and drew no graph (seen in the docs' screenshot)."""
    server = serve([load("research-report")])  # no token: the page lists the teams as it loads

    def late(route: Any) -> None:
        time.sleep(1.5)  # the script arrives after the list's answer
        route.continue_()

    with chromium() as browser:
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        page.route("**/web/graph.js", late)
        page.goto(server.url + "/")
        expect(page.locator("#team option")).not_to_have_count(0, timeout=30_000)
        expect(page.locator("#team-graph svg")).to_have_count(1, timeout=30_000)
        assert "cannot list teams" not in (page.locator("#error").text_content() or "")
