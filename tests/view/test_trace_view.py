"""`teamrun trace view`: the page a trace file becomes, checked in headless Chromium."""

from __future__ import annotations

import itertools
import re
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import expect

from teamrun.cli import main
from teamrun.observe.trace_read import read_trace
from tests.fakeserver import FakeOpenAI, http_error, text, tool_calls
from tests.observe.conftest import TeamWriter
from tests.observe.handmade import line, solo_run
from tests.observe.teams import script_fan_out
from tests.view.conftest import FanOutPage, OpenPage, RunPage
from tests.view.fanout import record_fan_out
from tests.view.pages import record_view, view_of, view_trace

REPO = Path(__file__).resolve().parents[2]


def test_three_parallel_workers_show_as_three_overlapping_bars(
    fan_out_page: FanOutPage, capsys: pytest.CaptureFixture[str]
) -> None:
    trace, page_file, opened = fan_out_page(0.3)
    assert capsys.readouterr().out.strip().endswith(str(page_file))  # the page's path is printed
    page = opened.page
    expect(page.locator(".tv-row[data-agent]")).to_have_count(4)
    boxes, spans = {}, {}
    for worker in ("alpha", "beta", "gamma"):
        bar = page.locator(f".tv-row[data-agent={worker}] .tv-bar.tv-agent")
        box = bar.bounding_box()
        assert box is not None and box["width"] > 20
        boxes[worker] = (box["x"], box["x"] + box["width"])
        spans[worker] = (float(bar.get_attribute("data-start") or 0), float(bar.get_attribute("data-end") or 0))
    for a, b in itertools.combinations(boxes, 2):  # drawn: each pair of bars shares some pixels
        assert max(boxes[a][0], boxes[b][0]) < min(boxes[a][1], boxes[b][1]), (a, b, boxes)
        assert max(spans[a][0], spans[b][0]) < min(spans[a][1], spans[b][1]), (a, b, spans)
    recorded = {n.name: (n.start, n.end) for n in read_trace(trace).roots[0].find("agent")}
    for worker in ("alpha", "beta", "gamma"):  # the bars are the recorded spans (wall clock vs monotonic)
        start, end = recorded[worker]
        assert end is not None
        assert spans[worker][1] - spans[worker][0] == pytest.approx(end - start, abs=1e-3)
    lead_waits = page.locator(".tv-row[data-agent=lead] .tv-bar.tv-wait")
    expect(lead_waits).to_have_count(3)
    critical = page.locator(".tv-row[data-agent] .tv-bar.tv-agent.tv-critical")
    expect(critical).to_have_count(2)  # the lead, and the worker it waited for longest: the last to end
    last = max(spans, key=lambda w: spans[w][1])
    assert [c.locator("xpath=../..").get_attribute("data-agent") for c in critical.all()] == ["lead", last]
    expect(page.locator("#tv-answer")).to_have_text("a, b and c compared")
    assert opened.problems == []


def test_clicking_a_model_call_shows_its_messages_and_reply(fan_out_page: FanOutPage) -> None:
    opened = fan_out_page(0.0).opened
    page = opened.page
    details = page.locator("#tv-details")
    expect(details).to_be_hidden()

    page.locator(".tv-row[data-agent=beta] .tv-bar.tv-llm").click()

    expect(details).to_be_visible()
    expect(details.locator("h3")).to_contain_text("model call openai/beta")
    messages = details.locator(".tv-messages > li")
    expect(messages).to_have_count(2)
    expect(messages.nth(0)).to_contain_text("Answer about beta.")  # the system prompt
    expect(messages.nth(1)).to_contain_text("about b")  # the task
    expect(details.locator(".tv-role-assistant")).to_have_text("beta says hi")

    page.locator(".tv-row[data-agent=lead] .tv-bar.tv-llm").first.click()
    expect(details.locator(".tv-call")).to_have_count(3)
    expect(details.locator(".tv-call").nth(0)).to_contain_text("ask_alpha")
    expect(details.locator(".tv-call").nth(0)).to_contain_text('"task": "about a"')
    assert opened.problems == []


