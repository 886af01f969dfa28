"""A run continued after people answered, in the run view: one event stream with several segments (each from
its own ``run_start``, span ids starting again at s1), calls of the earlier segments replayed from the journal.

``continued_run.jsonl`` is ``GET /v1/runs/<id>/events`` of a real run (``teamrun serve
teams/launch-signoff.yaml --store s.db --model offline``; POST /v1/runs, then q3, q1 and q2 answered one by one:
the run continued three times and ended ``done``), its event lines as the server sent them."""

from __future__ import annotations

import itertools
import json
import re
from pathlib import Path

import pytest
from playwright.sync_api import expect

from teamrun.observe.view import render_page
from tests.serve.axe_check import serious_problems
from tests.view.conftest import OpenPage

EVENTS = Path(__file__).with_name("continued_run.jsonl")


def _records() -> list[dict[str, object]]:
    return [json.loads(line) for line in EVENTS.read_text().splitlines() if line.strip()]


def _tokens(usage: object) -> int:
    assert isinstance(usage, dict)
    return int(usage["total_tokens"])


def test_a_continued_run_reads_per_segment_with_replayed_calls_not_counted_again(
    tmp_path: Path, open_page: OpenPage
) -> None:
    records = _records()
    starts = [r for r in records if r["kind"] == "run_start"]
    assert len(starts) == 4 and {r["span_id"] for r in starts} == {"s1"}  # the stream as the server sends it
    ends = [r for r in records if r["kind"] == "run_end"]
    run_total = _tokens(ends[-1]["data"]["usage"])  # type: ignore[index]
    paid = [_tokens(e["data"]["usage"]) for e in ends]  # type: ignore[index]
    per_part = [paid[0]] + [b - a for a, b in itertools.pairwise(paid)]  # what each segment paid
    page_file = tmp_path / "run.html"
    page_file.write_text(render_page(records))
    opened = open_page(page_file.as_uri())
    page = opened.page

    summaries = page.locator(".tv-summary")
    expect(summaries).to_have_count(4)
    fact = lambda name: summaries.locator(f".tv-fact[data-fact='{name}'] b")  # noqa: E731
    expect(fact("part")).to_have_text(["1 of 4", "2 of 4 (continued)", "3 of 4 (continued)", "4 of 4 (continued)"])
    expect(fact("model calls")).to_have_text(["4", "1", "1", "2"])  # made in that segment
    expect(fact("replayed calls")).to_have_text(["4", "5", "6"])  # segments 2-4 answer the earlier calls again
    expect(fact("tokens")).to_have_text([str(t) for t in per_part])
    assert sum(per_part) == run_total

    rows = page.locator(".tv-row[data-agent]")
    expect(rows).to_have_count(16)  # 4 invocations in each of 4 segments
    names = [n.strip() for n in page.locator(".tv-row[data-agent] .tv-name").all_inner_texts()]
    assert names == ["coordinator", "infra", "legal", "comms"] * 4  # each once per segment: no "#4"
    row_tokens = [
        int(re.match(r".*· (\d+) tok", m).group(1))  # type: ignore[union-attr]
        for m in page.locator(".tv-row[data-agent] .tv-meta").all_inner_texts()
    ]
    assert sum(row_tokens) == run_total  # the rows add up to the run's total: no replayed call counted again
    keys = [t.get_attribute("data-agent-key") for t in page.locator(".tv-toggle").all()]
    assert len(keys) == 4 and len(set(keys)) == 4  # one collapse toggle per segment's coordinator

    replayed = page.locator(".tv-bar.tv-llm[data-status=replayed]")
    expect(replayed).to_have_count(4 + 5 + 6)
    expect(page.locator(".tv-bar.tv-llm:not([data-status=replayed])")).to_have_count(4 + 1 + 1 + 2)
    expect(page.locator(".tv-legend .tv-sw-replayed")).to_have_count(1)
    expect(page.locator(".tv-problems li[data-level=waiting]")).to_have_count(0)  # the run is done: answered
    expect(page.locator(".tv-problems li[data-level=error]")).to_have_count(0)
    replayed.first.click()
    expect(page.locator("#tv-details")).to_contain_text("replayed from the journal")

    page.locator(".tv-toggle").nth(1).click()  # collapse the second segment's coordinator only
    expect(page.locator(".tv-row[data-agent]:visible")).to_have_count(13)
    assert serious_problems(page) == []
    assert opened.problems == []


