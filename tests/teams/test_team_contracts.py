"""The ready-made teams do what their headers promise.

`tests/engine/test_execute_cli.py` runs every team offline; these tests check
each team's own contract: headers, strict validation, the git tools inside and
outside a repository, approval, the product-comparison acceptance hooks and
bounded follow-up, handoff limits and the support filter, references reaching
the writer verbatim. Model behaviour is scripted on the local test server.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

import teamrun
from teamrun.cli import main
from teamrun.tools.approval import choose_approver
from teamrun.tools.base import ToolOutcome
from teamrun.tools.invoke import invoke_tool
from tests.fakeserver import FakeOpenAI, Reply, text, tool_calls
from tests.teams.simple_model import simple_model, task_of

REPO = Path(__file__).resolve().parents[2]
TEAMS = sorted((REPO / "teams").glob("*.yaml"))
READY_MADE = {"research-report", "pr-review", "product-comparison", "support-triage"}


def _load(name: str, **kwargs: Any) -> teamrun.Team:
    return teamrun.load_team(REPO / "teams" / f"{name}.yaml", model="openai/team", **kwargs)


def _tools(request: dict[str, Any]) -> set[str]:
    return {t["function"]["name"] for t in request.get("tools") or []}


def _user_text(request: dict[str, Any]) -> str:
    return "\n".join(m["content"] for m in request["messages"] if m["role"] == "user")


def _tool_results(request: dict[str, Any]) -> list[Any]:
    return [json.loads(m["content"]) for m in request["messages"] if m["role"] == "tool"]


# -- every team ---------------------------------------------------------------------------
def test_the_ready_made_teams_are_all_here() -> None:
    assert {p.stem for p in TEAMS} >= READY_MADE


@pytest.mark.parametrize("team_file", TEAMS, ids=[p.stem for p in TEAMS])
def test_header_says_what_it_is_for_and_when_not_to_use_it(team_file: Path) -> None:
    source = team_file.read_text(encoding="utf-8")
    header = source.split("\nversion: 1\n", 1)[0]

    assert source.startswith("# yaml-language-server: $schema=../schemas/team.schema.json\n")
    assert "Use it for:" in header and "Do not use it for:" in header
    assert "teamrun execute teams/" in header  # how to run it


def test_every_team_validates_without_warnings(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["validate", "--strict", str(REPO / "teams")])

    out = capsys.readouterr().out
    assert code == 0, out
    assert out.strip().endswith("files valid")


# -- pr-review ----------------------------------------------------------------------------
def test_pr_review_tools_fail_gracefully_outside_a_git_repository(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path.parent))
    monkeypatch.chdir(tmp_path)

    code = main(
        [
            "execute",
            str(REPO / "teams/pr-review.yaml"),
            "-i",
            "Review against HEAD~1",
            "--json",
            "--progress",
            "none",
            "--approve",
            "all",
        ]
    )

    result = json.loads(capsys.readouterr().out)
    assert code == 0 and result["status"] == "done"
    (review,) = result["delegations"]
    assert review["status"] == "ok"
    assert "not a git repository" in review["response"]  # git's message reached the model
    assert "changed_files: Error: command 'git' exited with code 128" in result["final_text"]


def _git(repo: Path, *args: str) -> None:
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@example.com",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@example.com",
    }
    subprocess.run(["git", *args], cwd=repo, env=env, check=True, capture_output=True)


@pytest.fixture
def small_repo(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    repo.mkdir()
    _git(repo, "init", "-q", "-b", "main")
    (repo / "app.py").write_text("def add(a, b):\n    return a + b\n")
    _git(repo, "add", "app.py")
    _git(repo, "commit", "-qm", "first")
    (repo / "app.py").write_text("def add(a, b):\n    return a - b\n")
    _git(repo, "commit", "-qam", "change add")
    return repo


def test_pr_review_tools_work_in_any_git_repository(small_repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    team = _load("pr-review")
    approver = choose_approver(None, interactive=False)  # as in CI: nobody to ask
    monkeypatch.chdir(small_repo)

    def call(tool: str, **args: Any) -> ToolOutcome:
        return asyncio.run(invoke_tool(team.tools[tool], json.dumps(args), approver=approver))

    changed = call("changed_files")
    diff = call("file_diff", path="app.py")
    log = call("commit_log", base="HEAD~1")
    injected = call("changed_files", base="--output=pwned.txt")
    denied = call("read_file", path="app.py")

    assert changed.ok and changed.content == "M\tapp.py\n"
    assert diff.ok and "-    return a + b\n+    return a - b" in diff.content
    assert log.ok and log.content.endswith("change add\n")
    assert not injected.ok and "does not match" in injected.content  # the pattern keeps options out
    assert not (small_repo / "pwned.txt").exists()
    assert not denied.ok and "--approve read_file" in denied.content  # nobody to ask: denied, with the fix


# -- product-comparison -------------------------------------------------------------------
def _deliverable(product: str, *, price: str) -> Reply:
    return text(
        json.dumps(
            {
                "product": product,
                "criteria": [
                    {
                        "criterion": "price",
                        "value": price,
                        "source": "research/pricing.md" if price != "UNCONFIRMED" else price,
                    },
                    {"criterion": "license", "value": "MIT", "source": "research/license.md"},
                ],
            }
        )
    )


def test_product_comparison_checks_deliverables_and_bounds_the_follow_up(fake_openai: FakeOpenAI) -> None:
    lead = [
        tool_calls(
            ("ask_researcher", {"task": "Alpha: price, license"}), ("ask_researcher", {"task": "Beta: price, license"})
        ),
        tool_calls(("ask_researcher", {"task": "Alpha: price only"})),  # the one follow-up round
        tool_calls(("ask_researcher", {"task": "Gamma: price, license"})),  # a third round: refused
        # Refs are numbered in call order: Beta's failed call (researcher-2) leaves its number unused.
        tool_calls(
            ("ask_table_writer", {"task": "Build the table", "context_from_refs": ["researcher-1", "researcher-3"]})
        ),
        text("| criterion | Alpha |\n|---|---|\n| price | 9 USD |"),
    ]

    def researcher(request: dict[str, Any]) -> Reply:
        task = task_of(request)
        if task.startswith("Beta"):
            return text("Beta is cheap, I think.")  # never the deliverable: fails after its repair turns
        return _deliverable("Alpha", price="9 USD" if "follow-up" in task else "UNCONFIRMED")

    def answer(request: dict[str, Any]) -> Reply:
        tools = _tools(request)
        if "ask_researcher" in tools:
            return lead.pop(0)
        if "search_material" in tools:
            return researcher(request)
        return text("| criterion | Alpha | Beta |\n| price | 9 USD | unconfirmed |")

    fake_openai.handler("team", answer)

    result = _load("product-comparison").run_sync("Compare Alpha and Beta")

    assert result.status == "done" and lead == []
    calls = [r.request for r in fake_openai.requests("team") if "ask_researcher" in _tools(r.request)]
    # Round 1: Beta's broken deliverable is replaced by the acceptance text; Alpha's gaps add feedback.
    round_one = _tool_results(calls[1])
    assert [r["status"] for r in round_one] == ["ok", "error"]  # Alpha, Beta (in call order)
    beta = round_one[1]
    assert beta["response"].startswith("The research task failed")
    assert "A researcher returned UNCONFIRMED values." in _user_text(calls[1])
    # Round 2 is a capped follow-up; round 3 is refused by the on_start hook.
    follow_up = next(r.request for r in fake_openai.requests("team") if "This is a follow-up" in task_of(r.request))
    assert "Alpha: price only" in task_of(follow_up)
    refused = _tool_results(calls[3])[-1]
    assert refused["status"] == "rejected" and refused["response"].startswith("No more research rounds")
    assert len([r for r in fake_openai.requests("team") if task_of(r.request).startswith("Beta")]) == 3
    # The table writer got both Alpha deliverables verbatim.
    writer = next(r.request for r in fake_openai.requests("team") if not _tools(r.request))
    prompt = _user_text(writer)
    assert prompt.count('"criterion": "price", "value": "UNCONFIRMED"') == 1
    assert prompt.count('"criterion": "price", "value": "9 USD"') == 1
    statuses = sorted((d.agent, d.status) for d in result.delegations)
    assert statuses == [
        ("researcher", "error"),
        ("researcher", "ok"),
        ("researcher", "ok"),
        ("researcher", "rejected"),
        ("table_writer", "ok"),
    ]


# -- support-triage -----------------------------------------------------------------------
def _role(request: dict[str, Any]) -> str:
    """Which support agent is asking, from its system prompt (its last turn has no tools)."""
    system = request["messages"][0]["content"]
    for role, opening in (
        ("triage", "You are the first contact"),
        ("billing", "You answer billing"),
        ("technical", "You answer technical"),
        ("researcher", "Find the help-center"),
    ):
        if system.startswith(opening):
            return role
    raise AssertionError(f"unknown agent: {system[:60]!r}")


def test_support_triage_stops_a_ping_pong_at_max_handoffs(fake_openai: FakeOpenAI) -> None:
    bounce = {"triage": "transfer_to_billing", "billing": "transfer_to_technical", "technical": "transfer_to_billing"}

    def answer(request: dict[str, Any]) -> Reply:
        if "STOP:" in request["messages"][-1].get("content", ""):
            return text(f"{_role(request)} answers: please send the invoice number.")
        return tool_calls((bounce[_role(request)], {"reason": "not mine"}))

    fake_openai.handler("team", answer)

    result = _load("support-triage").run_sync("My invoice page crashes")

    assert result.status == "budget_exhausted"
    assert result.stopped_by == "limits.max_handoffs (3)"
    assert result.final_text == "billing answers: please send the invoice number."
    first = fake_openai.requests("team")[0].request
    technical = next(t["function"] for t in first["tools"] if t["function"]["name"] == "transfer_to_technical")
    assert "Do NOT transfer to technical for prices" in technical["description"]


def test_support_researcher_never_sees_a_card_number(fake_openai: FakeOpenAI) -> None:
    def answer(request: dict[str, Any]) -> Reply:
        role = _role(request)
        if role == "triage":
            return tool_calls(("transfer_to_billing", {"reason": "a charge"}))
        if role == "billing" and "ask_researcher" not in {
            c["function"]["name"] for m in request["messages"] for c in m.get("tool_calls") or []
        }:
            return tool_calls(("ask_researcher", {"task": "What is the policy for double charges?"}))
        if role == "researcher":
            return text("help-center/refunds.md: double charges are refunded within 5 days.")
        return text("You will get the second charge back within 5 days; a person confirms it.")

    fake_openai.handler("team", answer)

    result = _load("support-triage").run_sync("Card 4111 1111 1111 1111 was charged twice!")

    assert result.status == "done"
    assert result.final_text.startswith("You will get the second charge back")
    researcher = next(r.request for r in fake_openai.requests("team") if _role(r.request) == "researcher")
    seen = _user_text(researcher)
    assert seen.startswith("What is the policy for double charges?")
    assert "4111" not in seen  # drop_matching removed the customer's message from the shared context
    assert [(d.parent, d.agent, d.status) for d in result.delegations] == [("billing", "researcher", "ok")]


# -- research-report ----------------------------------------------------------------------
def test_research_findings_reach_the_writer_verbatim(fake_openai: FakeOpenAI) -> None:
    fake_openai.handler("team", simple_model)

    result = _load("research-report").run_sync("Compare Rust and Go")

    assert result.status == "done"
    by_agent = {d.agent: d for d in result.delegations}
    assert by_agent["researcher"].ref == "researcher-1"
    writer = next(
        r.request
        for r in fake_openai.requests("team")
        if task_of(r.request).startswith("Compare Rust and Go (for writer)")
    )
    assert f"ref=researcher-1>>>\n{by_agent['researcher'].response}\n<<<END " in _user_text(writer)


@pytest.mark.parametrize(
    ("question", "article"),
    [
        ("I was charged twice this month", "billing-double-charge.md"),  # the example in the file's header
        ("Can I get a refund?", "billing-refunds.md"),
    ],
)
def test_support_triage_offline_researcher_finds_an_article(question: str, article: str) -> None:
    """As a new user runs it: offline, the researcher searches for one word of the question (not the
    heading of the conversation forwarded to it, nor "I"), so the answer quotes an article, not a grep error."""
    result = teamrun.load_team(REPO / "teams" / "support-triage.yaml", model="offline").run_sync(question)

    assert result.status == "done"
    assert f"help-center/{article}" in result.final_text
    assert "exited with code" not in result.final_text
