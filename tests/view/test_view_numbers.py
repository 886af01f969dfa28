"""Issue 42 items 11 and 12 in Chromium: the problems list and the delegation tree name an invocation as its row
does (`researcher #2`), and a row's tooltip holds its whole task."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from playwright.sync_api import expect

from tests.observe.handmade import line
from tests.view.conftest import OpenPage
from tests.view.pages import view_of

TASK = "Find the price of B\nUse only the vendor's site.\nSay where each figure comes from."


def _two_researchers() -> list[dict[str, Any]]:
    lead, worker = ["lead"], ["lead", "researcher"]
    records = [line("run_start", 0.0, span="s1", team="t"), line("agent_start", 0.0, span="s2", parent="s1", path=lead)]
    for i, task in enumerate(["Find the price of A", TASK]):
        d, a, c, at = f"d{i}", f"w{i}", f"c{i}", 1.0 + 2 * i
        records += [
            line("delegation_start", at, span=d, parent="s2", path=lead, worker="researcher", task=task),
            line("agent_start", at, span=a, parent=d, path=worker, task=task),
            line("llm_start", at, span=c, parent=a, path=worker, model="m"),
        ]
        if i == 1:
            records += [
                line("llm_retry", at + 0.2, span=c, parent=a, path=worker, attempt=1, max_attempts=3, error="429"),
                line("warning", at + 0.5, span=a, parent=d, path=worker, message="the page was cut at 30k"),
            ]
        records += [
            line("llm_end", at + 1, span=c, parent=a, path=worker, status="ok"),
            line("agent_end", at + 1, span=a, parent=d, path=worker, status="ok"),
            line("delegation_end", at + 1, span=d, parent="s2", path=lead, worker="researcher", status="ok"),
        ]
    records.append(line("agent_end", 5.0, span="s2", parent="s1", path=lead, status="ok"))
    records.append(line("run_end", 5.0, span="s1", status="done"))
    return records


def test_problems_and_the_tree_say_the_invocation_number_the_rows_say(tmp_path: Path, open_page: OpenPage) -> None:
    opened = open_page(view_of(_two_researchers(), tmp_path).as_uri())
    page = opened.page
    expect(page.locator(".tv-row[data-agent=researcher] .tv-name")).to_have_text(["researcher #1", "researcher #2"])
    problems = [li.inner_text() for li in page.locator(".tv-problems li").all()]
    tree = [t.split(" · ")[0] for t in page.locator(".tv-tree .tv-line").all_inner_texts()]
    assert sorted(problems) == [  # each starts with its level as a word
        "WARNINGresearcher #2: model call: retry 1/3 after 429, waited 0 ms",  # was: "researcher: model call: ..."
        "WARNINGresearcher #2: warning: the page was cut at 30k",
    ]
    assert tree == ["lead", "researcher #1", "researcher #2"]
    assert opened.problems == []


def test_a_rows_tooltip_holds_its_whole_task(tmp_path: Path, open_page: OpenPage) -> None:
    page = open_page(view_of(_two_researchers(), tmp_path).as_uri()).page
    row = page.locator(".tv-row[data-agent=researcher] .tv-who").nth(1)
    row.hover()
    expect(row).to_have_attribute("title", "lead → researcher\n" + TASK)  # was: its first line only
    expect(row.locator(".tv-preview")).to_have_text("· Find the price of B")  # the row: the first line
