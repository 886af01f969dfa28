"""The run view's workspace panel, in headless Chromium: each entry's writes over time (who, version before →
after), refusals marked with their reason, values only from a trace recorded with ``--trace-content``, and
hostile names and values shown as inert, bidi-isolated text."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.sync_api import expect

import teamrun
from teamrun.cli import main
from tests.observe.handmade import HEADER, line
from tests.serve.conftest import _loopback_without_proxy, serve
from tests.view.conftest import OpenPage
from tests.view.test_trace_view import _DRAWN_X

__all__ = ["_loopback_without_proxy", "serve"]

TEAM = """\
version: 1
name: par-ws
supervisor: lead
defaults: {model: offline}
workspace:
  entries:
    plan:
      schema: {type: string}
      write: [w1, w2, w3]
    items:
      schema: {type: array, items: {type: string}}
      merge: append
      write: [w1, w2, w3]
agents:
  lead: {delegates_to: [w1, w2, w3], delegation: {max_concurrency: 3}}
  w1: {description: Does one part.}
  w2: {description: Does one part.}
  w3: {description: Does one part.}
"""


def _recorded(tmp_path: Path, *, content: bool) -> tuple[Path, list[dict[str, Any]]]:
    """Three workers writing one `replace` entry and one `append` list at once (the offline model), traced and
    viewed through the CLI; the page's path and the trace's workspace_write lines."""
    team = tmp_path / "team.yaml"
    team.write_text(TEAM, encoding="utf-8")
    trace = tmp_path / "run.jsonl"
    flags = ["--trace-content"] if content else []
    assert main(["execute", str(team), "-i", "go", "--progress", "none", "--trace", str(trace), *flags]) == 0
    page = tmp_path / "run.html"
    assert main(["trace", "view", str(trace), "-o", str(page)]) == 0
    lines = [json.loads(raw) for raw in trace.read_text(encoding="utf-8").splitlines()]
    return page, [r for r in lines if r["kind"] == "workspace_write"]


def test_each_entrys_writes_show_who_and_versions_with_refusals_marked_and_values(
    tmp_path: Path, open_page: OpenPage, restore_structlog: None
) -> None:
    page_file, writes = _recorded(tmp_path, content=True)
    refused = [w for w in writes if w["data"]["status"] == "refused"]
    assert refused and all(w["data"]["entry"] == "plan" and w["data"]["reason"] == "stale" for w in refused)

    opened = open_page(page_file.as_uri())
    page = opened.page
    panel = page.locator(".tv-workspace")
    expect(panel.locator("h3")).to_have_text(f"Workspace ({len(writes)} writes, {len(refused)} refused)")
    expect(panel.locator(".tv-ws-entry")).to_have_count(2)
    for entry in ("plan", "items"):
        mine = [w for w in writes if w["data"]["entry"] == entry]
        items = panel.locator(f".tv-ws-entry[data-entry={entry}] .tv-ws-write")
        expect(items).to_have_count(len(mine))
        for index, write in enumerate(mine):  # in the order written, each saying who and which versions
            data, who = write["data"], write["agent_path"][-1]
            item = items.nth(index)
            expect(item).to_have_attribute("data-status", data["status"])
            said = item.locator(".tv-ws-line")
            expect(said).to_contain_text(f" · {who} · v{data['version_before']}")
            if data["version_after"] != data["version_before"]:
                expect(said).to_contain_text(f"v{data['version_before']} → v{data['version_after']} · applied")
            if data["status"] == "refused":
                expect(said).to_contain_text("refused (stale)")
                expect(item.locator(".tv-ws-message")).to_have_text(data["message"])
                expect(item).to_have_class("tv-ws-write tv-ws-refused")
                expect(item.locator(".tv-ws-value")).to_have_count(0)  # it left no value
            else:
                expect(item.locator(".tv-ws-value")).to_have_text(json.dumps(data["value_after"], indent=2))
    last_items = [w for w in writes if w["data"]["entry"] == "items"][-1]["data"]
    expect(panel.locator(".tv-ws-entry[data-entry=items] .tv-ws-name")).to_contain_text(
        f"append · version {last_items['version_after']}"
    )
    expect(panel.locator(".tv-empty")).to_have_count(0)
    marked = page.locator(".tv-ws-refused").first.evaluate("e => getComputedStyle(e).borderLeftColor")
    assert marked == "rgb(198, 40, 40)"  # the failure red

    panel.locator(".tv-ws-entry[data-entry=plan] .tv-ws-refused").first.click()  # a write opens its tool call
    details = page.locator("#tv-details")
    expect(details).to_be_visible()
    expect(details.locator("h3")).to_contain_text("tool workspace_write_plan")
    assert opened.problems == []


def test_without_trace_content_no_value_is_shown_and_the_panel_says_why(
    tmp_path: Path, open_page: OpenPage, restore_structlog: None
) -> None:
    page_file, writes = _recorded(tmp_path, content=False)
    assert writes and all("value_after" not in w["data"] for w in writes)
    assert '"example"' not in page_file.read_text(encoding="utf-8")  # no value anywhere in the page

    opened = open_page(page_file.as_uri())
    panel = opened.page.locator(".tv-workspace")
    expect(panel.locator(".tv-ws-write")).to_have_count(len(writes))
    expect(panel.locator(".tv-ws-value")).to_have_count(0)
    expect(panel.locator(".tv-empty")).to_have_text(
        "Values were not captured for this run (record it with --trace-content to see them)."
    )
    assert opened.problems == []


RLO = "\u202e"


def _hostile_trace(path: Path, *, content: bool) -> Path:
    agent, entry = f"lead{RLO}x", "<img src=x onerror=\"window.__pwned='name'\">"
    value = {"html": "<script>window.__pwned = 'value'</script>", "rtl": f"{RLO}abc"}
    records = [
        {**HEADER, "content": content},
        line("run_start", 1000.0, span="s1", team="ws"),
        line("agent_start", 1000.0, span="s2", parent="s1", path=[agent], model="m"),
        line("tool_start", 1000.5, span="t1", parent="s2", path=[agent], tool="workspace_write_x"),
        line(
            "workspace_write",
            1000.6,
            span="t1",
            parent="s2",
            path=[agent],
            entry=entry,
            rule="replace",
            status="applied",
            reason=None,
            version_before=0,
            version_after=1,
            message="now at version 1",
            value_after=value,
        ),
        line(
            "workspace_write",
            1000.7,
            span="t1",
            parent="s2",
            path=[agent],
            entry=entry,
            rule="replace",
            status="refused",
            reason="conflict",
            version_before=1,
            version_after=1,
            message=f"<b>conflict</b> by {agent}",
            value_after=value,
        ),
        line("tool_end", 1001.0, span="t1", parent="s2", path=[agent], tool="workspace_write_x", status="ok"),
        line("agent_end", 1001.0, span="s2", parent="s1", path=[agent], status="ok"),
        line("run_end", 1001.0, span="s1", status="done"),
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


@pytest.mark.parametrize("content", [True, False])
def test_hostile_names_and_values_stay_inert_text_isolated_and_values_only_with_content(
    tmp_path: Path, open_page: OpenPage, content: bool
) -> None:
    trace = _hostile_trace(tmp_path / "run.jsonl", content=content)
    assert main(["trace", "view", str(trace)]) == 0
    opened = open_page(trace.with_suffix(".html").as_uri())
    page = opened.page

    panel = page.locator(".tv-workspace")
    expect(panel.locator(".tv-ws-name")).to_contain_text("<img src=x onerror=")  # shown as text
    lines = panel.locator(".tv-ws-line")
    expect(lines).to_have_count(2)
    expect(lines.first).to_have_text(f"+600 ms · \u2068lead{RLO}x\u2069 · v0 → v1 · applied")
    expect(lines.nth(1)).to_have_text(f"+700 ms · \u2068lead{RLO}x\u2069 · v1 · refused (conflict)")
    drawn = lines.first.evaluate(_DRAWN_X)  # the figures after the name are drawn left to right
    figures = " · v0 → v1 · applied"
    lefts = [x for _, x in drawn[len(drawn) - len(figures) :] if x is not None]
    assert lefts == sorted(lefts) and len(set(lefts)) == len(lefts), lefts
    expect(panel.locator(".tv-ws-message")).to_have_text(f"<b>conflict</b> by lead{RLO}x")
    values = panel.locator(".tv-ws-value")
    if content:
        expect(values).to_have_count(1)  # the applied write's; the refused one left none
        expect(values.first).to_contain_text("<script>window.__pwned = 'value'</script>")
    else:  # the trace says it has no content: a value in its lines (a hand-edited file) is not shown
        expect(values).to_have_count(0)
        expect(panel.locator(".tv-empty")).to_contain_text("--trace-content")
    assert page.locator(".teamrun-view script, .teamrun-view img, .tv-workspace b").count() == 0
    assert page.evaluate("window.__pwned") is None
    assert opened.problems == []


@pytest.mark.parametrize("content", [True, False])
def test_the_served_view_shows_the_workspace_panel_values_only_with_trace_content(
    serve: Any, tmp_path: Path, open_page: OpenPage, content: bool
) -> None:
    team_file = tmp_path / "team.yaml"
    team_file.write_text(TEAM, encoding="utf-8")
    server = serve([teamrun.load_team(team_file)], content=content)  # loopback, no token
    with httpx.Client(base_url=server.url, timeout=60) as client:
        run_id = client.post("/v1/runs", json={"team": "par-ws", "input": "go"}).json()["id"]
        assert "event: result" in client.get(f"/v1/runs/{run_id}/events").text  # read until the run is over
        answered = client.get(f"/v1/runs/{run_id}/workspace").json()

    opened = open_page(f"{server.url}/#run={run_id}")
    panel = opened.page.locator("#run-view .tv-workspace")
    expect(panel.locator(".tv-ws-write")).to_have_count(len(answered["writes"]))
    expect(panel.locator(".tv-ws-refused")).to_have_count(
        sum(1 for w in answered["writes"] if w["status"] == "refused")
    )
    applied = sum(1 for w in answered["writes"] if w["status"] == "applied")
    expect(panel.locator(".tv-ws-value")).to_have_count(applied if content else 0)
    expect(panel.locator(".tv-empty")).to_have_count(0 if content else 1)
    assert opened.problems == []


def test_a_workflow_steps_write_names_the_step(tmp_path: Path, open_page: OpenPage) -> None:
    records = [
        {**HEADER, "content": True},
        line("run_start", 1000.0, span="s1", team="flow"),
        line(
            "workspace_write",
            1000.25,
            span="s1",
            entry="facts",
            rule="append",
            status="applied",
            version_before=0,
            version_after=1,
            message="'facts' is now at version 1",
            step="collect",
            value_after=["a fact"],
        ),
        line("run_end", 1001.0, span="s1", status="done"),
    ]
    trace = tmp_path / "run.jsonl"
    trace.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    assert main(["trace", "view", str(trace)]) == 0
    opened = open_page(trace.with_suffix(".html").as_uri())

    panel = opened.page.locator(".tv-workspace")
    expect(panel.locator(".tv-ws-line")).to_have_text("+250 ms · workflow (step collect) · v0 → v1 · applied")
    expect(panel.locator(".tv-ws-value")).to_have_text(json.dumps(["a fact"], indent=2))
    assert opened.problems == []
