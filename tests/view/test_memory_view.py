"""The run view shows what each agent recalled from long-term memory and what it saved (issue 44.4): a point on
the agent's row where it happened, and in its details the ids and scores (the facts and the query only from a
trace recorded with ``--trace-content``); the workbench embeds the same view."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.sync_api import Locator, Page, expect

import teamrun
from teamrun.cli import main
from teamrun.store import open_store
from tests.observe.handmade import HEADER, line
from tests.serve.axe_check import serious_problems
from tests.serve.conftest import REPO, _loopback_without_proxy, serve
from tests.view.conftest import OpenPage

__all__ = ["_loopback_without_proxy", "serve"]

DESK = REPO / "teams" / "support-desk.yaml"
MEMORY = ("memory_recall", "memory_save")


@pytest.fixture(autouse=True)
def _offline(monkeypatch: pytest.MonkeyPatch) -> None:
    """support-desk.yaml takes its models from these variables: unset, it runs on the offline model and embedding."""
    monkeypatch.delenv("TEAMRUN_MODEL", raising=False)
    monkeypatch.delenv("TEAMRUN_EMBEDDING_MODEL", raising=False)


def _recorded(tmp_path: Path, *, content: bool) -> tuple[Path, list[dict[str, Any]]]:
    """support-desk for customer-42 on the offline model, traced and viewed through the CLI: the desk recalls
    before each turn, asks billing (which searches), saves "example" and recalls it before its last turn. The
    page's path and the trace's lines."""
    trace = tmp_path / "run.jsonl"
    flags = ["--trace-content"] if content else []
    store = ["--store", str(tmp_path / "teamrun.db"), "--resource", "customer-42"]
    assert (
        main(["execute", str(DESK), "-i", "example", *store, "--progress", "none", "--trace", str(trace), *flags]) == 0
    )
    page = tmp_path / "run.html"
    assert main(["trace", "view", str(trace), "-o", str(page)]) == 0
    return page, [json.loads(raw) for raw in trace.read_text(encoding="utf-8").splitlines()]


def _said(event: dict[str, Any]) -> str:
    """What a memory point says (its label), written here from the trace's line."""
    d = event["data"]
    if event["kind"] == "memory_save":
        return f"saved memory {d['id'][:8]}"
    which = (
        ": " + ", ".join(f"{i[:8]} ({s:.2f})" for i, s in zip(d["ids"], d["scores"], strict=True)) if d["ids"] else ""
    )
    many = f"{len(d['ids'])} {'memory' if len(d['ids']) == 1 else 'memories'}" if d["ids"] else "nothing"
    return (f"recalled {many} before its turn" if d["how"] == "recall" else f"memory_search found {many}") + which


def _x(locator: Locator) -> tuple[float, float]:
    box = locator.bounding_box()
    assert box is not None
    return box["x"], box["x"] + box["width"]


def _memory_points_are_where_they_happened(page: Page, lines: list[dict[str, Any]]) -> dict[str, Any]:
    """Each agent's memory lines are points on its row, in time order, saying what happened; the save sits on its
    memory_save tool call's bar, each recall before the model call it was for. The desk's recall that found the
    saved fact."""
    memory = [r for r in lines if r["kind"] in MEMORY]
    desk = [r for r in memory if r["agent_path"] == ["desk"]]
    billing = [r for r in memory if r["agent_path"] == ["desk", "billing"]]
    assert [r["data"]["how"] for r in billing if r["kind"] == "memory_recall"] == ["search"]
    found = [r for r in desk if r["kind"] == "memory_recall" and r["data"]["ids"]]
    assert found and [r["data"]["status"] for r in desk if r["kind"] == "memory_save"] == ["saved"]

    for agent, mine in (("desk", desk), ("billing", billing)):
        points = page.locator(f".tv-row[data-agent={agent}] .tv-mark-memory")
        expect(points).to_have_count(len(mine))
        for index, event in enumerate(mine):
            expect(points.nth(index)).to_have_attribute("aria-label", _said(event))
            expect(points.nth(index)).to_have_attribute("role", "img")
        xs = [_x(points.nth(i))[0] for i in range(len(mine))]
        assert xs == sorted(xs), xs

    points = page.locator(".tv-row[data-agent=desk] .tv-mark-memory")
    save = next(i for i, r in enumerate(desk) if r["kind"] == "memory_save")
    tool = _x(page.locator(".tv-row[data-agent=desk] .tv-bar.tv-tool[aria-label^='tool memory_save']"))
    assert tool[0] - 1 <= _x(points.nth(save))[0] <= tool[1] + 1  # during its tool call
    calls = page.locator(".tv-row[data-agent=desk] .tv-bar.tv-llm")
    recalls = [i for i, r in enumerate(desk) if r["kind"] == "memory_recall"]
    expect(calls).to_have_count(len(recalls))  # one recall before each turn
    for turn, index in enumerate(recalls):
        assert _x(points.nth(index))[0] <= _x(calls.nth(turn))[0] + 1
    return found[-1]