def test_a_long_unbroken_input_wraps_inside_a_grid_column_at_360_px(tmp_path: Path, open_page: OpenPage) -> None:
    records = [r for r in _records() if r["kind"] != "run_continued"][:33]  # the first part: one run
    first = dict(records[0])
    first["data"] = {**first["data"], "input": "Launch " + "Q" * 3000}  # type: ignore[dict-item]
    records[0] = first
    page_file = tmp_path / "run.html"
    page_file.write_text(render_page(records))
    opened = open_page(page_file.as_uri())
    page = opened.page
    page.set_viewport_size({"width": 360, "height": 800})
    expect(page.locator(".tv-input")).to_contain_text("QQQ")
    # Embedded in a page whose grid column takes its content's minimum width (as the served workbench's does):
    # the input must wrap, not widen the column and the page.
    page.evaluate("document.body.style.display = 'grid'; document.body.style.gridTemplateColumns = '1fr'")
    for width in (360, 1280):
        page.set_viewport_size({"width": width, "height": 800})
        assert page.evaluate("document.documentElement.scrollWidth") <= width
    assert opened.problems == []


def _said_waiting(records: list[dict[str, object]]) -> list[dict[str, object]]:
    """The records as the engine writes them since it says so: a tool call or delegation cut off because the run
    suspended for a person ends ``status: waiting`` (was ``error``/``cancelled``, error ``cancelled``)."""
    waiting = {
        (r["run_id"], r["span_id"]) for r in records if r["kind"] == "agent_end" and r["data"]["status"] == "waiting"
    }  # type: ignore[index]
    said = []
    for r in records:
        data = dict(r.get("data") or {})  # type: ignore[call-overload]
        ends_tool = r["kind"] == "tool_end" and (r["run_id"], r["parent_span_id"]) in waiting
        if (ends_tool or r["kind"] == "delegation_end") and data.get("error") == "cancelled":
            data.update(status="waiting", error="waiting for a person")
        said.append({**r, "data": data})
    return said


@pytest.mark.parametrize("written", ["cancelled", "waiting"], ids=["before", "said-waiting"])
def test_a_run_waiting_for_people_is_not_drawn_as_failed(tmp_path: Path, open_page: OpenPage, written: str) -> None:
    records = _records() if written == "cancelled" else _said_waiting(_records())
    first_end = next(i for i, r in enumerate(records) if r["kind"] == "run_end")
    cut = [r for r in records[first_end + 1 :] if r["kind"] == "tool_end" and r["data"]["status"] != "ok"]  # type: ignore[index]
    assert cut  # the stream: each person tool call ends error "cancelled" as the run suspends
    page_file = tmp_path / "run.html"
    page_file.write_text(render_page(records[: first_end + 1]))  # the run as it waits (its first part)
    opened = open_page(page_file.as_uri())
    page = opened.page

    expect(page.locator(".tv-title .tv-status")).to_have_text("waiting")
    expect(page.locator(".tv-problems li[data-level=error]")).to_have_count(0)
    expect(page.locator(".tv-problems li[data-level=cancelled]")).to_have_count(0)
    waiting = page.locator(".tv-problems li[data-level=waiting]")
    expect(waiting).to_have_count(1)
    expect(waiting).to_contain_text("waiting for a person: infra, legal, comms")
    tools = page.locator(".tv-bar.tv-tool")
    expect(tools).to_have_count(3)
    assert {t.get_attribute("data-status") for t in tools.all()} == {"waiting"}  # not error: nothing failed
    expect(page.locator(".tv-bar.tv-failed")).to_have_count(0)
    assert serious_problems(page) == []
    assert opened.problems == []


def test_a_served_run_without_events_shows_no_invented_zeros(tmp_path: Path, open_page: OpenPage) -> None:
    page_file = tmp_path / "run.html"
    page_file.write_text(render_page([]))
    opened = open_page(page_file.as_uri())
    page = opened.page
    # As the workbench opens a run from the store whose events were not kept (the server was killed mid-run).
    record = {
        "id": "run_k",
        "object": "teamrun.run",
        "team": "t",
        "status": "failed",
        "source": "store",
        "result": {
            "status": "failed",
            "usage": {"input_tokens": 300, "output_tokens": 95, "total_tokens": 395},
            "cost": 0.00007,
        },
    }
    page.evaluate(
        "(record) => { const box = document.createElement('div'); box.id = 'served';"
        " document.body.append(box); TeamrunView.mount(box, { result: record }); }",
        record,
    )
    facts = page.locator("#served .tv-fact")
    expect(facts.locator("b")).to_have_count(3)
    assert [f.get_attribute("data-fact") for f in facts.all()] == ["run", "tokens", "cost"]  # no 0 agents, 0 calls
    expect(page.locator("#served .tv-fact[data-fact=tokens] b")).to_have_text("395")
    expect(page.locator("#served .tv-fact[data-fact=cost] b")).to_have_text("$0.000070")
    expect(page.locator("#served .tv-empty")).to_have_text("no events of this run to draw (they were not kept)")
    assert opened.problems == []
