"""Reading a run at a glance (issue 42 item 15), in Chromium: the summary's tokens split in and out, a row's label
showing most of its task and all of its figures, axis labels apart at a phone's width, whole problem lines, and a
board's operations in the workspace panel."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

from playwright.sync_api import expect

from tests.observe.handmade import line, solo_run
from tests.view.conftest import OpenPage
from tests.view.pages import view_of

TASK = "Compare the prices of the three vendors' enterprise plans ok"  # 60 characters


def test_the_summary_says_its_tokens_in_and_out(tmp_path: Path, open_page: OpenPage) -> None:
    page = open_page(view_of(solo_run(calls=2, tokens=100), tmp_path).as_uri()).page
    tokens = page.locator(".tv-fact[data-fact=tokens]")
    expect(tokens.locator("b")).to_have_text("200")
    expect(tokens).to_have_text("tokens200 (100 in, 100 out)")  # was: tokens 200


def _worker_run() -> list[dict[str, Any]]:
    lead, worker = ["lead"], ["lead", "researcher"]
    usage = {"input_tokens": 123456, "output_tokens": 65432, "total_tokens": 188888}
    return [
        line("run_start", 0.0, span="s1", team="t"),
        line("agent_start", 0.0, span="s2", parent="s1", path=lead),
        line("delegation_start", 0.5, span="d1", parent="s2", path=lead, worker="researcher", task=TASK),
        line("agent_start", 0.5, span="w1", parent="d1", path=worker, task=TASK),
        line("llm_start", 0.5, span="c1", parent="w1", path=worker, model="m"),
        line("llm_end", 11.5, span="c1", parent="w1", path=worker, status="ok", usage=usage),
        line("agent_end", 11.5, span="w1", parent="d1", path=worker, status="ok", usage=usage),
        line("delegation_end", 11.5, span="d1", parent="s2", path=lead, worker="researcher", status="ok"),
        line("agent_end", 12.0, span="s2", parent="s1", path=lead, status="ok"),
        line("run_end", 12.0, span="s1", status="done"),
    ]


def test_a_rows_label_shows_most_of_its_task_and_all_its_figures(tmp_path: Path, open_page: OpenPage) -> None:
    page = open_page(view_of(_worker_run(), tmp_path).as_uri()).page
    page.set_viewport_size({"width": 1280, "height": 900})
    row = page.locator(".tv-row[data-agent=researcher]")
    meta = row.locator(".tv-meta")
    expect(meta).to_have_text("11.0 s · 188888 tok (123456 in, 65432 out)")
    cut = meta.evaluate("e => e.scrollWidth > e.clientWidth + 1")
    preview = row.locator(".tv-preview")
    shown = preview.evaluate("e => Math.floor(e.textContent.length * Math.min(1, e.clientWidth / e.scrollWidth))")
    assert cut is False  # was: "... (123456 in, 654" cut
    assert shown >= 45, shown  # was about 20 of the 60


def test_the_axis_labels_do_not_overlap_at_a_phones_width(tmp_path: Path, open_page: OpenPage) -> None:
    page = open_page(view_of(solo_run(calls=4), tmp_path).as_uri()).page  # 4 s: ticks of 1 s ("1.00 s"...)
    page.set_viewport_size({"width": 360, "height": 800})
    page.reload()
    ticks = page.locator(".tv-axis .tv-tick")
    expect(ticks.first).to_be_visible()
    boxes = [t.bounding_box() for t in ticks.all()]
    spans = sorted((b["x"], b["x"] + b["width"]) for b in boxes if b)
    overlaps = [(a, b) for a, b in itertools.pairwise(spans) if b[0] < a[1]]
    width = page.evaluate("document.documentElement.scrollWidth")
    assert len(spans) >= 2 and overlaps == [], spans
    assert width <= 360, width


def test_problem_lines_are_whole_and_the_rest_are_a_click_away(tmp_path: Path, open_page: OpenPage) -> None:
    records = solo_run(calls=1)
    for i in range(8):
        records.insert(3, line("warning", 1000.5, span="s2", parent="s1", path=["lead"], message=f"note {i} " * 12))
    page = open_page(view_of(records, tmp_path).as_uri()).page
    page.set_viewport_size({"width": 360, "height": 800})
    lines = page.locator(".tv-problems li")
    expect(lines).to_have_count(8)
    visible = [li.is_visible() for li in lines.all()]
    whole = page.locator(".tv-problems ul").evaluate("e => e.scrollHeight <= e.clientHeight + 1")
    page.locator(".tv-problems-all").click()
    expect(page.locator(".tv-problems li:visible")).to_have_count(8)
    assert visible == [True] * 5 + [False] * 3
    assert whole is True  # was a 12rem scroll box that cut a line in half


def test_the_workspace_panel_draws_a_boards_operations(tmp_path: Path, open_page: OpenPage) -> None:
    records = solo_run(calls=1)
    op = {"entry": "tasks", "version_before": 1, "version_after": 2, "status": "applied", "message": "posted t1"}
    records.insert(3, line("board_op", 1000.2, span="s2", parent="s1", path=["lead"], op="post", task_id="t1", **op))
    claim = dict(op, version_before=2, version_after=2, status="refused", reason="busy", message="t1 is claimed")
    records.insert(
        4, line("board_op", 1000.4, span="s2", parent="s1", path=["lead"], op="claim", task_id="t1", **claim)
    )
    page = open_page(view_of(records, tmp_path).as_uri()).page
    panel = page.locator(".tv-workspace")
    expect(panel.locator("h3")).to_have_text("Workspace (2 changes, 2 on a board, 1 refused)")  # was: no panel
    expect(panel.locator(".tv-ws-line")).to_have_text(
        ["+200 ms · lead · post t1 · v1 → v2 · applied", "+400 ms · lead · claim t1 · v2 · refused (busy)"]
    )


def test_the_timeline_is_one_tab_stop_and_the_arrow_keys_move_through_it(tmp_path: Path, open_page: OpenPage) -> None:
    page = open_page(view_of(_worker_run(), tmp_path).as_uri()).page
    stops = page.locator(".tv-grid [tabindex='0']")
    expect(stops).to_have_count(1)  # was: every row and every bar its own Tab stop
    page.locator(".tv-tools .tv-collapse-all").focus()
    page.keyboard.press("Tab")
    focused = "() => [document.activeElement.dataset.key, document.activeElement.className]"
    seen = [page.evaluate(focused)]
    for key in ("ArrowRight", "ArrowRight", "ArrowDown", "End", "Home", "ArrowUp"):
        page.keyboard.press(key)
        seen.append(page.evaluate(focused))
    page.keyboard.press("Tab")  # out of the timeline in one step
    after = page.evaluate("() => !!document.activeElement.closest('.tv-grid')")
    assert seen == [
        ["agent|r1:s2", "tv-who"],  # the first row's label
        ["agent|r1:s2", "tv-bar tv-agent tv-ok tv-critical"],  # its agent bar
        ["delegation|r1:d1", "tv-bar tv-wait tv-ok tv-critical"],  # its wait on the worker
        ["agent|r1:w1", "tv-bar tv-agent tv-ok tv-critical"],  # down: the worker's bar nearest in time
        ["llm|r1:c1", "tv-bar tv-llm tv-ok tv-critical"],  # End: its last bar
        ["agent|r1:w1", "tv-who"],  # Home: its label
        ["agent|r1:s2", "tv-who"],  # up: the label above
    ], seen
    assert after is False