def _open_point(page: Page, event: dict[str, Any]) -> Locator:
    """Clicks the point of ``event`` on its agent's row; the details' memory item it highlights."""
    page.locator(
        f".tv-row[data-agent={event['agent_path'][-1]}] .tv-mark-memory[aria-label='{_said(event)}']"
    ).last.click()
    details = page.locator("#tv-details")
    expect(details).to_be_visible()
    expect(details.locator("h3")).to_contain_text(f"agent {event['agent_path'][-1]}")
    chosen = details.locator(".tv-memory-item.selected")
    expect(chosen).to_have_count(1)
    return chosen


def test_each_agents_recalls_and_saves_are_points_on_its_row_with_ids_scores_and_facts(
    tmp_path: Path, open_page: OpenPage, restore_structlog: None
) -> None:
    page_file, lines = _recorded(tmp_path, content=True)
    opened = open_page(page_file.as_uri())
    page = opened.page
    expect(page.locator(".tv-legend .tv-sw-memory")).to_have_count(2)  # recalled, saved

    found = _memory_points_are_where_they_happened(page, lines)

    chosen = _open_point(page, found)
    ids, scores, facts = found["data"]["ids"], found["data"]["scores"], found["data"]["facts"]
    assert facts == ["example"]
    expect(chosen.locator(".tv-memory-line")).to_contain_text("recall before its turn · 1 memory")
    expect(chosen.locator(".tv-memory-query")).to_have_text("query: example")
    recalled = chosen.locator(".tv-recalled")
    expect(recalled).to_have_count(1)
    expect(recalled.locator(".tv-memory-id")).to_have_text(ids[0])
    expect(recalled.locator(".tv-memory-score")).to_have_text(f"score {scores[0]:.2f}")
    expect(recalled.locator(".tv-memory-fact")).to_have_text("example")
    items = page.locator("#tv-details .tv-memory-item")  # every recall and save of the desk, in order
    expect(items).to_have_count(len([r for r in lines if r["kind"] in MEMORY and r["agent_path"] == ["desk"]]))
    saved = page.locator("#tv-details .tv-memory-item[data-kind=memory_save]")
    expect(saved.locator(".tv-memory-line")).to_contain_text(f"saved {ids[0]} (new)")
    expect(saved.locator(".tv-memory-fact")).to_have_text("example")
    assert serious_problems(page) == []  # the points and the details read out

    search = page.get_by_label("search the timeline's rows")  # a memory's id finds the rows that recalled or saved it
    search.fill(ids[0][:12])
    expect(page.locator(".tv-row[data-agent]:visible")).to_have_count(1)
    expect(page.locator(".tv-row[data-agent]:visible")).to_have_attribute("data-agent", "desk")
    assert opened.problems == []


def test_without_trace_content_the_details_give_ids_and_scores_and_say_the_facts_were_not_captured(
    tmp_path: Path, open_page: OpenPage, restore_structlog: None
) -> None:
    page_file, lines = _recorded(tmp_path, content=False)
    assert not any("facts" in r["data"] or "fact" in r["data"] for r in lines if r["kind"] in MEMORY)
    opened = open_page(page_file.as_uri())
    page = opened.page

    found = _memory_points_are_where_they_happened(page, lines)

    chosen = _open_point(page, found)
    expect(chosen.locator(".tv-memory-id")).to_have_text(found["data"]["ids"][0])
    expect(chosen.locator(".tv-memory-score")).to_have_text(f"score {found['data']['scores'][0]:.2f}")
    expect(chosen.locator(".tv-memory-fact")).to_have_count(0)
    expect(chosen.locator(".tv-memory-query")).to_have_count(0)
    expect(chosen.locator(".tv-empty")).to_have_text(
        "Facts were not captured for this run (record it with --trace-content to see them)."
    )
    expect(page.locator("#tv-details .tv-memory-fact")).to_have_count(0)
    assert opened.problems == []


