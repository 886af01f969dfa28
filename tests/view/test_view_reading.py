"""The run view read at a glance (issue 36): rows that say what each invocation was asked, separate lanes for
model and tool calls, an axis, search / filters / collapse on a big run, grouped problems, raw events with a
copy button, one cost rule in the view and the CLI, keyboard use and no serious axe-core violation."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from playwright.sync_api import Page, expect

from teamrun.cli import main
from teamrun.observe.trace_read import read_trace
from tests.fakeserver import FakeOpenAI, http_error, text, tool_calls
from tests.observe.conftest import TeamWriter
from tests.observe.handmade import line, solo_run, write_trace
from tests.serve.axe_check import serious_problems
from tests.view.conftest import FanOutPage, OpenPage, RunPage
from tests.view.fanout import record_fan_out
from tests.view.pages import view_of, view_trace

REPO = Path(__file__).resolve().parents[2]
ROWS = ".tv-row[data-agent]"


def _box(page: Page, selector: str) -> tuple[float, float, float, float]:
    box = page.locator(selector).first.bounding_box()
    assert box is not None, selector
    return (box["x"], box["y"], box["width"], box["height"])


def test_a_row_says_what_was_asked_how_long_it_took_and_its_tokens_in_and_out(fan_out_page: FanOutPage) -> None:
    trace, _, opened = fan_out_page(0.3)
    page = opened.page

    alpha = read_trace(trace).roots[0].find("agent", "alpha")[0]
    label = page.locator(".tv-row[data-agent=alpha] .tv-label")
    expect(label.locator(".tv-name")).to_have_text("alpha")
    expect(label.locator(".tv-preview")).to_have_text("· about a")  # what it was asked
    meta = label.locator(".tv-meta").inner_text()
    usage = alpha.usage
    assert re.fullmatch(r"\d+(\.\d+)? (ms|s)", meta.split(" · ")[0]), meta
    assert meta.endswith(
        f" · {usage['total_tokens']} tok ({usage['input_tokens']} in, {usage['output_tokens']} out)"
    ), meta
    lead_bar = page.locator(".tv-row[data-agent=lead] .tv-bar.tv-agent")  # a long bar says its duration
    expect(lead_bar).to_have_text(re.compile(r"^\d+(\.\d+)? (ms|s)$"))
    ticks = page.locator(".tv-axis .tv-tick")
    assert ticks.count() >= 4
    lefts = [t.bounding_box()["x"] for t in ticks.all()]  # type: ignore[index]
    assert lefts == sorted(lefts) and len(set(lefts)) == len(lefts)
    expect(page.locator(".tv-axis .tv-tick").first).to_have_text("0 ms")

    before = {s: _box(page, s) for s in (".tv-grid", ".tv-row[data-agent=beta] .tv-bar.tv-agent", ".tv-search")}
    page.locator(".tv-row[data-agent=beta] .tv-bar.tv-llm").click()
    expect(page.locator("#tv-details")).to_be_visible()
    after = {s: _box(page, s) for s in before}
    assert after == before  # opening the details does not move the timeline

    page.keyboard.press("Escape")  # Escape closes them, and the focus goes back to what opened them
    expect(page.locator("#tv-details")).to_be_hidden()
    assert page.evaluate("document.activeElement.dataset.kind") == "llm"
    page.locator(".tv-row[data-agent=gamma] .tv-who").focus()  # rows: focusable, opened with Enter
    page.keyboard.press("Enter")
    expect(page.locator("#tv-details h3")).to_contain_text("agent gamma")
    assert page.evaluate("document.activeElement.getAttribute('aria-label')") == "close the details (Escape)"
    assert _box(page, ".tv-grid") == before[".tv-grid"]
    page.keyboard.press("Escape")
    expect(page.locator("#tv-details")).to_be_hidden()
    assert page.evaluate("document.activeElement.dataset.key") == page.locator(
        ".tv-row[data-agent=gamma] .tv-who"
    ).get_attribute("data-key")
    assert opened.problems == []


def test_model_calls_and_tool_calls_have_their_own_lanes(run_page: RunPage) -> None:
    opened = run_page(REPO / "teams" / "research-report.yaml", "Compare Rust and Go").opened
    page = opened.page

    row = page.locator(".tv-row[data-agent=researcher]").first
    calls = [b.bounding_box() for b in row.locator(".tv-bar.tv-llm").all()]
    tools = [b.bounding_box() for b in row.locator(".tv-bar.tv-tool").all()]
    assert len(calls) >= 2 and tools
    assert len({c["y"] for c in calls if c}) == 1 and len({t["y"] for t in tools if t}) == 1  # one lane each
    call_lane, tool_lane = calls[0], tools[0]
    assert call_lane is not None and tool_lane is not None
    assert call_lane["y"] + call_lane["height"] <= tool_lane["y"]  # the tool lane is under the model-call lane
    assert opened.problems == []


def test_adjacent_calls_stay_apart(tmp_path: Path, open_page: OpenPage) -> None:
    """Back-to-back model calls (no gap) are two blocks, each saying how long it took."""
    lead = ["lead"]
    records = [
        line("run_start", 0.0, span="s1", team="t"),
        line("agent_start", 0.0, span="s2", parent="s1", path=lead, task="write it"),
        line("llm_start", 0.0, span="c1", parent="s2", path=lead, model="m"),
        line("llm_end", 4.0, span="c1", parent="s2", path=lead, status="ok"),
        line("llm_start", 4.0, span="c2", parent="s2", path=lead, model="m"),
        line("llm_end", 8.0, span="c2", parent="s2", path=lead, status="ok"),
        line("tool_start", 8.0, span="t1", parent="s2", path=lead, tool="grep"),
        line("tool_end", 10.0, span="t1", parent="s2", path=lead, status="ok"),
        line("agent_end", 10.0, span="s2", parent="s1", path=lead, status="ok"),
        line("run_end", 10.0, span="s1", status="done"),
    ]
    opened = open_page(view_of(records, tmp_path).as_uri())
    page = opened.page

    bars = page.locator(".tv-row[data-agent=lead] .tv-bar.tv-llm")
    expect(bars).to_have_text(["4.00 s", "4.00 s"])
    first, second = (b.bounding_box() for b in bars.all())
    assert first is not None and second is not None
    assert first["x"] + first["width"] <= second["x"] + 0.5  # two blocks side by side, not one
    separator = bars.first.evaluate("(e) => getComputedStyle(e).boxShadow")
    assert "inset" in separator  # a white edge between them
    expect(page.locator(".tv-row[data-agent=lead] .tv-bar.tv-tool")).to_have_text("2.00 s")
    assert opened.problems == []


def test_search_filters_and_collapse_narrow_a_300_worker_run(tmp_path: Path, open_page: OpenPage) -> None:
    opened = open_page(view_trace(record_fan_out(tmp_path, 300)).as_uri())
    page = opened.page
    rows, shown = page.locator(ROWS), page.locator(".tv-shown")
    visible = page.locator(f"{ROWS}:visible")
    expect(rows).to_have_count(301)
    expect(shown).to_have_text("301 of 301 rows")
    expect(page.locator(".tv-row[data-agent=worker] .tv-label").nth(250)).to_contain_text("worker #251· item 250")

    search = page.get_by_label("search the timeline's rows")
    search.fill("item 250")
    expect(visible).to_have_count(1)
    expect(visible.locator(".tv-preview")).to_have_text("· item 250")
    expect(shown).to_have_text("1 of 301 rows")
    search.fill("item 25")  # item 25, 250..259
    expect(visible).to_have_count(11)
    search.fill("")
    expect(visible).to_have_count(301)

    kind = page.get_by_label("show only rows of this kind")
    kind.select_option("delegation")  # only the lead waited on workers
    expect(visible).to_have_count(1)
    expect(visible).to_have_attribute("data-agent", "lead")
    kind.select_option("llm")
    expect(visible).to_have_count(301)
    kind.select_option("")
    status = page.get_by_label("show only rows of this status")
    status.select_option("failed")
    expect(visible).to_have_count(0)
    expect(shown).to_have_text("0 of 301 rows")
    status.select_option("ok")
    expect(visible).to_have_count(301)
    status.select_option("")
    agent = page.get_by_label("show only rows of this agent")
    agent.select_option("lead")
    expect(visible).to_have_count(1)
    agent.select_option("worker")
    expect(visible).to_have_count(300)
    agent.select_option("")

    toggle = page.locator(".tv-row[data-agent=lead] .tv-toggle")
    expect(toggle).to_have_attribute("aria-label", "collapse the 300 invocations under lead")
    toggle.click()  # collapse the lead's subtree
    expect(visible).to_have_count(1)
    expect(toggle).to_have_attribute("aria-expanded", "false")
    expect(page.locator("#tv-details")).to_be_hidden()  # the toggle is not the row's button
    search.fill("item 7")  # a search looks inside collapsed rows
    expect(visible).to_have_count(11)
    search.fill("")
    expect(visible).to_have_count(1)
    toggle.press("Enter")  # and it works from the keyboard
    expect(visible).to_have_count(301)
    assert opened.problems == []


def test_one_failure_seen_at_three_levels_is_one_problem(
    fake_openai: FakeOpenAI, write_team: TeamWriter, run_page: RunPage
) -> None:
    team = """\