def test_clicking_a_tool_call_shows_its_input_and_output(run_page: RunPage) -> None:
    opened = run_page(REPO / "teams" / "research-report.yaml", "Compare Rust and Go").opened
    page = opened.page

    page.locator(".tv-row[data-agent=researcher] .tv-bar.tv-tool").first.click()

    details = page.locator("#tv-details")
    expect(details.locator("h3")).to_contain_text("tool notes")
    pre = details.locator(".tv-pre")
    expect(pre.nth(0)).to_contain_text('"subject": "Rust"')  # input: the model's arguments
    expect(pre.nth(1)).to_contain_text("notes/rust.md")  # output: what the tool handed back
    assert opened.problems == []


FAILING_TEAM = """\
supervisor: lead
agents:
  lead:
    model: openai/lead
    delegates_to: [alpha, beta]
    delegation: {parallel: true}
    budget: {max_steps: 1}
  alpha: {model: openai/alpha, description: Researches alpha.}
  beta: {model: openai/beta, description: Researches beta.}
"""


def test_a_failed_worker_and_a_reached_limit_are_marked_where_they_happened(
    fake_openai: FakeOpenAI, write_team: TeamWriter, run_page: RunPage
) -> None:
    fake_openai.script(
        "lead", [tool_calls(("ask_alpha", {"task": "a"}), ("ask_beta", {"task": "b"})), text("what I have: alpha only")]
    )
    fake_openai.script("alpha", [text("alpha done")])
    fake_openai.script("beta", [http_error(500, message="beta's provider broke")])
    opened = run_page(write_team(FAILING_TEAM), "go", code=3).opened
    page = opened.page

    expect(page.locator(".tv-title .tv-status")).to_have_text("budget_exhausted")
    beta_bar = page.locator(".tv-row[data-agent=beta] .tv-bar.tv-agent")
    expect(beta_bar).to_have_attribute("data-status", "error")
    expect(beta_bar).to_have_class(re.compile(r"\btv-failed\b"))
    expect(page.locator(".tv-row[data-agent=beta] .tv-bar.tv-llm.tv-failed")).to_have_count(1)
    expect(page.locator(".tv-row[data-agent=alpha] .tv-bar.tv-agent")).to_have_attribute("data-status", "ok")
    limit = page.locator(".tv-row[data-agent=lead] .tv-mark-limit")
    expect(limit).to_have_count(1)
    assert "agents.lead.budget.max_steps" in (limit.get_attribute("title") or "")
    errors = page.locator(".tv-problems li[data-level=error]")
    expect(errors.filter(has_text="beta")).not_to_have_count(0)
    expect(errors.filter(has_text="beta's provider broke")).not_to_have_count(0)
    expect(page.locator(".tv-problems li[data-level=limit]").filter(has_text="max_steps")).not_to_have_count(0)

    page.locator(".tv-problems li[data-level=limit]").filter(has_text="limit reached").click()  # opens where it was
    expect(page.locator("#tv-details h3")).to_contain_text("agent lead")
    assert opened.problems == []


HOSTILE = (
    "**Done.** <script>window.__pwned = 'script'</script>\n\n"
    "<img src=x onerror=\"window.__pwned = 'img'\"> and [a link](javascript:window.__pwned='link')\n\n"
    "- one\n- two"
)