def test_replayed_forgotten_refused_and_hostile_memory_lines_read_as_they_are(
    tmp_path: Path, open_page: OpenPage
) -> None:
    lead, rlo = ["lead"], "\u202e"
    at: dict[str, Any] = {"span": "s2", "parent": "s1", "path": lead, "resource": "c"}
    hostile = ["<img src=x onerror=\"window.__pwned='fact'\">", f"{rlo}abc"]
    recalled = {"ids": ["aaaaaaaa1111", "bbbbbbbb2222"], "scores": [0.9123, 0.5], "query": "q", "facts": hostile}
    refused = {"reason": "the fact is longer than max_fact_chars (500)", "fact": "x" * 600}
    records = [
        {**HEADER, "content": True},
        line("run_start", 1000.0, span="s1", team="mem"),
        line("agent_start", 1000.0, span="s2", parent="s1", path=lead, model="m"),
        line("memory_recall", 1000.1, **at, how="recall", replayed=True, **recalled),
        line("memory_recall", 1000.2, **at, how="recall", ids=["cccccccc3333"], scores=[0.7], forgotten=True),
        line("memory_save", 1000.3, **at, status="refused", **refused),
        line("memory_save", 1000.4, **at, status="known", id="cccccccc3333", fact="known fact"),
        line("agent_end", 1001.0, span="s2", parent="s1", path=lead, status="ok"),
        line("run_end", 1001.0, span="s1", status="done"),
    ]
    trace = tmp_path / "run.jsonl"
    trace.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    assert main(["trace", "view", str(trace)]) == 0
    opened = open_page(trace.with_suffix(".html").as_uri())
    page = opened.page

    points = page.locator(".tv-row[data-agent=lead] .tv-mark-memory")
    expect(points).to_have_count(4)
    expect(points.nth(0)).to_have_attribute(
        "aria-label",
        "recalled 2 memories before its turn: aaaaaaaa (0.91), bbbbbbbb (0.50) · replayed from the journal",
    )
    expect(points.nth(1)).to_have_attribute("aria-label", "recalled 1 memory before its turn: cccccccc (0.70)")
    expect(points.nth(2)).to_have_attribute(
        "aria-label", "memory_save refused: the fact is longer than max_fact_chars (500)"
    )
    expect(points.nth(2)).to_have_class("tv-mark tv-mark-memory tv-mark-memory-save tv-mark-memory-refused")
    expect(points.nth(3)).to_have_attribute("aria-label", "memory_save: already known as cccccccc (one memory)")
    assert page.locator(".tv-problems .tv-problem").count() == 0  # a memory line is not a problem

    points.nth(1).click()
    items = page.locator("#tv-details .tv-memory-item")
    expect(items).to_have_count(4)
    expect(items.nth(1)).to_have_class("tv-memory-item selected")
    facts = items.nth(0).locator(".tv-memory-fact")
    expect(facts.nth(0)).to_have_text("<img src=x onerror=\"window.__pwned='fact'\">")  # text, never HTML
    expect(facts.nth(1)).to_have_text(f"{rlo}abc")
    expect(items.nth(0).locator(".tv-memory-line")).to_contain_text("replayed from the journal")
    expect(items.nth(1).locator(".tv-memory-fact")).to_have_count(0)
    expect(items.nth(1).locator(".tv-empty")).to_have_text("Forgotten (teamrun memory forget): its facts are not kept.")
    expect(items.nth(2).locator(".tv-memory-line")).to_contain_text("refused: the fact is longer than max_fact_chars")
    expect(items.nth(3).locator(".tv-memory-line")).to_contain_text("already known: cccccccc3333 (one memory)")
    assert page.locator(".teamrun-view img").count() == 0
    assert page.evaluate("window.__pwned") is None
    assert opened.problems == []