supervisor: lead
agents:
  lead:
    model: openai/lead
    delegates_to: [alpha, beta]
    delegation: {parallel: true}
  alpha: {model: openai/alpha, description: Researches alpha.}
  beta: {model: openai/beta, description: Researches beta.}
"""
    asks = tool_calls(("ask_alpha", {"task": "a"}), ("ask_beta", {"task": "b"}))
    fake_openai.script("lead", [asks, text("alpha only")])
    fake_openai.script("alpha", [text("alpha done")])
    fake_openai.script("beta", [http_error(500, message="beta's provider broke")])
    trace, _, opened = run_page(write_team(team), "go")
    page = opened.page

    failed = [n for n in read_trace(trace).roots[0].walk() if n.status not in ("ok", "done")]
    assert {n.kind for n in failed} >= {"llm", "agent", "delegation"}  # the trace has it at three levels
    errors = page.locator(".tv-problems li[data-level=error]")
    expect(errors).to_have_count(1)  # the view: one problem
    expect(errors).to_contain_text("beta: ")
    expect(errors).to_contain_text("beta's provider broke")
    expect(errors).to_contain_text("seen at: model call openai/beta, agent, delegation")
    expect(errors.locator(".tv-level")).to_have_text("error")  # a word beside the colour
    errors.locator("[role=button]").click()
    expect(page.locator("#tv-details h3")).to_contain_text("model call openai/beta")  # the deepest: where it began
    assert serious_problems(page) == []
    assert opened.problems == []


def test_cancelled_spans_are_one_line_not_errors(tmp_path: Path, open_page: OpenPage) -> None:
    lead, worker = ["lead"], ["lead", "researcher"]
    records = [
        line("run_start", 0.0, span="s1", team="t"),
        line("agent_start", 0.0, span="s2", parent="s1", path=lead),
        line("llm_start", 0.0, span="c1", parent="s2", path=lead, model="m"),
        line("llm_end", 1.0, span="c1", parent="s2", path=lead, status="ok"),
    ]
    for i in range(3):
        d, a, c = f"d{i}", f"w{i}", f"wc{i}"
        records += [
            line("delegation_start", 1.0, span=d, parent="s2", path=lead, worker="researcher"),
            line("agent_start", 1.0, span=a, parent=d, path=worker, task=f"item {i}"),
            line("llm_start", 1.0, span=c, parent=a, path=worker, model="m"),
            line("llm_end", 3.0, span=c, parent=a, path=worker, status="cancelled"),
            line("agent_end", 3.0, span=a, parent=d, path=worker, status="cancelled"),
            line("delegation_end", 3.0, span=d, parent="s2", path=lead, worker="researcher", status="cancelled"),
        ]
    records += [
        line("agent_end", 3.0, span="s2", parent="s1", path=lead, status="cancelled"),
        line("run_end", 3.0, span="s1", status="cancelled", stopped_by="ctrl-c"),
    ]
    opened = open_page(view_of(records, tmp_path).as_uri())
    page = opened.page

    problems = page.locator(".tv-problems li")
    expect(problems).to_have_count(1)
    expect(problems).to_have_attribute("data-level", "cancelled")
    expect(problems).to_contain_text("cancelled: 10 spans (lead, researcher #1, researcher #2 and 1 more)")
    expect(page.locator(".tv-problems li[data-level=error]")).to_have_count(0)
    assert opened.problems == []


def test_details_show_the_raw_events_and_copy_them(fan_out_page: FanOutPage) -> None:
    trace, _, opened = fan_out_page(0.0)
    page = opened.page
    page.context.grant_permissions(["clipboard-read", "clipboard-write"])

    page.locator(".tv-row[data-agent=alpha] .tv-bar.tv-llm").click()
    raw = page.locator("#tv-details .tv-raw")
    shown = json.loads(raw.inner_text())
    span = shown[0]["span_id"]
    recorded = [r for r in read_trace(trace).records if r.get("span_id") == span and r["kind"].startswith("llm")]
    assert shown == recorded  # the span's lines as written: start, its messages, end
    assert [r["kind"] for r in shown] == ["llm_start", "llm_io", "llm_end"]

    page.get_by_role("button", name="copy the raw events as JSON").click()
    expect(page.locator("#tv-details .tv-copied")).to_have_text("copied")
    assert json.loads(page.evaluate("navigator.clipboard.readText()")) == recorded

    # Without the Clipboard API (some browsers on a file:// page): the text is selected, to copy by hand or
    # by the old command.
    page.evaluate("Object.defineProperty(navigator, 'clipboard', { value: undefined, configurable: true })")
    page.get_by_role("button", name="copy the raw events as JSON").click()
    expect(page.locator("#tv-details .tv-copied")).to_have_text(re.compile("copied|selected: press Ctrl"))
    assert json.loads(page.evaluate("window.getSelection().toString()")) == recorded
    assert opened.problems == []


@pytest.mark.parametrize("cost", [0.0000123, 0.02, 1.23456])
def test_a_cost_reads_the_same_in_the_view_and_the_cli(
    cost: float, tmp_path: Path, open_page: OpenPage, capsys: pytest.CaptureFixture[str]
) -> None:
    trace = write_trace(tmp_path / "run.jsonl", solo_run(calls=1, cost=cost))
    assert main(["trace", "show", str(trace)]) == 0
    shown = capsys.readouterr().out
    expected = {0.0000123: "$0.000012", 0.02: "$0.0200", 1.23456: "$1.2346"}[cost]
    assert expected in shown, shown
    opened = open_page(view_trace(trace).as_uri())
    page = opened.page
    expect(page.locator(".tv-fact[data-fact=cost] b")).to_have_text(expected)
    expect(page.locator(".tv-chart-value")).to_have_text(f"100 tok · {expected}")
    expect(page.locator(".tv-tree .tv-line")).to_contain_text(expected)
    assert opened.problems == []


@pytest.mark.parametrize("width", [1400, 800])
def test_the_view_has_no_serious_accessibility_violation(width: int, run_page: RunPage) -> None:
    opened = run_page(REPO / "teams" / "research-report.yaml", "Compare Rust and Go").opened
    page = opened.page
    page.set_viewport_size({"width": width, "height": 900})

    assert serious_problems(page) == []
    page.locator(".tv-row[data-agent=researcher] .tv-bar.tv-tool").first.click()
    expect(page.locator("#tv-details .tv-raw")).to_be_visible()
    assert serious_problems(page) == []  # with the details open
    page.locator(".tv-search").focus()
    outline = page.evaluate("getComputedStyle(document.activeElement).outlineStyle")
    assert outline not in ("", "none")  # focus is visible
    assert opened.problems == []


@pytest.mark.parametrize("width", [1400, 800])
def test_limit_retry_and_warning_marks_have_no_serious_accessibility_violation(
    width: int, tmp_path: Path, open_page: OpenPage
) -> None:
    lead = ["lead"]
    usage = {"input_tokens": 50, "output_tokens": 50, "total_tokens": 100}
    records = [
        line("run_start", 0.0, span="s1", team="t"),
        line("agent_start", 0.0, span="s2", parent="s1", path=lead, model="m"),
        line("llm_start", 0.0, span="c1", parent="s2", path=lead, model="m"),
        line("llm_retry", 0.5, span="c1", path=lead, attempt=1, max_attempts=3, delay_s=0.5, error="503 busy"),
        line("llm_end", 2.0, span="c1", parent="s2", path=lead, status="ok", usage=usage, cost=0.001),
        line("warning", 2.5, span="s2", parent="s1", path=lead, message="unknown worker 'ghost'"),
        line("budget", 3.0, span="s2", parent="s1", path=lead, reason="max_steps", limit=1, value=1),
        line("agent_end", 4.0, span="s2", parent="s1", path=lead, status="budget_exhausted", usage=usage, cost=0.001),
        line("run_end", 4.0, span="s1", status="budget_exhausted", stopped_by="max_steps", usage=usage, cost=0.001),
    ]
    opened = open_page(view_of(records, tmp_path).as_uri())
    page = opened.page
    page.set_viewport_size({"width": width, "height": 900})

    for level in ("limit", "retry", "warn"):
        mark = page.locator(f".tv-mark-{level}")
        expect(mark).to_have_count(1)
        expect(mark).to_have_attribute("role", "img")  # its label is read out: a role that takes one
    expect(page.get_by_role("img", name=re.compile("retry"))).to_have_count(1)
    assert serious_problems(page) == []
    assert opened.problems == []


def test_a_focused_critical_path_agent_bar_has_the_3px_focus_outline(tmp_path: Path, open_page: OpenPage) -> None:
    opened = open_page(view_of(solo_run(calls=2), tmp_path).as_uri())
    page = opened.page
    bar = page.locator(".tv-bar.tv-agent.tv-critical")
    expect(bar).to_have_count(1)
    page.keyboard.press("Tab")  # a keyboard user: focus is shown
    bar.focus()
    assert bar.evaluate("(b) => b.matches(':focus-visible')")
    assert bar.evaluate("(b) => getComputedStyle(b).outlineWidth") == "3px"  # not the critical path's 1 px
    assert opened.problems == []