def test_an_answer_with_script_and_img_onerror_renders_inert(
    fake_openai: FakeOpenAI, write_team: TeamWriter, run_page: RunPage
) -> None:
    fake_openai.script(
        "lead", [tool_calls(("ask_alpha", {"task": "<img src=y onerror=\"window.__pwned='task'\">"})), text(HOSTILE)]
    )
    fake_openai.script("alpha", [text("<script>window.__pwned = 'worker'</script>")])
    fake_openai.script("beta", [])
    fake_openai.script("gamma", [])
    opened = run_page(write_team(), "go").opened
    page = opened.page

    answer = page.locator("#tv-answer")
    expect(answer.locator("strong")).to_have_text("Done.")  # Markdown is rendered...
    expect(answer.locator("li")).to_have_text(["one", "two"])
    expect(answer).to_contain_text("<script>window.__pwned = 'script'</script>")  # ... HTML is shown as text
    expect(answer).to_contain_text("<img src=x onerror=")
    assert answer.locator("a").count() == 0  # a javascript: link stays text
    page.locator(".tv-row[data-agent=alpha] .tv-bar.tv-llm").click()
    expect(page.locator("#tv-details")).to_contain_text("<img src=y onerror=")
    assert page.locator(".teamrun-view script, .teamrun-view img").count() == 0
    assert page.evaluate("window.__pwned") is None
    assert opened.problems == []


def test_a_thousand_worker_run_renders(tmp_path: Path, open_page: OpenPage) -> None:
    trace = record_fan_out(tmp_path, 1000)
    opened = open_page(view_trace(trace).as_uri())
    page = opened.page

    expect(page.locator(".tv-row[data-agent=worker]")).to_have_count(1000)
    expect(page.locator(".tv-chart-row[data-agent=worker]")).to_have_attribute(
        "data-tokens", str(sum(n.tokens for n in read_trace(trace).roots[0].find("agent", "worker")))
    )
    page.locator(".tv-row[data-agent=worker] .tv-bar.tv-llm").nth(999).click()
    expect(page.locator("#tv-details .tv-messages")).to_contain_text("item 999")
    assert opened.problems == []