def test_the_workbench_shows_a_served_runs_recalls_and_saves(
    serve: Any, tmp_path: Path, open_page: OpenPage, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("TEAMRUN_STORE", raising=False)
    store = open_store(tmp_path / "teamrun.db")
    server = serve([teamrun.load_team(DESK, store=store)], store=store)  # loopback, no token
    with httpx.Client(base_url=server.url, timeout=60) as client:
        body = {"team": "support-desk", "input": "example", "resource": "customer-42"}
        run_id = str(client.post("/v1/runs", json=body).json()["id"])
        events = client.get(f"/v1/runs/{run_id}/events").text  # read until the run is over
    assert "event: result" in events and "memory_recall" in events

    opened = open_page(f"{server.url}/#run={run_id}")
    view = opened.page.locator("#run-view")
    expect(view.locator(".tv-title .tv-status")).to_have_text("done")
    points = view.locator(".tv-row[data-agent=desk] .tv-mark-memory")
    expect(points).not_to_have_count(0)
    labels = [points.nth(i).get_attribute("aria-label") or "" for i in range(points.count())]
    assert "saved memory" in " ".join(labels) and any(label.startswith("recalled 1 memory") for label in labels)
    expect(view.locator(".tv-row[data-agent=billing] .tv-mark-memory")).to_have_attribute(
        "aria-label", "memory_search found nothing"
    )
    points.last.click()
    chosen = view.locator("#tv-details .tv-memory-item.selected")
    expect(chosen.locator(".tv-memory-id")).to_have_count(1)
    expect(chosen.locator(".tv-empty")).to_contain_text("Facts were not captured")  # served without --trace-content
    assert opened.problems == []


def test_a_recall_of_earlier_threads_messages_reads_as_messages_not_memories(
    tmp_path: Path, open_page: OpenPage
) -> None:
    """Attack a44m item 4: a ``how: messages`` recall was labelled ``recalled 5 memories before its turn``."""
    lead = ["lead"]
    at: dict[str, Any] = {"span": "s2", "parent": "s1", "path": lead, "resource": "c"}
    quoted = {"ids": ["dddddddd4444", "eeeeeeee5555"], "scores": [0.85, 0.4], "query": "q", "facts": ["hi", "yo"]}
    records = [
        {**HEADER, "content": True},
        line("run_start", 1000.0, span="s1", team="mem"),
        line("agent_start", 1000.0, span="s2", parent="s1", path=lead, model="m"),
        line("memory_recall", 1000.1, **at, how="recall", ids=[], scores=[], query="q", facts=[]),
        line("memory_recall", 1000.1, **at, how="messages", **quoted),
        line("memory_recall", 1000.2, **at, how="messages", ids=["ffffffff6666"], scores=[0.5], replayed=True),
        line("agent_end", 1001.0, span="s2", parent="s1", path=lead, status="ok"),
        line("run_end", 1001.0, span="s1", status="done"),
    ]
    trace = tmp_path / "run.jsonl"
    trace.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    assert main(["trace", "view", str(trace)]) == 0
    opened = open_page(trace.with_suffix(".html").as_uri())
    page = opened.page

    points = page.locator(".tv-row[data-agent=lead] .tv-mark-memory")
    expect(points).to_have_count(3)
    expect(points.nth(0)).to_have_attribute("aria-label", "recalled nothing before its turn")
    expect(points.nth(1)).to_have_attribute(
        "aria-label", "recalled 2 earlier messages before its turn: dddddddd (0.85), eeeeeeee (0.40)"
    )
    expect(points.nth(2)).to_have_attribute(
        "aria-label", "recalled 1 earlier message before its turn: ffffffff (0.50) · replayed from the journal"
    )
    points.nth(1).click()
    items = page.locator("#tv-details .tv-memory-item")
    expect(items).to_have_count(3)
    said = "earlier threads' messages before its turn · 2 messages"
    expect(items.nth(1).locator(".tv-memory-line")).to_contain_text(said)
    expect(items.nth(1).locator(".tv-memory-fact")).to_have_text(["hi", "yo"])
    expect(items.nth(2).locator(".tv-empty")).to_have_text(
        "Messages were not captured for this run (record it with --trace-content to see them)."
    )
    assert opened.problems == []