def test_trace_view_mistakes_are_one_line_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["trace", "view", str(tmp_path / "missing.jsonl")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: cannot read the trace file") and "\n" not in err

    trace = tmp_path / "run.jsonl"
    trace.write_text('{"kind": "trace", "format": "teamrun-trace", "v": 1, "content": false, "ts": 1}\n')
    assert main(["trace", "view", str(trace), "-o", str(trace)]) == 2
    assert "would overwrite the trace" in capsys.readouterr().err
    assert trace.read_text().startswith('{"kind": "trace"')


def test_trace_view_masks_this_environments_secrets_too(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A trace written elsewhere (or by an older teamrun) may hold a key the page must not show."""
    monkeypatch.setenv("VENDOR_API_KEY", "sk-live-0123456789abcdef")
    trace = tmp_path / "run.jsonl"
    trace.write_text(
        '{"kind": "trace", "format": "teamrun-trace", "v": 1, "content": true, "ts": 1}\n'
        '{"kind": "run_start", "run_id": "r1", "span_id": "s1", "parent_span_id": null, "agent_path": [], '
        '"depth": -1, "time": 1.0, "ts": 1.0, "data": {"team": "t", "input": "use sk-live-0123456789abcdef"}}\n',
        encoding="utf-8",
    )

    assert main(["trace", "view", str(trace)]) == 0

    page = trace.with_suffix(".html").read_text(encoding="utf-8")
    assert "sk-live-0123456789abcdef" not in page and "use ***" in page


def test_trace_view_open_opens_the_page_in_the_browser(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    opened: list[str] = []
    monkeypatch.setattr("webbrowser.open", lambda url: opened.append(url) or True)
    trace = tmp_path / "run.jsonl"
    trace.write_text('{"kind": "trace", "format": "teamrun-trace", "v": 1, "content": false, "ts": 1}\n')

    assert main(["trace", "view", str(trace), "--open"]) == 0

    assert opened == [trace.with_suffix(".html").resolve().as_uri()]


@pytest.mark.parametrize("browser", ["none found", "fails"])
def test_trace_view_open_without_a_browser_says_so_with_the_file_to_open(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], browser: str
) -> None:
    """Issue 33.10: `--open` on a machine with no browser (a server, a container) said nothing."""
    import webbrowser

    def open_(url: str) -> bool:
        if browser == "fails":
            raise webbrowser.Error("could not locate runnable browser")
        return False  # what webbrowser.open answers when no browser could be started

    monkeypatch.setattr("webbrowser.open", open_)
    trace = tmp_path / "run.jsonl"
    trace.write_text('{"kind": "trace", "format": "teamrun-trace", "v": 1, "content": false, "ts": 1}\n')

    assert main(["trace", "view", str(trace), "--open"]) == 0

    page = trace.with_suffix(".html").resolve()
    captured = capsys.readouterr()
    assert captured.out == f"{trace.with_suffix('.html')}\n"  # stdout: only the page's path, as without --open
    assert captured.err == f"teamrun: no browser could be opened; open {page} by hand\n"


RETRY_TEAM = """\
supervisor: lead
agents:
  lead:
    model: openai/lead
    delegates_to: [alpha]
  alpha: {model: openai/alpha, description: Researches alpha., num_retries: 2}
"""


def test_a_retry_is_marked_on_its_model_call_with_its_back_off(
    fake_openai: FakeOpenAI, write_team: TeamWriter, run_page: RunPage
) -> None:
    fake_openai.script("lead", [tool_calls(("ask_alpha", {"task": "a"})), text("done")])
    fake_openai.script("alpha", [http_error(429, retry_after=0.4), text("alpha done")])
    opened = run_page(write_team(RETRY_TEAM), "go").opened
    page = opened.page

    row = page.locator(".tv-row[data-agent=alpha]")
    retry = row.locator(".tv-mark-retry")
    expect(retry).to_have_count(1)
    assert "retry 1/3" in (retry.get_attribute("title") or "") and "HTTP 429" in (retry.get_attribute("title") or "")
    call = row.locator(".tv-bar.tv-llm").bounding_box()
    back_off = row.locator(".tv-bar.tv-backoff").bounding_box()
    assert call is not None and back_off is not None
    assert call["x"] <= back_off["x"] and back_off["x"] + back_off["width"] <= call["x"] + call["width"] + 1
    assert back_off["width"] > call["width"] / 4  # 0.4 s of a call that took a little more
    expect(page.locator(".tv-problems li[data-level=warn]")).to_contain_text(["alpha: model call: retry 1/3"])
    assert opened.problems == []


def test_a_trace_cut_short_shows_its_unfinished_spans_and_the_cut_line(
    fake_openai: FakeOpenAI,
    write_team: TeamWriter,
    tmp_path: Path,
    open_page: OpenPage,
    restore_structlog: None,
) -> None:
    script_fan_out(fake_openai, delay=0.0)
    trace, page_file = record_view(write_team(), tmp_path, "compare a, b and c")
    lines = trace.read_text(encoding="utf-8").splitlines()
    cut = next(i for i, line in enumerate(lines) if '"agent_end"' in line)  # before any agent ended
    trace.write_text("\n".join(lines[:cut]) + "\n" + lines[cut][:25], encoding="utf-8")  # a kill mid-write
    assert main(["trace", "view", str(trace), "-o", str(page_file)]) == 0

    opened = open_page(page_file.as_uri())
    page = opened.page

    expect(page.locator(".tv-note")).to_contain_text(f"run.jsonl:{cut + 1}: not a JSON line")
    expect(page.locator(".tv-title .tv-status")).to_have_text("unfinished")  # no run_end, and no more to come
    expect(page.locator(".tv-bar.tv-agent[data-status=unfinished].tv-failed")).not_to_have_count(0)
    expect(page.locator(".tv-problems li[data-level=error]").filter(has_text="never ended")).not_to_have_count(0)
    assert opened.problems == []


SEQUENTIAL_TEAM = """\
supervisor: lead
agents:
  lead:
    model: openai/lead
    delegates_to: [alpha, beta]
  alpha: {model: openai/alpha, description: Researches alpha.}
  beta: {model: openai/beta, description: Researches beta.}
"""


def test_the_critical_path_runs_through_workers_asked_one_after_the_other(
    fake_openai: FakeOpenAI, write_team: TeamWriter, run_page: RunPage
) -> None:
    fake_openai.script(
        "lead", [tool_calls(("ask_alpha", {"task": "a"})), tool_calls(("ask_beta", {"task": "b"})), text("both done")]
    )
    fake_openai.script("alpha", [text("alpha done", delay=0.1)])
    fake_openai.script("beta", [text("beta done", delay=0.1)])
    opened = run_page(write_team(SEQUENTIAL_TEAM), "go").opened
    page = opened.page

    for agent in ("lead", "alpha", "beta"):
        expect(page.locator(f".tv-row[data-agent={agent}] .tv-bar.tv-agent")).to_have_class(re.compile("tv-critical"))
    lead_calls = page.locator(".tv-row[data-agent=lead] .tv-bar.tv-llm")
    expect(lead_calls).to_have_count(3)
    expect(page.locator(".tv-row[data-agent=lead] .tv-bar.tv-llm.tv-critical")).to_have_count(3)
    expect(page.locator(".tv-row[data-agent=lead] .tv-bar.tv-wait.tv-critical")).to_have_count(2)
    assert opened.problems == []


def test_a_model_call_of_0_ms_under_a_wait_stays_clickable(tmp_path: Path, open_page: OpenPage) -> None:
    at = 1000.0
    lead, worker = ["lead"], ["lead", "researcher"]
    records = [
        line("run_start", at, span="s1", team="t"),
        line("agent_start", at, span="s2", parent="s1", path=lead, model="m"),
        line("llm_start", at, span="c1", parent="s2", path=lead, model="quick"),  # 0 ms, under the wait
        line("llm_end", at, span="c1", parent="s2", path=lead, status="ok"),
        line("delegation_start", at, span="d1", parent="s2", path=lead, worker="researcher"),
        line("agent_start", at + 1, span="s3", parent="d1", path=worker, model="m"),
        line("llm_start", at + 1, span="c2", parent="s3", path=worker, model="slow"),
        line("llm_end", at + 9, span="c2", parent="s3", path=worker, status="ok"),
        line("agent_end", at + 9, span="s3", parent="d1", path=worker, status="ok"),
        line("delegation_end", at + 9, span="d1", parent="s2", path=lead, worker="researcher", status="ok"),
        line("llm_start", at + 9, span="c3", parent="s2", path=lead, model="last"),
        line("llm_end", at + 10, span="c3", parent="s2", path=lead, status="ok"),
        line("agent_end", at + 10, span="s2", parent="s1", path=lead, status="ok"),
        line("run_end", at + 10, span="s1", status="done"),
    ]
    opened = open_page(view_of(records, tmp_path).as_uri())
    page = opened.page

    quick = page.locator(".tv-row[data-agent=lead] .tv-bar.tv-llm").first
    box = quick.bounding_box()
    assert box is not None and box["width"] >= 5  # a target a person can hit
    quick.click(timeout=10_000)  # fails if another bar (the wait) would take the click

    expect(page.locator("#tv-details h3")).to_contain_text("model call quick")
    assert opened.problems == []


_DRAWN_X = """(element) => {
  // the left edge of each character of the element's text as drawn, in text order
  const out = [], walker = document.createTreeWalker(element, NodeFilter.SHOW_TEXT);
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    for (let i = 0; i < node.data.length; i++) {
      const range = document.createRange();
      range.setStart(node, i);
      range.setEnd(node, i + 1);
      const box = range.getBoundingClientRect();
      out.push([node.data[i], box.width ? box.left : null]);
    }
  }
  return out;
}"""


def test_a_name_with_a_right_to_left_override_does_not_reverse_the_figures_after_it(
    tmp_path: Path, open_page: OpenPage
) -> None:
    rlo = "\u202e"
    opened = open_page(view_of(solo_run(agent=f"lead{rlo}x", team=f"team{rlo}y", calls=2), tmp_path).as_uri())
    page = opened.page

    checked = {
        ".tv-tree .tv-line": " · ok · 2.00 s · 200 tokens · $0.0200",
        ".tv-title": "done",
        ".tv-row[data-agent] .tv-label": "2.00 s · 200 tok (100 in, 100 out)",
        ".tv-chart-row": "200 tok · $0.0200",
    }
    for selector, figures in checked.items():
        drawn = page.locator(selector).first.evaluate(_DRAWN_X)
        text = "".join(c for c, _ in drawn)
        assert text.endswith(figures), (selector, text)
        lefts = [x for _, x in drawn[len(drawn) - len(figures) :] if x is not None]
        assert lefts == sorted(lefts) and len(set(lefts)) == len(lefts), (selector, lefts)  # left to right
    page.locator(".tv-bar.tv-agent").hover()  # tooltips too (written when the pointer comes)
    tooltip = page.locator(".tv-bar.tv-agent").get_attribute("title") or ""
    assert tooltip.startswith(f"agent \u2068lead{rlo}x\u2069 · 2.00 s")
    assert page.title() == f"teamrun · \u2068team{rlo}y\u2069 · r1"
    assert opened.problems == []


def _facts(summary: Any) -> dict[str, str]:
    facts = summary.locator(".tv-fact")
    return {f.get_attribute("data-fact") or "": f.locator("b").inner_text() for f in facts.all()}


def test_two_runs_in_one_trace_file_get_a_summary_each_from_their_own_spans(
    tmp_path: Path, open_page: OpenPage
) -> None:
    first = solo_run("r1", start=1000.0, calls=2, tokens=100, cost=0.01)
    second = solo_run("r2", start=2000.0, calls=1, tokens=50, cost=0.005, team="other")
    opened = open_page(view_of(first + second, tmp_path).as_uri())
    page = opened.page

    summaries = page.locator(".tv-summary")
    expect(summaries).to_have_count(2)
    one, two = _facts(summaries.nth(0)), _facts(summaries.nth(1))
    assert {k: one[k] for k in ("run", "wall time", "agents", "model calls", "tokens", "cost")} == {
        "run": "r1",
        "wall time": "2.00 s",
        "agents": "1",
        "model calls": "2",
        "tokens": "200",
        "cost": "$0.0200",
    }
    assert {k: two[k] for k in ("run", "wall time", "agents", "model calls", "tokens", "cost")} == {
        "run": "r2",
        "wall time": "1.00 s",
        "agents": "1",
        "model calls": "1",
        "tokens": "50",
        "cost": "$0.0050",
    }
    expect(summaries.nth(1).locator(".tv-title")).to_contain_text("other")
    assert opened.problems == []


def test_a_trace_cut_short_says_unfinished_in_the_tree_the_bars_and_the_summary_alike(
    tmp_path: Path, open_page: OpenPage
) -> None:
    opened = open_page(view_of(solo_run(calls=2, ended=False), tmp_path).as_uri())
    page = opened.page

    expect(page.locator(".tv-title .tv-status")).to_have_text("unfinished")
    expect(page.locator(".tv-tree li[data-agent=lead]")).to_have_attribute("data-status", "unfinished")
    expect(page.locator(".tv-tree .tv-line")).to_contain_text("lead · unfinished · 1.00 s")
    expect(page.locator(".tv-tree .tv-line.tv-failed")).to_have_count(1)
    statuses = {bar.get_attribute("data-status") for bar in page.locator(".tv-bar[data-key]").all()}
    assert statuses == {"ok", "unfinished"}  # the first call ended; the second, the agent and the run did not
    page.locator(".tv-tree .tv-line").click()
    expect(page.locator("#tv-details dd").nth(1)).to_have_text("unfinished")  # agent, status, ...
    assert "running" not in page.locator("#teamrun-view").inner_text()
    assert opened.problems == []
